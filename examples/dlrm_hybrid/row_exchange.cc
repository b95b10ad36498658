// Dense and DES reduce-scatter of the row-sharded embedding partials; see
// row_exchange.h.
#include "row_exchange.h"

#include <algorithm>

#include "check.h"

namespace dlrm {

RowExchange::RowExchange(const Split& split, int tables, int dim, bool des, double density, dctComm_t comm)
    : split_(split), row_(static_cast<size_t>(tables) * dim), dim_(dim), rank_([comm] {
        int r = 0;
        DLRM_DCT_CHECK(comm, dctCommRank(comm, &r));
        return r;
      }()),
      comm_(comm) {
  const int P = split_.ranks(), b = split_.counts[rank_];
  // Dense: every other rank's samples' partials out, this rank's summed
  // gradients to every other rank.
  denseForward_ = static_cast<uint64_t>(split_.total() - b) * row_ * sizeof(float);
  denseBackward_ = static_cast<uint64_t>(P - 1) * b * row_ * sizeof(float);
  if (!des) return;
  std::vector<size_t> rowsPerRank(P);
  for (int q = 0; q < P; q++) rowsPerRank[q] = static_cast<size_t>(split_.counts[q]) * tables;
  dctConfig_t thinned = DCT_CONFIG_INITIALIZER;
  thinned.density = density;
  DLRM_DCT_CHECK(comm_, dctDesPlanCreate(comm_, rowsPerRank.data(), static_cast<size_t>(dim_), dctFloat32,
                                         density < 1 ? &thinned : nullptr, &plan_));
}

RowExchange::~RowExchange() {
  if (plan_) DLRM_DCT_CHECK(comm_, dctDesPlanDestroy(plan_));
}

void RowExchange::forward(const float* partials, float* summed) {
  const double start = MPI_Wtime();
  const int P = split_.ranks(), b = split_.counts[rank_];
  uint64_t bytes = 0;
  if (plan_) {
    DLRM_DCT_CHECK(comm_, dctDesReduceScatter(plan_, partials, summed, nullptr));
    bytes = stats().forwardBytesSent;
  } else {
    // This example's sizes fit MPI's int counts.
    std::vector<int> sc(P), sd(P), rc(P, static_cast<int>(b * row_)), rd(P);
    for (int q = 0; q < P; q++) {
      sc[q] = static_cast<int>(split_.counts[q] * row_), sd[q] = static_cast<int>(split_.offsets[q] * row_);
      rd[q] = static_cast<int>(q * b * row_);
    }
    blocks_.resize(static_cast<size_t>(P) * b * row_);
    DLRM_MPI_CHECK(MPI_Alltoallv(partials, sc.data(), sd.data(), MPI_FLOAT, blocks_.data(), rc.data(), rd.data(),
                                 MPI_FLOAT, MPI_COMM_WORLD));
    const size_t n = b * row_;
    std::fill(summed, summed + n, 0.f);
    for (int q = 0; q < P; q++) {
      const float* block = blocks_.data() + q * n;
      for (size_t k = 0; k < n; k++) summed[k] += block[k];
    }
    // Remembered for the backward (what DES keeps as its row masks).
    const size_t rows = static_cast<size_t>(split_.total()) * row_ / dim_;
    nonZero_.resize(rows);
    for (size_t r = 0; r < rows; r++) {
      const float* p = partials + r * dim_;
      nonZero_[r] = std::any_of(p, p + dim_, [](float v) { return v != 0.f; });
    }
    bytes = denseForward_;
  }
  traffic_.add(start, bytes, denseForward_);
  traffic_.forwardSent += bytes;
}

void RowExchange::backward(const float* gradSummed, float* gradPartials) {
  const double start = MPI_Wtime();
  const int P = split_.ranks(), b = split_.counts[rank_];
  uint64_t bytes = 0;
  if (plan_) {
    DLRM_DCT_CHECK(comm_, dctDesReduceScatterBackward(plan_, gradSummed, gradPartials, nullptr));
    bytes = stats().backwardBytesSent;
  } else {
    std::vector<int> rc(P), rd(P);
    for (int q = 0; q < P; q++)
      rc[q] = static_cast<int>(split_.counts[q] * row_), rd[q] = static_cast<int>(split_.offsets[q] * row_);
    DLRM_MPI_CHECK(MPI_Allgatherv(gradSummed, static_cast<int>(b * row_), MPI_FLOAT, gradPartials, rc.data(),
                                  rd.data(), MPI_FLOAT, MPI_COMM_WORLD));
    for (size_t r = 0; r < nonZero_.size(); r++)
      if (!nonZero_[r]) std::fill(gradPartials + r * dim_, gradPartials + (r + 1) * dim_, 0.f);
    bytes = denseBackward_;
  }
  traffic_.add(start, bytes, denseBackward_);
}

dctAlltoallStats_t RowExchange::stats() const {
  dctAlltoallStats_t s{};
  if (plan_) DLRM_DCT_CHECK(comm_, dctDesPlanGetStats(plan_, &s));
  return s;
}

}  // namespace dlrm
