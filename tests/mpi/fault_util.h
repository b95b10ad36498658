// Shared by the fault-injection tests: whether every rank saw the same
// outcome, a CPU twin whose n-th allocation (counted from arming) fails,
// a comm's chunk size changed for a scope, and its gather slots reset.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "algo/gather_slot.h"
#include "kernels/kernels.h"
#include "transport/comm.h"

namespace dcttest {

// A comm's gather slots (its own and its hierarchy's) back to their bounds,
// their windows cleared: the state a fresh comm starts in, so that runs
// repeated on one comm take the same operations (the slot learns from
// every call: algo/gather_slot.h).
inline bool resetGatherSlots(dctComm_t comm) {
  bool ok = true;
  for (dctComm_t c : {comm, comm->node, comm->leaders})
    if (c) ok = dct::setGatherSlot(c, c->gatherSlotMax) == dctSuccess && ok;
  return ok;
}

inline bool allRanksAgree(bool mine) {
  int in = mine ? 1 : 0, lo = 0, hi = 0;
  MPI_Allreduce(&in, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&in, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return lo == hi;
}

// Every rank's count of transport operations in a clean call (they differ
// where ranks play different parts, as recursive doubling's folded ranks
// do): loops over "the n-th operation" run to the largest alike on all.
inline std::vector<uint64_t> opsOnEveryRank(uint64_t mine) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::vector<uint64_t> all(size);
  MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
  return all;
}
inline uint64_t mostOps(const std::vector<uint64_t>& ops) { return *std::max_element(ops.begin(), ops.end()); }
// Whether a fault armed at operation n on `victim` (-1: every rank) fires
// on some rank, failing the call on all.
inline bool faultFires(const std::vector<uint64_t>& ops, uint64_t n, int victim) {
  for (size_t r = 0; r < ops.size(); r++)
    if ((victim < 0 || victim == static_cast<int>(r)) && n < ops[r]) return true;
  return false;
}

// Allocations left before the failing one on this rank; -1: none fails.
inline int allocationsLeft = -1;

inline dctResult_t failingAllocate(dct::KernelContext* ctx, void** ptr, size_t bytes) {
  if (allocationsLeft == 0) {
    allocationsLeft = -1;
    *ptr = nullptr;
    return dctOutOfMemory;
  }
  if (allocationsLeft > 0) allocationsLeft--;
  return dct::cpuKernelOps().allocate(ctx, ptr, bytes);
}

inline const dct::KernelOps& failingOps() {
  static const dct::KernelOps ops = [] {
    dct::KernelOps o = dct::cpuKernelOps();
    o.name = "cpu (failing allocations)";
    o.allocate = failingAllocate;
    return o;
  }();
  return ops;
}

// The pipelined allreduce's chunk size (DCT_CHUNK_ELEMENTS, read when the
// comm was made) changed for a scope, alike on every rank and on the node
// and leader comms that inherited it; 0: left alone.
class ScopedChunking {
 public:
  ScopedChunking(dctComm_t comm, long long elems) : comm_(comm), old_(comm->settings.chunkElems) {
    if (elems > 0) set(static_cast<uint64_t>(elems));
  }
  ~ScopedChunking() { set(old_); }
  ScopedChunking(const ScopedChunking&) = delete;
  ScopedChunking& operator=(const ScopedChunking&) = delete;

 private:
  void set(uint64_t elems) {
    for (dctComm_t c : {comm_, comm_->node, comm_->leaders})
      if (c) c->settings.chunkElems = elems;
  }
  dctComm_t comm_;
  uint64_t old_;
};

}  // namespace dcttest
