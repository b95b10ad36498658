// Alpha-beta(-gamma) cost model that picks the sparse allreduce algorithm
// from counts every rank knows, so every rank reaches the same choice.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/link_timing.h"
#include "base/settings.h"
#include "dct/dct.h"

namespace dct {

struct CostParams {
  double alphaUs;          // per-message latency (DCT_ALPHA_US, else measured, else 5)
  double linkGBps;         // per-rank link bandwidth (DCT_LINK_GBPS, else measured, else 1.25)
  double scatterGBps;      // scatter-add rate of COO bytes (DCT_SCATTER_GBPS, default 2)
  double reduceGBps;       // dense reduction rate (DCT_REDUCE_GBPS, default 4)
  double selectGBps = 8;   // the compressor's pass, tensor bytes per second (DCT_SELECT_GBPS, default 8)
};

// The comm's overrides (DCT_ALPHA_US ..., read at its creation) where set;
// else, for alpha and the link, a fit to what the comm of `ranks` measured
// of its dense allreduce (denseCostUs then gives both probe times: the link
// from the time per extra byte less the modelled reduction, alpha from the
// small size's time less its bytes); else the defaults.
CostParams costParams(const CostOverrides& set, const LinkTiming& measured = {}, int ranks = 0);

// The sparse plans' parameters from the probe's fit (costParams of
// the comm's link): the fit itself where the probe `covered` tensors this
// large; beyond, the defaults (large tensors
// leave the caches on shared memory, where the fit sent auto on split
// probes that lost), with a link never faster than the fit's (on 1 Gbit/s
// links the 10 Gbit/s default priced split at 32 ms at 16 MiB and 50%
// against dense's 202, and it took 300-660 ms a step).
CostParams sparseCostParams(const CostOverrides& set, const CostParams& fitted, bool covered, int ranks);

struct CostInputs {
  int ranks;
  size_t count;
  size_t valueBytes;
  size_t indexBytes;
  const uint64_t* nnz;  // per rank
  size_t sumBytes = 0;  // bytes of a reduced value (the accumulation type; 0: valueBytes)
  // The kernels walk packed messages' unions (mergePackedCoo: the host
  // twin): split's owners sum sparse ranges that way.
  bool unions = false;
  // And the sum is wanted as COO alone (dctSparseInputAllreduce): the
  // allgather plan walks the messages' union instead of scatter-adding
  // them; split lists its gathered ranges.
  bool cooAlone = false;
};

// A split owner sums its range as the pieces' union (split_forms.cc) while
// they hold at most 1/kSplitUnionFill of its length, else merges it dense.
constexpr uint64_t kSplitUnionFill = 8;

// The split plans' reduce-scatter (split_halving.h): one alltoallv of the
// pieces after an alltoall of their sizes, or recursive halving.
enum class SplitExchange { Pairwise, Halving };

// Modelled step times (us); wireUs, when given, receives the latency and
// link part of it (the rest is local: scatter, merge, reduction).
double allgatherCostUs(const CostParams& p, const CostInputs& in, double* wireUs = nullptr);
double denseCostUs(const CostParams& p, const CostInputs& in, double* wireUs = nullptr);
double splitCostUs(const CostParams& p, const CostInputs& in, double* wireUs = nullptr,
                   SplitExchange exchange = SplitExchange::Pairwise);
// Split whose owners keep only their range's share of kOwnerTargetScale x k,
// k the ranks' mean selection (dctAlgoGlobalTopk): ~4k entries allgathered
// whatever the union.
double globalTopkCostUs(const CostParams& p, const CostInputs& in, double* wireUs = nullptr,
                        SplitExchange exchange = SplitExchange::Pairwise);
// The reduce-scatter alone (latencies, wire and merges up to every owner
// holding its range summed, the control it needs included), by exchange:
// what the split plans choose between, both plans alike.
double splitScatterUs(const CostParams& p, const CostInputs& in, SplitExchange exchange, double* wireUs = nullptr);
// The cheaper exchange (ties: pairwise). Halving needs sendrecv: the caller
// asks only where it can run.
SplitExchange cheaperSplitExchange(const CostParams& p, const CostInputs& in);
// Recursive doubling (dctSparseInputAllreduce): floor(log2 P) rounds of a
// latency and the largest block's partial sum (uniform-random fill growth,
// raw COO below the index + value vs value break-even, dense above), the
// merges of both halves, two fold exchanges where P is no power of two, and
// the sum written out at the end.
double recursiveDoublingCostUs(const CostParams& p, const CostInputs& in, double* wireUs = nullptr);
// Expected size of the union of the ranks' selections, as if each rank's
// positions were independent and uniform: count * (1 - prod(1 - nnz_r/count)).
double unionEstimate(const CostInputs& in);
// The compressor's pass over the whole tensor that every sparse step makes
// (read grad and residual, select, write the residual), whatever its
// density; dense's steady state sends the tensor as is, with no pass.
double compressPassUs(const CostParams& p, const CostInputs& in);
// Chunks for the pipelined allgather plan, before bounds: sqrt(step / (P
// alpha)) balances each chunk's nonblocking collective (P latencies)
// against the fill and drain (about a chunk's time). The step counts the
// compressor's pass: a transfer advances only when the rank calls into
// MPI between chunks, so the drain waits out the last chunks' selection.
double pipelineChunks(const CostParams& p, const CostInputs& in);
// Elements per chunk from that count: at most 64 chunks, at least 2^18
// elements (about a millisecond of selection, MPI's progress granularity),
// a whole multiple of 4096 so every chunk starts aligned (an odd offset
// sends the select's streamed stores and the merge's blocks down their
// slower unaligned paths).
size_t autoChunkElems(const CostParams& p, const CostInputs& in);
// The cheapest of the three (ties: allgather, then split, then dense).
dctAlgorithm_t chooseAlgorithm(const CostParams& p, const CostInputs& in);

}  // namespace dct
