// The header of a plan's call (the DCT-MP all-to-all's and the DES
// reduce-scatter's forward and backward): which plan, which way, and what
// each rank sends. Every rank must call the same plan the same way.
#pragma once

#include <cstdint>
#include <vector>

#include "base/debug.h"
#include "dct/dct.h"
#include "transport/comm.h"

namespace dct {

enum PlanDirection : int32_t { kForward = 0, kBackward = 1 };

struct PlanCallHeader {
  uint64_t planId = 0;       // must match (plans are created collectively)
  uint64_t bytes = 0;        // per rank: its blocks on the wire together
  int32_t datatype = 0;      // must match
  int32_t direction = 0;     // must match: a PlanDirection
  int32_t variableRows = 0;  // per rank, all-to-all forward: its blocks carry per-row counts
  int32_t localError = 0;    // dctResult_t of this rank's own checks and local work
  int32_t chunks = 0;        // per rank, pipelined all-to-all forward: the chunks it can run (0: none)
  int32_t padding = 0;
};

template <typename Plan>
PlanCallHeader planCallHeader(Plan p, PlanDirection direction, dctResult_t localError) {
  PlanCallHeader h;
  h.localError = localError;
  h.planId = p->id;
  h.datatype = p->dtype;
  h.direction = direction;
  return h;
}

inline dctResult_t checkPeer(dctComm_t comm, const PlanCallHeader& mine, const PlanCallHeader& h, int r,
                             const char* fn) {
  if (h.planId != mine.planId)
    return fail(comm, dctInvalidUsage, "%s: ranks disagree on the plan (rank %d: plan %llu, this rank %d: plan %llu)",
                fn, r, (unsigned long long)h.planId, comm->rank, (unsigned long long)mine.planId);
  const char* what = h.datatype != mine.datatype ? "datatype" : h.direction != mine.direction ? "direction" : nullptr;
  if (what)
    return fail(comm, dctInvalidUsage, "%s: ranks disagree on %s (rank %d differs from this rank %d)", fn, what, r,
                comm->rank);
  return dctSuccess;
}

// What every rank sends together, from the agreed headers.
inline size_t sentTogether(const std::vector<PlanCallHeader>& all) {
  size_t bytes = 0;
  for (const PlanCallHeader& h : all) bytes += h.bytes;
  return bytes;
}

}  // namespace dct
