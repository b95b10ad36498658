// Model-parallel embedding tables: table t lives on rank t % P only.
//
// A rank owns tables {rank, rank + P, rank + 2P, ...}; "local table j" is
// the j-th of them in ascending order (global table rank + j P). Tables are
// initialised from a PRNG seeded by their global number, so the model is the
// same whatever P is. Updates are sparse: only rows that appear in the
// batch change, with row-wise Adagrad (one accumulator per row, as in
// FBGEMM's rowwise_adagrad): duplicate ids are summed first, then
//   acc += mean_d(g_d^2);  w -= lr g / (sqrt(acc) + eps).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dlrm {

struct EmbeddingConfig {
  int dim = 64;
  float initScale = 0.05f;  // entries uniform in [-initScale, initScale] ...
  float initDecay = 0.4f;   // ... times initDecay^d for column d (see README)
  float lr = 0.01f;
  float initialAccumulator = 0.f;
  float eps = 1e-8f;
  uint64_t seed = 7;
};

class EmbeddingShard {
 public:
  EmbeddingShard(const std::vector<int>& tableSizes, const EmbeddingConfig& config, int rank, int ranks);
  // Global numbers of the owned tables, ascending.
  const std::vector<int>& owned() const { return owned_; }
  int dim() const { return config_.dim; }
  // out[i] = row ids[i] of local table j (n rows of dim() floats).
  void lookup(int j, const int32_t* ids, int n, float* out) const;
  // Sparse row-wise Adagrad step of local table j with grads[i] for ids[i].
  void update(int j, const int32_t* ids, int n, const float* grads);

 private:
  EmbeddingConfig config_;
  std::vector<int> owned_;
  std::vector<std::vector<float>> weights_;      // per local table: rows x dim
  std::vector<std::vector<float>> accumulator_;  // per local table: rows
  std::vector<int> order_;     // scratch: batch positions sorted by id
  std::vector<float> rowGrad_; // scratch: one summed gradient row
};

}  // namespace dlrm
