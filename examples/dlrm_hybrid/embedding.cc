// Sharded embedding tables with sparse row-wise Adagrad; see embedding.h.
#include "embedding.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/random.h"

namespace dlrm {

using namespace examples;  // Rng, mix64, streamSeed

EmbeddingShard::EmbeddingShard(const std::vector<int>& tableSizes, const EmbeddingConfig& config, int rank,
                               int ranks, Sharding sharding)
    : config_(config) {
  const size_t D = config_.dim;
  const int T = static_cast<int>(tableSizes.size());
  if (sharding == Sharding::kRow) rowStride_ = ranks, rowOffset_ = rank;
  std::vector<float> scale(D);
  for (size_t d = 0; d < D; d++) scale[d] = config_.initScale * std::pow(config_.initDecay, static_cast<float>(d));
  for (int t = sharding == Sharding::kRow ? 0 : rank; t < T; t += sharding == Sharding::kRow ? 1 : ranks) {
    owned_.push_back(t);
    const int rows = tableSizes[t] > rowOffset_ ? (tableSizes[t] - rowOffset_ + rowStride_ - 1) / rowStride_ : 0;
    std::vector<float> w(static_cast<size_t>(rows) * D);
    // Row id's entries are draws id D .. id D + D - 1 of table t's stream.
    Rng rng(streamSeed(config_.seed, 300, t));
    rng.skip(static_cast<uint64_t>(rowOffset_) * D);
    for (size_t i = 0; i < w.size(); i++) {
      w[i] = static_cast<float>(scale[i % D] * rng.uniform(-1.0, 1.0));
      if (i % D == D - 1) rng.skip(static_cast<uint64_t>(rowStride_ - 1) * D);
    }
    weights_.push_back(std::move(w));
    accumulator_.emplace_back(rows, config_.initialAccumulator);
  }
  rowGrad_.resize(D);
}

void EmbeddingShard::lookup(int j, const int32_t* ids, int n, float* out) const {
  const size_t D = config_.dim;
  const float* w = weights_[j].data();
  for (int i = 0; i < n; i++) std::memcpy(out + i * D, w + local(ids[i]) * D, D * sizeof(float));
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
    if (sq == 0.f) continue;  // masked out (DCT-MP) or a zero partial (DES): nothing to learn
    float& a = acc[local(id)];
    a += sq / D;
    const float step = config_.lr / (std::sqrt(a) + config_.eps);
    float* row = w + local(id) * D;
    for (size_t d = 0; d < D; d++) row[d] -= step * rowGrad_[d];
  }
}

}  // namespace dlrm
