// Held-out evaluation: a fixed set of samples from the held-out stream, cut
// into chunks of one global batch (so the training split and row layout
// apply). Every rank scores its slice of each chunk; the scores and labels
// are then allgathered, so every rank computes the same log loss and AUC.
#pragma once

#include <functional>
#include <vector>

#include "data.h"
#include "exchange.h"
#include "layout.h"
#include "model.h"

namespace dlrm {

struct HeldOut {
  std::vector<Batch> chunks;  // each of split.total() samples, this rank's slice labelled
};

struct Metrics {
  double logLoss = 0, auc = 0;
};

HeldOut makeHeldOut(const Generator& generator, int samples, const Split& split, int rank);
// The model's logits for this rank's slice of a chunk (a forward pass over
// an exchange kept apart from training's, so its byte counts stay clean).
using Forward = std::function<const float*(const Batch&)>;
// The model's held-out metrics.
Metrics evaluate(const HeldOut& heldOut, const Forward& forward);
// The teacher's own logits as scores: the Bayes-optimal metrics, a ceiling.
Metrics teacherMetrics(const HeldOut& heldOut);

}  // namespace dlrm
