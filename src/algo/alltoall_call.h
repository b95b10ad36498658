// One DCT-MP all-to-all call's working state and the pieces the unchunked
// forward (sparse_alltoall.cc) and the pipelined one
// (alltoall_pipeline.cc) share.
#pragma once

#include <cstdint>
#include <vector>

#include "algo/blocks.h"
#include "base/dtype.h"
#include "core/alltoall_plan.h"
#include "kernels/kernels.h"

namespace dct {

struct AlltoallCall {
  AlltoallCall(dctAlltoallPlan_t plan, void* s, const char* name) : p(plan), stream(s), fn(name) {}
  dctAlltoallPlan_t p;
  void* stream;
  const char* fn;
  Blocks out, in;
  size_t allBytes = 0;  // what every rank sends together (agreed)
  std::vector<BlockLayout> inLayout;
  std::vector<bool> inCounts;  // block from peer q carries per-row counts
};

// What a forward would commit.
struct ForwardDraft {
  uint64_t kept = 0, nonFinite = 0;
  bool variable = false;
  double tau = 0;
  bool estimated = false;
};

inline size_t rowBytes(const dctAlltoallPlan_t p) { return p->rowLength * dtypeSize(p->dtype); }
inline size_t keepPerRow(const dctAlltoallPlan_t p) { return p->maskFormat < 0 ? p->rowLength : p->k; }
inline uint32_t* maskOf(MaskSet& m, const RowSide& side, int q, size_t rowLength) {
  return m.mask.as<uint32_t>() + side.rowStart[q] * maskWords(rowLength);
}
inline uint64_t* offsetsOf(MaskSet& m, const RowSide& side, int q) {
  return m.offsets.as<uint64_t>() + side.offsetsAt(q);
}

// Room for one side's masks and entry offsets.
dctResult_t reserveMasks(dctAlltoallPlan_t p, MaskSet& m, const RowSide& side);
// The forward's outcome into the plan: masks swap in, backward due, stats.
void commitForward(AlltoallCall& call, const ForwardDraft& d);

// The pipelined forward (alltoall_pipeline.cc). Chunks for a plan from
// every rank's split (`splits`: rank r's 2P send and receive row counts at
// 2Pr), identical on every rank; 0 where the forward cannot be chunked:
// rows of one size (top-K, K < D), more than one rank, DCT_PIPELINE on, a
// transport with ialltoallv.
int forwardChunks(const dctAlltoallPlan& p, const std::vector<uint64_t>& splits);
// Runs the forward in p->chunks chunks: each chunk's rows are selected and
// packed while the previous chunks are on the wire and unpacked as they
// arrive. On dctSuccess either the forward is committed, or `fallback` is
// set on every rank (a rank's buffers are not host memory, or a row kept
// more than K entries, NaN/Inf beyond K) and nothing is: the caller runs the
// unchunked forward. Any failure fails every rank.
dctResult_t pipelinedForward(dctAlltoallPlan_t p, const void* send, void* recv, void* stream, const char* fn,
                             bool& fallback);

}  // namespace dct
