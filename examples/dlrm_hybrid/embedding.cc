// Sharded embedding tables with sparse row-wise Adagrad; see embedding.h.
#include "embedding.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/random.h"

namespace dlrm {

using namespace examples;  // Rng, mix64, streamSeed

EmbeddingShard::EmbeddingShard(const std::vector<int>& tableSizes, const EmbeddingConfig& config, int rank,
                               int ranks)
    : config_(config) {
  const size_t D = config_.dim;
  for (int t = rank; t < static_cast<int>(tableSizes.size()); t += ranks) {
    owned_.push_back(t);
    std::vector<float> w(static_cast<size_t>(tableSizes[t]) * D);
    Rng rng(streamSeed(config_.seed, 300, t));
    std::vector<float> scale(D);
    for (size_t d = 0; d < D; d++) scale[d] = config_.initScale * std::pow(config_.initDecay, static_cast<float>(d));
    for (size_t i = 0; i < w.size(); i++) w[i] = static_cast<float>(scale[i % D] * rng.uniform(-1.0, 1.0));
    weights_.push_back(std::move(w));
    accumulator_.emplace_back(tableSizes[t], config_.initialAccumulator);
  }
  rowGrad_.resize(D);
}

void EmbeddingShard::lookup(int j, const int32_t* ids, int n, float* out) const {
  const size_t D = config_.dim;
  const float* w = weights_[j].data();
  for (int i = 0; i < n; i++) std::memcpy(out + i * D, w + static_cast<size_t>(ids[i]) * D, D * sizeof(float));
}

void EmbeddingShard::update(int j, const int32_t* ids, int n, const float* grads) {
  const size_t D = config_.dim;
  float* w = weights_[j].data();
  float* acc = accumulator_[j].data();
  order_.resize(n);
  for (int i = 0; i < n; i++) order_[i] = i;
  // Stable: duplicates are summed in batch order, the same on every run.
  std::stable_sort(order_.begin(), order_.end(), [ids](int a, int b) { return ids[a] < ids[b]; });
  for (int s = 0; s < n;) {
    const int32_t id = ids[order_[s]];
    std::fill(rowGrad_.begin(), rowGrad_.end(), 0.f);
    for (; s < n && ids[order_[s]] == id; s++) {
      const float* g = grads + static_cast<size_t>(order_[s]) * D;
      for (size_t d = 0; d < D; d++) rowGrad_[d] += g[d];
    }
    float sq = 0;
    for (size_t d = 0; d < D; d++) sq += rowGrad_[d] * rowGrad_[d];
    if (sq == 0.f) continue;  // masked out entirely (DCT-MP): nothing to learn from
    acc[id] += sq / D;
    const float step = config_.lr / (std::sqrt(acc[id]) + config_.eps);
    float* row = w + static_cast<size_t>(id) * D;
    for (size_t d = 0; d < D; d++) row[d] -= step * rowGrad_[d];
  }
}

}  // namespace dlrm
