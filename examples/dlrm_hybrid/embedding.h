// The embedding rows one rank holds, with sparse row-wise Adagrad.
//
// Table sharding: a rank owns tables {rank, rank + P, rank + 2P, ...}, every
// row of them; "local table j" is the j-th of them in ascending order
// (global table rank + j P). Row sharding: a rank owns every table (local
// table j is table j) but only the rows id with id % P == rank, stored as
// local row id / P. Row id % P rather than contiguous ranges because the ids
// are Zipf-distributed with id 0 the most frequent: at P = 4 the first
// quarter of a 100k-row table draws 94% of the lookups (rank 0 would hold
// nearly every non-zero partial and do nearly every update), while dealing
// the ids round-robin gives 33/25/22/20% (the single head id 0 alone is
// 13%). Every entry starts as a function of (table, row id) alone (a PRNG
// stream per table, D draws per row), so the model is the same whatever P
// and the sharding are. Updates are sparse: only rows that appear
// in the batch change, with row-wise Adagrad (one accumulator per row, as in
// FBGEMM's rowwise_adagrad): duplicate ids are summed first, then
//   acc += mean_d(g_d^2);  w -= lr g / (sqrt(acc) + eps).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dlrm {

// How the tables are split over the ranks (see above and README.md).
enum class Sharding { kTable, kRow };

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
  EmbeddingShard(const std::vector<int>& tableSizes, const EmbeddingConfig& config, int rank, int ranks,
                 Sharding sharding);
  // Global numbers of the owned tables, ascending.
  const std::vector<int>& owned() const { return owned_; }
  int dim() const { return config_.dim; }
  // Whether this rank holds row `id` of its tables (always, table sharding).
  bool owns(int32_t id) const { return id % rowStride_ == rowOffset_; }
  // out[i] = row ids[i] of local table j (n rows of dim() floats); ids owned.
  void lookup(int j, const int32_t* ids, int n, float* out) const;
  // Sparse row-wise Adagrad step of local table j with grads[i] for ids[i]
  // (owned ids).
  void update(int j, const int32_t* ids, int n, const float* grads);

 private:
  size_t local(int32_t id) const { return static_cast<size_t>(id / rowStride_); }
  EmbeddingConfig config_;
  int rowStride_ = 1, rowOffset_ = 0;  // rows held: id % rowStride_ == rowOffset_
  std::vector<int> owned_;
  std::vector<std::vector<float>> weights_;      // per local table: local rows x dim
  std::vector<std::vector<float>> accumulator_;  // per local table: local rows
  std::vector<int> order_;     // scratch: batch positions sorted by id
  std::vector<float> rowGrad_; // scratch: one summed gradient row
};

}  // namespace dlrm
