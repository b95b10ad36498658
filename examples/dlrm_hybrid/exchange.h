// The two communication paths of hybrid-parallel DLRM training:
//  * EmbeddingExchange, the model-parallel boundary: embedding rows from the
//    table owners to the ranks that train on the samples (forward) and their
//    gradients back (backward), in the layout of layout.h. Either the dense
//    baseline, MPI_Alltoallv of full rows, or DCT-MP: dctSparseAlltoall /
//    dctSparseAlltoallBackward over one plan (top-K per row).
//  * GradientSync, the data-parallel path: the replicated MLP parameters'
//    gradients, one fused flat bucket, summed over the ranks. Either the
//    dense baseline, MPI_Allreduce, or DCT-DP: dctSparseAllreduce (dctAvg)
//    with one compressor (error feedback).
// Both count the payload bytes this rank sends (its own rows excluded) and
// what the dense baseline would send, the same formula in every mode.
#pragma once

#include <dct/dct_mpi.h>

#include <cstdint>

#include "layout.h"

namespace dlrm {

struct Traffic {
  uint64_t sent = 0;   // payload bytes this rank sent, cumulative
  uint64_t forwardSent = 0;  // the part of `sent` sent by forward calls (MP paths)
  uint64_t dense = 0;  // what the dense baseline sends for the same calls
  uint64_t calls = 0;
  double seconds = 0;  // wall time inside the calls (MPI_Wtime)
  // One call that began at `start` (MPI_Wtime) and sent `bytes`.
  void add(double start, uint64_t bytes, uint64_t denseBytes) {
    sent += bytes;
    dense += denseBytes;
    calls++;
    seconds += MPI_Wtime() - start;
  }
};

struct MpOptions {
  double density = 0;  // <= 0: dense MPI_Alltoallv; else DCT-MP with K = ceil(density D)
  dctDataType_t wireType = dctFloat32;  // the type kept values travel in
  int rowSelection = dctRowTopK;        // dctRowSelection_t
  int thresholdInterval = 0;            // dctRowThreshold: steps between tau estimates; 0: the library's default
};

class EmbeddingExchange {
 public:
  EmbeddingExchange(const RowLayout& layout, int dim, const MpOptions& options, dctComm_t comm);
  ~EmbeddingExchange();
  EmbeddingExchange(const EmbeddingExchange&) = delete;
  EmbeddingExchange& operator=(const EmbeddingExchange&) = delete;
  bool compressed() const { return plan_ != nullptr; }
  // send: layout.sendTotal() rows; recv: layout.recvTotal() rows.
  void forward(const float* send, float* recv);
  // gradRecv shaped like forward's recv, gradSend like its send.
  void backward(const float* gradRecv, float* gradSend);
  const Traffic& traffic() const { return traffic_; }
  // The plan's own statistics (compressed only; zeros otherwise).
  dctAlltoallStats_t stats() const;

 private:
  void alltoallv(const float* send, const std::vector<size_t>& sendRows, const std::vector<size_t>& sendOffsets,
                 float* recv, const std::vector<size_t>& recvRows, const std::vector<size_t>& recvOffsets);
  const RowLayout layout_;
  const int dim_, rank_;
  dctComm_t comm_;
  dctAlltoallPlan_t plan_ = nullptr;
  uint64_t denseForward_ = 0, denseBackward_ = 0;
  Traffic traffic_;
};

struct DpOptions {
  double density = 0;       // <= 0: dense MPI_Allreduce
  int thresholdInterval = 0;  // L; 0: the library's default
  int warmupSteps = -1;       // dense steps first; -1: the library's default
  int algorithm = dctAlgoAllgather;  // dctAlgorithm_t; see README (auto vs allgather)
  dctDataType_t wireType = dctFloat32;  // the type kept values travel in
};

class GradientSync {
 public:
  GradientSync(size_t count, const DpOptions& options, dctComm_t comm);
  ~GradientSync();
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;
  bool compressed() const { return compressor_ != nullptr; }
  // In place: this rank's contribution to the global-batch mean gradient
  // (its samples' gradient sum / B) in, the sum over ranks out: the same
  // bits on every rank.
  void sum(float* grads);
  const Traffic& traffic() const { return traffic_; }
  dctStats_t stats() const;  // zeros when dense

 private:
  size_t count_;
  int ranks_;
  dctComm_t comm_;
  dctCompressor_t compressor_ = nullptr;
  Traffic traffic_;
};

}  // namespace dlrm
