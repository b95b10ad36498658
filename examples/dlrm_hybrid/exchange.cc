// Dense and DCT versions of the MP boundary and of the DP gradient sync;
// see exchange.h.
#include "exchange.h"

#include <cmath>
#include <cstdio>

#include "check.h"

namespace dlrm {
namespace {

// Bytes of full rows this rank sends to the other ranks.
uint64_t remoteBytes(const std::vector<size_t>& rows, int self, int dim) {
  uint64_t sum = 0;
  for (size_t q = 0; q < rows.size(); q++)
    if (static_cast<int>(q) != self) sum += static_cast<uint64_t>(rows[q]) * dim * sizeof(float);
  return sum;
}

}  // namespace

EmbeddingExchange::EmbeddingExchange(const RowLayout& layout, int dim, const MpOptions& options, dctComm_t comm)
    : layout_(layout), dim_(dim), rank_([comm] {
        int r = 0;
        DLRM_DCT_CHECK(comm, dctCommRank(comm, &r));
        return r;
      }()),
      comm_(comm) {
  denseForward_ = remoteBytes(layout_.sendRows, rank_, dim_);
  denseBackward_ = remoteBytes(layout_.recvRows, rank_, dim_);
  if (options.density <= 0) return;
  dctConfig_t config = DCT_CONFIG_INITIALIZER;
  config.density = options.density;
  config.rowSelection = options.rowSelection;
  config.wireType = options.wireType;
  if (options.thresholdInterval > 0) config.thresholdInterval = options.thresholdInterval;
  DLRM_DCT_CHECK(comm_, dctAlltoallPlanCreate(comm_, layout_.sendRows.data(), layout_.recvRows.data(),
                                              static_cast<size_t>(dim_), dctFloat32, &config, &plan_));
}

EmbeddingExchange::~EmbeddingExchange() {
  if (plan_) DLRM_DCT_CHECK(comm_, dctAlltoallPlanDestroy(plan_));
}

void EmbeddingExchange::alltoallv(const float* send, const std::vector<size_t>& sendRows,
                                  const std::vector<size_t>& sendOffsets, float* recv,
                                  const std::vector<size_t>& recvRows, const std::vector<size_t>& recvOffsets) {
  const size_t P = sendRows.size();
  std::vector<int> sc(P), sd(P), rc(P), rd(P);
  for (size_t q = 0; q < P; q++) {  // this example's sizes fit MPI's int counts
    sc[q] = static_cast<int>(sendRows[q] * dim_), sd[q] = static_cast<int>(sendOffsets[q] * dim_);
    rc[q] = static_cast<int>(recvRows[q] * dim_), rd[q] = static_cast<int>(recvOffsets[q] * dim_);
  }
  DLRM_MPI_CHECK(MPI_Alltoallv(send, sc.data(), sd.data(), MPI_FLOAT, recv, rc.data(), rd.data(), MPI_FLOAT,
                               MPI_COMM_WORLD));
}

void EmbeddingExchange::forward(const float* send, float* recv) {
  const double start = MPI_Wtime();
  if (plan_) DLRM_DCT_CHECK(comm_, dctSparseAlltoall(plan_, send, recv, nullptr));
  else alltoallv(send, layout_.sendRows, layout_.sendOffsets, recv, layout_.recvRows, layout_.recvOffsets);
  const uint64_t bytes = plan_ ? stats().forwardBytesSent : denseForward_;
  traffic_.add(start, bytes, denseForward_);
  traffic_.forwardSent += bytes;
}

void EmbeddingExchange::backward(const float* gradRecv, float* gradSend) {
  const double start = MPI_Wtime();
  if (plan_) DLRM_DCT_CHECK(comm_, dctSparseAlltoallBackward(plan_, gradRecv, gradSend, nullptr));
  else alltoallv(gradRecv, layout_.recvRows, layout_.recvOffsets, gradSend, layout_.sendRows, layout_.sendOffsets);
  traffic_.add(start, plan_ ? stats().backwardBytesSent : denseBackward_, denseBackward_);
}

dctAlltoallStats_t EmbeddingExchange::stats() const {
  dctAlltoallStats_t s{};
  if (plan_) DLRM_DCT_CHECK(comm_, dctAlltoallPlanGetStats(plan_, &s));
  return s;
}

GradientSync::GradientSync(size_t count, const DpOptions& options, dctComm_t comm) : count_(count), comm_(comm) {
  DLRM_DCT_CHECK(comm_, dctCommSize(comm_, &ranks_));
  if (options.density <= 0) return;
  dctConfig_t config = DCT_CONFIG_INITIALIZER;
  config.density = options.density;
  config.errorFeedback = 1;
  config.algorithm = options.algorithm;
  config.wireType = options.wireType;
  if (options.thresholdInterval > 0) config.thresholdInterval = options.thresholdInterval;
  if (options.warmupSteps >= 0) config.warmupSteps = options.warmupSteps;
  DLRM_DCT_CHECK(comm_, dctCompressorCreate(comm_, count_, dctFloat32, &config, &compressor_));
}

GradientSync::~GradientSync() {
  if (compressor_) DLRM_DCT_CHECK(comm_, dctCompressorDestroy(compressor_));
}

void GradientSync::sum(float* grads) {
  const double start = MPI_Wtime();
  const uint64_t denseBytes = count_ * sizeof(float);
  if (compressor_) {
    // dctAvg of P times each contribution is their sum: the exact global
    // mean gradient even when the ranks' batch slices differ in size.
    const float p = static_cast<float>(ranks_);
    for (size_t i = 0; i < count_; i++) grads[i] *= p;
    DLRM_DCT_CHECK(comm_, dctSparseAllreduce(grads, grads, count_, dctFloat32, dctAvg, compressor_, comm_, nullptr));
  } else {
    DLRM_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, grads, static_cast<int>(count_), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
  }
  traffic_.add(start, compressor_ ? stats().bytesSent : denseBytes, denseBytes);
}

dctStats_t GradientSync::stats() const {
  dctStats_t s{};
  if (compressor_) DLRM_DCT_CHECK(comm_, dctCompressorGetStats(compressor_, &s));
  return s;
}

}  // namespace dlrm
