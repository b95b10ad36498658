// Collective algorithms. Arguments have been checked locally (api/); the
// algorithms run the agreement themselves (algo/agree.h) so that local work
// that fails on one rank fails every rank.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "base/phase_timer.h"
#include "core/compressor.h"
#include "core/cost_model.h"
#include "dct/dct.h"

namespace dct {

// The algorithm this step will use: the configured one, or auto's choice
// from last step's global counts (k per rank before the first step). Every
// rank computes the same plan; the agreement header double-checks it.
// Planning has no side effect: the decision is committed with the step.
struct Plan {
  dctAlgorithm_t algorithm = dctAlgoDense;
  AutoTuner::Decision decision;  // auto's bookkeeping, applied on commit
  // Split and global top-k: the reduce-scatter by recursive halving
  // (split_halving.h) instead of one alltoallv; DCT_SPLIT_EXCHANGE, else
  // the cost model, from agreed data only.
  bool halving = false;
};
Plan planAlgorithm(dctCompressor_t c, dctComm_t comm);

// A step nested in a hierarchical one (hierarchical_allreduce.cc): it runs
// among the node leaders, on their nodes' sums.
struct Nesting {
  int averageOver = 1;  // dctAvg divides by every rank of the outer comm
  PhaseTimer clock;     // the outer step's laps so far: its phases go on
  // Runs on every leader once the exchange vote has passed and recvbuf
  // holds the result, before anything is committed, given this leader's
  // status since, the step's algorithm and tau; collective over the outer
  // comm. Unless it returns dctSuccess nothing is committed.
  std::function<dctResult_t(dctResult_t, dctAlgorithm_t, double, PhaseTimer&)> beforeCommit;
};

// DCT-DP sparse allreduce as one transaction: local work (compress, pack,
// reserve), header agreement + vote, exchange + reduce, vote, commit. On any
// failure on any rank, every rank returns an error and no compressor state
// changes (sendbuf is untouched, recvbuf undefined): retrying the call is
// correct. `localError` is this rank's argument check (count 0: agreement only).
dctResult_t sparseAllreduce(const void* sendbuf, void* recvbuf, size_t count, const dctDataType_t& dtype,
                            const dctRedOp_t& op, dctCompressor_t c, dctComm_t comm, void* stream,
                            dctResult_t localError, const char* fn, const Nesting* nesting = nullptr);

// The same on a comm with node structure (DCT_HIERARCHY, transport/
// hierarchy.h): each node's tensors are summed on its leader (dense, over
// shared memory), the leaders run sparseAllreduce on those sums, and each
// leader broadcasts the result in its node. Only leaders compress: their
// residual holds their node's error. The same transaction contract, over
// every rank of comm.
dctResult_t hierarchicalAllreduce(const void* sendbuf, void* recvbuf, size_t count, const dctDataType_t& dtype,
                                  const dctRedOp_t& op, dctCompressor_t c, dctComm_t comm, void* stream,
                                  dctResult_t localError, const char* fn);

// Sparse allgather of explicit COO into caller buffers; nnz per rank known.
// `table`: room for 4 comm->size entries, reserved before the agreement's
// vote (nothing allocates here).
dctResult_t sparseAllgather(dctComm_t comm, const void* values, const uint32_t* indices,
                            size_t valueBytes, const std::vector<uint64_t>& nnz,
                            void* recvValues, uint32_t* recvIndices, std::vector<size_t>& table, void* stream);

// The cheapest plan for counts every rank knows exactly (no compressor
// pass, no forecast): the sparse-input allreduce's auto. DCT_TUNE's rules
// first (density: the ranks' mean input density); then the same cost
// model and link fit as planAlgorithm's, with recursive doubling priced
// too (its caller falls back where a rank cannot run it); split only past two ranks; a
// sparse plan only when it models under kSparseInputMargin of dense.
constexpr double kSparseInputMargin = 0.6;
dctAlgorithm_t planExactCounts(dctComm_t comm, const CostInputs& in);
// The plan a DCT_TUNE rule names for these exact counts (dctAlgoAuto: none).
dctAlgorithm_t tunedExactCounts(dctComm_t comm, const CostInputs& in);

// dctSparseInputAllreduce's arguments, checked locally by api/.
struct SparseInput {
  const void* indices;
  const void* values;
  size_t nnz;
  size_t count;
  dctDataType_t dtype;
  dctRedOp_t op;
  int algorithm;  // raw dctAlgorithm_t
  void* dense;
  void* outIndices;
  void* outValues;
  size_t outCapacity;
  size_t* outNnz;
  dctSparseInputInfo_t* info;
  void* stream;
  const char* fn;
  bool wantsCoo() const { return outIndices != nullptr; }
  bool query() const { return dense == nullptr && outIndices == nullptr && outValues == nullptr; }
};

// The comm's scratch for the sparse-input allreduce (comm->sparseInput): a
// compressor of this count and type without a residual, bound to the twin
// of `in`'s buffers, kept across calls so that its buffers are reused.
dctResult_t sparseInputScratch(dctComm_t comm, const SparseInput& in, dctCompressor_t& c);

// The lossless sparse-input allreduce (sparse_input_allreduce.cc) as one
// transaction: any failure on any rank fails every rank; bad arguments
// (localError on some rank) fail before anything is written.
dctResult_t sparseInputAllreduce(dctComm_t comm, const SparseInput& in, dctResult_t localError);

// Plan creation, collective: the ranks agree on the settings and check
// their splits (localError: this rank's own verdict on its arguments), then
// each builds its plan (core/). A rank with a bad argument still takes part.
dctResult_t createAlltoallPlan(dctComm_t comm, const size_t* sendRows, const size_t* recvRows, size_t rowLength,
                               const dctDataType_t& dtype, const dctConfig_t& resolved, dctResult_t localError,
                               dctAlltoallPlan_t* out);
// resolved.density 1 is the exact plan.
dctResult_t createDesPlan(dctComm_t comm, const size_t* rowsPerRank, size_t rowLength, const dctDataType_t& dtype,
                          const dctConfig_t& resolved, dctResult_t localError, dctDesPlan_t* out);

// DCT-MP sparse all-to-all (sparse_alltoall.cc), transactions like the
// allreduce: on any failure on any rank every rank returns an error and the
// plan keeps its committed masks. `localError`: this rank's argument check.
dctResult_t sparseAlltoallForward(dctAlltoallPlan_t plan, const void* send, void* recv, void* stream,
                                  dctResult_t localError, const char* fn);
dctResult_t sparseAlltoallBackward(dctAlltoallPlan_t plan, const void* gradSend, void* gradRecv, void* stream,
                                   dctResult_t localError, const char* fn);
// DES sparse reduce-scatter (des_reduce_scatter.cc); the plan is core/des_plan.h.
dctResult_t desForward(dctDesPlan_t plan, const void* partials, void* summed, void* stream, dctResult_t localError,
                       const char* fn);
dctResult_t desBackward(dctDesPlan_t plan, const void* gradSummed, void* gradPartials, void* stream,
                        dctResult_t localError, const char* fn);

// The 1-bit compressed allreduce (onebit_allreduce.cc), for compressors with
// config.compressor == dctCompressorOnebit: the same transaction contract
// as sparseAllreduce (any failure on any rank: every rank returns an error,
// worker and server error unchanged, a retry is bit-identical).
dctResult_t onebitAllreduce(const void* sendbuf, void* recvbuf, size_t count, const dctDataType_t& dtype,
                            const dctRedOp_t& op, dctCompressor_t c, dctComm_t comm, void* stream,
                            dctResult_t localError, const char* fn);
// A 1-bit compressor's committed worker error into out (its twin's memory)
// when the residual holds a kept x (OnebitState::pending).
dctResult_t onebitResidual(dctCompressor_t c, void* out, void* stream);

}  // namespace dct
