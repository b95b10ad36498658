// Log loss and AUC; see metrics.h.
#include "metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace dlrm {

double logLoss(const float* logits, const float* labels, size_t n) {
  double sum = 0;
  for (size_t i = 0; i < n; i++) {
    const double z = logits[i];
    // -log sigmoid(z) = softplus(-z); -log(1 - sigmoid(z)) = softplus(z).
    const double softplus = std::max(z, 0.0) + std::log1p(std::exp(-std::fabs(z)));
    sum += labels[i] > 0.5f ? softplus - z : softplus;
  }
  return n ? sum / n : 0.0;
}

double rocAuc(const float* scores, const float* labels, size_t n) {
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [scores](size_t a, size_t b) { return scores[a] < scores[b]; });
  double positives = 0, rankSum = 0;
  for (size_t s = 0; s < n;) {
    size_t e = s;
    while (e < n && scores[order[e]] == scores[order[s]]) e++;
    const double averageRank = 0.5 * (s + 1 + e);  // ranks s+1 .. e
    for (size_t k = s; k < e; k++)
      if (labels[order[k]] > 0.5f) positives++, rankSum += averageRank;
    s = e;
  }
  const double negatives = n - positives;
  if (positives == 0 || negatives == 0) return 0.5;
  return (rankSum - positives * (positives + 1) / 2) / (positives * negatives);
}

}  // namespace dlrm
