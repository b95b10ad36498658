// One rank's part of the hybrid-parallel DLRM:
//   bottom MLP (13 -> ... -> D, ReLU)                 replicated (data parallel)
//   embedding tables (T tables of dim D)              sharded (model parallel):
//                                                     by table or by rows
//   dot interaction over [bottom output, T embeddings]
//   top MLP (D + (T+1)T/2 -> ... -> 1 logit)          replicated (data parallel)
// The replicated parameters of both MLPs live in one flat vector (and one
// flat gradient vector): the DP bucket.
#pragma once

#include <cstdint>
#include <vector>

#include "data.h"
#include "embedding.h"
#include "exchange.h"
#include "interaction.h"
#include "layout.h"
#include "mlp.h"
#include "row_exchange.h"

namespace dlrm {

struct ModelConfig {
  int denseFeatures = 13;
  std::vector<int> bottomHidden = {128};
  std::vector<int> topHidden = {256, 128};
  EmbeddingConfig embedding;  // embedding.dim is D
  uint64_t seed = 11;         // MLP initialisation (the same on every rank)
};

class Dlrm {
 public:
  Dlrm(const ModelConfig& config, const std::vector<int>& tableSizes, int rank, int ranks, Sharding sharding);
  std::vector<float>& params() { return params_; }
  std::vector<float>& grads() { return grads_; }
  const EmbeddingShard& embeddings() const { return embeddings_; }
  // Logits of this rank's slice of `batch` (split.counts[rank] values).
  const float* forward(const Batch& batch, const Split& split, const RowLayout& layout, EmbeddingExchange& exchange);
  // After forward on the same arguments: dlogits = dLoss/dlogit per local
  // sample. Sets grads() (this rank's contribution), sends the embedding
  // gradients back to the owners and applies their sparse updates.
  void backward(const float* dlogits, const Batch& batch, const Split& split, const RowLayout& layout,
                EmbeddingExchange& exchange);
  // The same under row sharding (model_rows.cc): partial pooled embeddings
  // summed by `exchange`, its backward feeding the owned rows' updates.
  const float* forward(const Batch& batch, const Split& split, RowExchange& exchange);
  void backward(const float* dlogits, const Batch& batch, const Split& split, RowExchange& exchange);

 private:
  // features_ filled for b samples -> interaction -> top MLP: the logits.
  const float* head(int b);
  // Back from dlogits through the top MLP, interaction and bottom MLP
  // (grads_ set); leaves dFeatures_, whose slots 1..T are the embeddings'.
  void tail(const float* dlogits, int b);

  int rank_, ranks_, tables_, dim_;
  std::vector<float> params_, grads_;
  Mlp bottom_, top_;
  Interaction interaction_;
  EmbeddingShard embeddings_;
  // Activations and gradients of the last batch.
  std::vector<float> send_, recv_, features_, interOut_;
  std::vector<float> dInter_, dFeatures_, dBottom_, dRecv_, dSend_, tableGrad_;
  std::vector<float> partials_, summed_, dSummed_, dPartials_;  // row sharding
  std::vector<int32_t> ownedIds_;                               // row sharding
};

}  // namespace dlrm
