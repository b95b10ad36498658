// Forward and backward of one rank's part of the DLRM; see model.h and the
// row layout in layout.h.
#include "model.h"

#include <algorithm>
#include <cstring>

#include "common/random.h"

namespace dlrm {

using namespace examples;  // Rng, mix64, streamSeed
namespace {

std::vector<int> concat(int in, const std::vector<int>& hidden, int out) {
  std::vector<int> sizes{in};
  sizes.insert(sizes.end(), hidden.begin(), hidden.end());
  sizes.push_back(out);
  return sizes;
}

}  // namespace

Dlrm::Dlrm(const ModelConfig& config, const std::vector<int>& tableSizes, int rank, int ranks, Sharding sharding)
    : rank_(rank),
      ranks_(ranks),
      tables_(static_cast<int>(tableSizes.size())),
      dim_(config.embedding.dim),
      bottom_(concat(config.denseFeatures, config.bottomHidden, config.embedding.dim), true),
      top_(concat(Interaction(tables_ + 1, dim_).outputs(), config.topHidden, 1), false),
      interaction_(tables_ + 1, dim_),
      embeddings_(tableSizes, config.embedding, rank, ranks, sharding) {
  params_.assign(bottom_.paramCount() + top_.paramCount(), 0.f);
  grads_.assign(params_.size(), 0.f);
  bottom_.bind(params_.data(), grads_.data());
  top_.bind(params_.data() + bottom_.paramCount(), grads_.data() + bottom_.paramCount());
  bottom_.init(streamSeed(config.seed, 1));
  top_.init(streamSeed(config.seed, 2));
}

const float* Dlrm::forward(const Batch& batch, const Split& split, const RowLayout& layout,
                           EmbeddingExchange& exchange) {
  const int b = split.counts[rank_], F = tables_ + 1;
  const size_t D = dim_;
  const float* z = bottom_.forward(batch.dense.data(), b);
  // Owner lookups for the whole global batch, in send-buffer order.
  send_.resize(layout.sendTotal() * D);
  const std::vector<int>& owned = embeddings_.owned();
  for (int q = 0; q < ranks_; q++)
    for (size_t j = 0; j < owned.size(); j++) {
      const int32_t* ids = batch.ids.data() + static_cast<size_t>(owned[j]) * batch.size + split.offsets[q];
      const size_t row = layout.sendOffsets[q] + j * split.counts[q];
      embeddings_.lookup(static_cast<int>(j), ids, split.counts[q], send_.data() + row * D);
    }
  recv_.resize(layout.recvTotal() * D);
  exchange.forward(send_.data(), recv_.data());
  // Per local sample: [bottom output, embedding of table 0 .. T-1].
  features_.resize(static_cast<size_t>(b) * F * D);
  for (int i = 0; i < b; i++) {
    float* f = features_.data() + static_cast<size_t>(i) * F * D;
    std::memcpy(f, z + i * D, D * sizeof(float));
    for (int t = 0; t < tables_; t++) {
      const size_t row = layout.recvOffsets[t % ranks_] + static_cast<size_t>(t / ranks_) * b + i;
      std::memcpy(f + (t + 1) * D, recv_.data() + row * D, D * sizeof(float));
    }
  }
  return head(b);
}

const float* Dlrm::head(int b) {
  interOut_.resize(static_cast<size_t>(b) * interaction_.outputs());
  interaction_.forward(features_.data(), b, interOut_.data());
  return top_.forward(interOut_.data(), b);
}

void Dlrm::tail(const float* dlogits, int b) {
  const int F = tables_ + 1;
  const size_t D = dim_;
  std::fill(grads_.begin(), grads_.end(), 0.f);
  dInter_.resize(static_cast<size_t>(b) * interaction_.outputs());
  top_.backward(dlogits, dInter_.data());
  dFeatures_.resize(features_.size());
  interaction_.backward(features_.data(), dInter_.data(), b, dFeatures_.data());
  dBottom_.resize(static_cast<size_t>(b) * D);
  for (int i = 0; i < b; i++)
    std::memcpy(dBottom_.data() + i * D, dFeatures_.data() + static_cast<size_t>(i) * F * D, D * sizeof(float));
  bottom_.backward(dBottom_.data(), nullptr);
}

void Dlrm::backward(const float* dlogits, const Batch& batch, const Split& split, const RowLayout& layout,
                    EmbeddingExchange& exchange) {
  const int b = split.counts[rank_], F = tables_ + 1;
  const size_t D = dim_;
  tail(dlogits, b);
  dRecv_.resize(recv_.size());
  for (int i = 0; i < b; i++) {
    const float* df = dFeatures_.data() + static_cast<size_t>(i) * F * D;
    for (int t = 0; t < tables_; t++) {
      const size_t row = layout.recvOffsets[t % ranks_] + static_cast<size_t>(t / ranks_) * b + i;
      std::memcpy(dRecv_.data() + row * D, df + (t + 1) * D, D * sizeof(float));
    }
  }
  dSend_.resize(send_.size());
  exchange.backward(dRecv_.data(), dSend_.data());
  // Each owned table's gradient rows, back in global sample order, then one
  // sparse update per table (duplicates across destinations summed).
  const std::vector<int>& owned = embeddings_.owned();
  tableGrad_.resize(static_cast<size_t>(batch.size) * D);
  for (size_t j = 0; j < owned.size(); j++) {
    for (int q = 0; q < ranks_; q++) {
      const size_t row = layout.sendOffsets[q] + j * split.counts[q];
      std::memcpy(tableGrad_.data() + static_cast<size_t>(split.offsets[q]) * D, dSend_.data() + row * D,
                  static_cast<size_t>(split.counts[q]) * D * sizeof(float));
    }
    embeddings_.update(static_cast<int>(j), batch.ids.data() + static_cast<size_t>(owned[j]) * batch.size,
                       batch.size, tableGrad_.data());
  }
}

}  // namespace dlrm
