// Held-out metrics: binary cross-entropy (log loss) and ROC AUC.
#pragma once

#include <cstddef>

namespace dlrm {

// Mean of -[y log p + (1-y) log(1-p)], p = sigmoid(logit), computed from
// the logit without overflow.
double logLoss(const float* logits, const float* labels, size_t n);
// Area under the ROC curve by sorting the scores (Mann-Whitney U with tied
// scores given their average rank). 0.5 when one class is missing.
double rocAuc(const float* scores, const float* labels, size_t n);

}  // namespace dlrm
