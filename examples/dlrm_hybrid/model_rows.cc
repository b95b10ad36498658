// Forward and backward of one rank's part of the DLRM under row sharding;
// see model.h and row_exchange.h. The MLPs, interaction and optimizer are
// the table-sharded model's; only the way the embeddings are formed and
// their gradients reach the table rows differs.
#include <algorithm>
#include <cstring>

#include "model.h"

namespace dlrm {

const float* Dlrm::forward(const Batch& batch, const Split& split, RowExchange& exchange) {
  const int b = split.counts[rank_], B = batch.size, F = tables_ + 1, T = tables_;
  const size_t D = dim_;
  const float* z = bottom_.forward(batch.dense.data(), b);
  // Every sample's partial sum-pooled embedding over the ids this rank owns
  // ([B][T][D], global sample order), zero where it owns none. Each bag
  // holds one id here, so the partial is that row or zero.
  partials_.assign(static_cast<size_t>(B) * T * D, 0.f);
  for (int t = 0; t < T; t++) {
    const int32_t* ids = batch.ids.data() + static_cast<size_t>(t) * B;
    for (int s = 0; s < B; s++)
      if (embeddings_.owns(ids[s]))
        embeddings_.lookup(t, ids + s, 1, partials_.data() + (static_cast<size_t>(s) * T + t) * D);
  }
  summed_.resize(static_cast<size_t>(b) * T * D);
  exchange.forward(partials_.data(), summed_.data());
  // Per local sample: [bottom output, embedding of table 0 .. T-1].
  features_.resize(static_cast<size_t>(b) * F * D);
  for (int i = 0; i < b; i++) {
    float* f = features_.data() + static_cast<size_t>(i) * F * D;
    std::memcpy(f, z + i * D, D * sizeof(float));
    std::memcpy(f + D, summed_.data() + static_cast<size_t>(i) * T * D, T * D * sizeof(float));
  }
  return head(b);
}

void Dlrm::backward(const float* dlogits, const Batch& batch, const Split& split, RowExchange& exchange) {
  const int b = split.counts[rank_], B = batch.size, F = tables_ + 1, T = tables_;
  const size_t D = dim_;
  tail(dlogits, b);
  dSummed_.resize(summed_.size());
  for (int i = 0; i < b; i++)
    std::memcpy(dSummed_.data() + static_cast<size_t>(i) * T * D,
                dFeatures_.data() + (static_cast<size_t>(i) * F + 1) * D, T * D * sizeof(float));
  dPartials_.resize(partials_.size());
  exchange.backward(dSummed_.data(), dPartials_.data());
  // Per table, the owned ids and their gradient rows in batch order: the
  // update then sums duplicates in the same order as the table-sharded
  // owner does, so both shardings apply the same steps.
  tableGrad_.resize(static_cast<size_t>(B) * D);
  ownedIds_.resize(B);
  for (int t = 0; t < T; t++) {
    const int32_t* ids = batch.ids.data() + static_cast<size_t>(t) * B;
    int n = 0;
    for (int s = 0; s < B; s++) {
      if (!embeddings_.owns(ids[s])) continue;
      ownedIds_[n] = ids[s];
      std::memcpy(tableGrad_.data() + static_cast<size_t>(n) * D,
                  dPartials_.data() + (static_cast<size_t>(s) * T + t) * D, D * sizeof(float));
      n++;
    }
    embeddings_.update(t, ownedIds_.data(), n, tableGrad_.data());
  }
}

}  // namespace dlrm
