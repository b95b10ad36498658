// The model-parallel boundary under row sharding: every rank holds a
// partial sum-pooled embedding for every (sample, table) of the global
// batch, and a sample's pooled embedding is the sum of the partials over the
// ranks: a reduce-scatter (forward) and the gradient's way back (backward).
//
// Rows: one per (sample, table), D floats; partials are [B][T][D] in global
// sample order, so rank q's samples' rows are the contiguous block
// [offset(q) T, offset(q + 1) T), as dctDesReduceScatter takes them; the
// summed rows are [b][T][D] for this rank's b samples.
//
// Two forms, bit-identical results (both sum the P partials of a row in rank
// order starting from +0 in fp32):
//  * dense, what a user writes without libdct (TorchRec's row-wise pattern):
//    MPI_Alltoallv of the full partial rows, each rank sums the P blocks of
//    its samples; backward MPI_Allgatherv of the summed rows' gradients,
//    then rows whose forward partial was zero are zeroed (the DES contract,
//    so the two forms update the same rows);
//  * DES: dctDesReduceScatter / dctDesReduceScatterBackward over one plan:
//    only non-zero partial rows travel (a row bitmap plus values), and the
//    gradient goes back only to the ranks whose partial was non-zero.
#pragma once

#include <dct/dct_mpi.h>

#include <cstdint>
#include <vector>

#include "exchange.h"
#include "layout.h"

namespace dlrm {

class RowExchange {
 public:
  // des: one DES plan for the whole run (collective), keeping `density` of
  // each non-zero row (1: exact); else the dense form.
  RowExchange(const Split& split, int tables, int dim, bool des, double density, dctComm_t comm);
  ~RowExchange();
  RowExchange(const RowExchange&) = delete;
  RowExchange& operator=(const RowExchange&) = delete;
  bool des() const { return plan_ != nullptr; }
  // partials: [B][T][D]; summed: [b][T][D] (this rank's samples). Not in place.
  void forward(const float* partials, float* summed);
  // Once per forward: gradSummed shaped like summed, gradPartials like
  // partials (zero rows where this rank's forward partial row was zero).
  void backward(const float* gradSummed, float* gradPartials);
  const Traffic& traffic() const { return traffic_; }
  // The DES plan's statistics (DES only; zeros otherwise).
  dctAlltoallStats_t stats() const;

 private:
  const Split split_;
  const size_t row_;  // floats per sample: T D
  const int dim_, rank_;
  dctComm_t comm_;
  dctDesPlan_t plan_ = nullptr;
  uint64_t denseForward_ = 0, denseBackward_ = 0;
  std::vector<float> blocks_;         // dense: the P partial blocks of this rank's samples
  std::vector<unsigned char> nonZero_;  // dense: per partial row of the last forward
  Traffic traffic_;
};

}  // namespace dlrm
