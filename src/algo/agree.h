// Collective agreement. Each collective allgathers a small header and then
// votes: if any rank saw a bad argument, failed its local work, or the
// ranks disagree on what they were asked to do, every rank returns an error
// instead of some ranks waiting forever in a mismatched exchange. A second
// vote after the exchange makes a failure there reach every rank too, so a
// step either commits everywhere or nowhere.
//
// Out of memory is one more local failure, and it must be voted like any
// other: every entry point allocates before its last vote (local work
// before the headers; what the headers size in agree()'s `ready` step,
// which runs under caught()), and nothing between the last vote and the
// commit allocates or can fail otherwise. A rank that throws between two
// collectives instead would leave the others waiting in the next one.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "base/caught.h"
#include "base/debug.h"
#include "dct/dct.h"
#include "transport/comm.h"

namespace dct {

struct CallHeader {
  uint64_t count = 0;       // must match
  uint64_t nnz = 0;         // per rank
  uint64_t capacity = 0;    // per rank (allgather receive capacity)
  uint64_t bytes = 0;       // per rank: message bytes on the wire (allreduce)
  uint64_t lastStepNs = 0;  // per rank: its previous step's time, less its waiting for the others (auto)
  uint64_t lastLocalNs = 0; // per rank: of which its own local work (compress, reduce phases)
  int32_t datatype = 0;     // must match
  int32_t op = 0;           // must match
  int32_t algorithm = 0;    // must match
  int32_t mode = 0;         // must match (warm-up vs sparse, query vs fetch)
  int32_t localError = 0;   // dctResult_t of this rank's own checks and local work
  int32_t flags = 0;        // per rank, algorithm-specific (a late vote to come)
  int32_t chunks = 0;       // must match: pipelined allreduce's chunk count (0: unchunked)
  uint64_t chunkElems = 0;  // must match: and its chunk size
  // The step's config (stampConfig): what shapes the wire beyond the
  // arguments. Gathered with the header every step, so checking it costs
  // nothing. Zero where a rank has no valid compressor (its localError
  // fails the step first).
  double density = 0;       // must match
  int32_t wireType = 0;     // must match
  int32_t path = 0;         // must match: top-K, 1-bit or hierarchical (StepPath)
  int32_t configured = 0;   // must match: the config's algorithm (auto or pinned)
  int32_t warmupSteps = 0;  // must match
  int32_t autoGlobalTopk = 0;  // must match
  int32_t ownerReturn = 0;     // must match
  double capacityFactor = 0;   // must match
  uint64_t segments = 0;       // must match: a 1-bit compressor's segments' digest (0: one segment)
};

enum StepPath : int32_t { kPathTopk = 1, kPathOnebit = 2, kPathHierarchical = 3, kPathFixed = 4 };

inline void stampConfig(CallHeader& h, const dctConfig_t& c, StepPath path) {
  h.density = c.density;
  h.wireType = c.wireType;
  h.path = path;
  h.configured = c.algorithm;
  h.warmupSteps = c.warmupSteps;
  h.autoGlobalTopk = c.autoGlobalTopk;
  h.capacityFactor = c.capacityFactor;
  h.ownerReturn = c.ownerReturn;
}

// An allreduce's header: the arguments every rank must agree on. Raw bits
// of the enums: unchecked C enums may hold any int (loading them is UB).
inline CallHeader allreduceHeader(dctResult_t localError, size_t count, const dctDataType_t& dtype,
                                  const dctRedOp_t& op) {
  CallHeader h;
  h.localError = localError;
  h.count = count;
  std::memcpy(&h.datatype, &dtype, sizeof(h.datatype));
  std::memcpy(&h.op, &op, sizeof(h.op));
  return h;
}

// One rank's header against this rank's, for the allreduce family's calls:
// dctSuccess, or dctInvalidUsage naming what differs. Each kind of header
// has its own (plan_call_header.h: a plan's calls; the plan creations in
// alltoall_plan_create.cc, des_plan_create.cc).
dctResult_t checkPeer(dctComm_t comm, const CallHeader& mine, const CallHeader& theirs, int rank, const char* fn);

// Checks every rank's header against this rank's. Returns `localError` on
// the rank that had one and dctInvalidUsage elsewhere, with a message
// naming the first offending rank. H: a header with an int32_t localError
// (this rank's own checks and local work) and a checkPeer of its own.
template <typename H>
dctResult_t checkHeaders(dctComm_t comm, const H& mine, const std::vector<H>& all, const char* fn) {
  if (mine.localError != dctSuccess) return static_cast<dctResult_t>(mine.localError);
  for (int r = 0; r < comm->size; r++) {
    if (all[r].localError != dctSuccess)
      return fail(comm, dctInvalidUsage, "%s: rank %d rejected its arguments or failed its local work (%s)", fn, r,
                  dctGetErrorString(static_cast<dctResult_t>(all[r].localError)));
    DCTCHECK(checkPeer(comm, mine, all[r], r, fn));
  }
  return dctSuccess;
}

// Every rank's header into `all`, alone. A rank without room for them
// still takes part, into the comm's reserved room (dctComm::headerRoom):
// its failure to make room, else the transport's, is returned.
template <typename H>
dctResult_t gatherPlainHeaders(dctComm_t comm, const H& mine, std::vector<H>& all, void* stream, const char* fn) {
  static_assert(sizeof(H) <= dctComm::kHeaderRoomBytes, "dctComm::headerRoom holds every rank's header");
  const dctResult_t room = caught(comm, fn, [&] {
    all.assign(comm->size, H{});
    return dctSuccess;
  });
  void* into = room == dctSuccess ? static_cast<void*>(all.data()) : comm->headerRoom.as();
  const dctResult_t res = comm->transport->allgather(comm, &mine, into, sizeof(H), stream);
  return room != dctSuccess ? room : res;
}

// The allreduce family's headers (CallHeader) travel with the comm's gather
// slot (algo/gather_slot.h), whatever the call: every CallHeader gather on a
// comm has one shape, so ranks that made different calls (a top-K step, a
// 1-bit step, a sparse-input call, small or not) still meet in one
// allgather and fail at its check instead of overrunning each other. Every
// rank's header into `all` and, with a slot, every rank's block into the
// room: this rank sends `mine` and, after it, its send slot (whatever it
// holds; `mine` says whether a message is there). Without a slot, the
// headers alone. A failed gather fails this rank at the call's next vote.
dctResult_t gatherHeadersAndSlots(dctComm_t comm, const CallHeader& mine, std::vector<CallHeader>& all, void* stream,
                                  const char* fn);

// Every rank's header into `all` (CallHeader: with the slots).
template <typename H>
dctResult_t gatherHeaders(dctComm_t comm, const H& mine, std::vector<H>& all, void* stream, const char* fn) {
  if constexpr (std::is_same_v<H, CallHeader>) return gatherHeadersAndSlots(comm, mine, all, stream, fn);
  else return gatherPlainHeaders(comm, mine, all, stream, fn);
}

// Every rank's header, checked against this rank's; a rank that could not
// gather them fails at the vote.
template <typename H>
dctResult_t exchangeHeaders(dctComm_t comm, const H& mine, std::vector<H>& all, void* stream, const char* fn) {
  DCTCHECK(gatherHeaders(comm, mine, all, stream, fn));
  return checkHeaders(comm, mine, all, fn);
}

// Every rank passes its status (dctSuccess or its error) and learns whether
// all succeeded: returns its own error, or the worst other one (with a
// message saying so), or dctSuccess everywhere.
dctResult_t vote(dctComm_t comm, dctResult_t mine, void* stream, const char* fn, const char* phase);

// Header allgather + check + vote: on success `all` holds every rank's
// header and every rank goes on; otherwise every rank returns an error.
// `ready` runs between the check and the vote, under caught(): the
// reservation step, where whatever the headers size is allocated, so its
// failure (an exception too) on one rank fails every rank.
template <typename H, typename Ready>
dctResult_t agree(dctComm_t comm, const H& mine, std::vector<H>& all, void* stream, const char* fn,
                  Ready&& ready) {
  dctResult_t res = exchangeHeaders(comm, mine, all, stream, fn);
  if (res == dctSuccess) res = caught(comm, fn, ready);
  return vote(comm, res, stream, fn, "agreement");
}

template <typename H>
dctResult_t agree(dctComm_t comm, const H& mine, std::vector<H>& all, void* stream, const char* fn) {
  return agree(comm, mine, all, stream, fn, [] { return dctSuccess; });
}

}  // namespace dct
