// Four timed runs per size after a warm-up, best of each rank, then the
// best of the ranks: the rank that reached the allreduce last in a run timed
// the collective itself, not its wait for late peers (a rank descheduled on
// shared cores made the 1 KiB time longer than the 1 MiB one). 1 MiB is
// large enough for the bandwidth to dominate on 1 Gbit/s links (~13 ms at
// 4 ranks) and small enough to cost little at comm creation.
#include "transport/link_probe.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <vector>

#include "base/debug.h"
#include "base/mapped_memory.h"
#include "transport/comm.h"

namespace dct {
namespace {

constexpr size_t kSmallCount = 256, kLargeCount = size_t(1) << 18;  // fp32: 1 KiB, 1 MiB
constexpr int kRuns = 5;                                             // the first warms up

// Every rank runs every allreduce, failed or not (transport.h's contract).
dctResult_t timeAllreduce(dctComm_t comm, const MappedMemory& in, const MappedMemory& out, size_t count,
                          double& bestUs) {
  dctResult_t status = dctSuccess;
  bestUs = std::numeric_limits<double>::infinity();
  for (int run = 0; run < kRuns; run++) {
    const auto start = std::chrono::steady_clock::now();
    const dctResult_t res = comm->transport->allreduce(comm, in.data(), out.data(), count, dctFloat32, nullptr);
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    if (status == dctSuccess) status = res;
    if (run > 0) bestUs = std::min(bestUs, us);
  }
  return status;
}

dctResult_t probeOne(dctComm_t comm) {
  comm->link = LinkTiming{};
  // Every rank of a comm has its transport: all measure, or none.
  if (comm->size < 2 || !comm->transport->hostBuffers) return dctSuccess;
  // Straight from the kernel and back to it, zero-filled: heap memory that
  // MPI had sent from, freed and reused for a compressor's buffers, made its
  // selection 30% slower for good (64 MiB at 4 ranks: 25 -> 32 ms).
  const MappedMemory in(kLargeCount * sizeof(float)), out(kLargeCount * sizeof(float));
  // Out of memory on one rank: all skip the probe alike (the model keeps
  // its defaults), nobody waits in an allreduce.
  int32_t missing = 0;
  DCTCHECK(comm->transport->vote(comm, in.data() && out.data() ? 0 : 1, &missing, nullptr));
  if (missing) return dctSuccess;
  double mine[2] = {0, 0};
  dctResult_t status = timeAllreduce(comm, in, out, kSmallCount, mine[0]);
  const dctResult_t large = timeAllreduce(comm, in, out, kLargeCount, mine[1]);
  if (status == dctSuccess) status = large;
  std::vector<double> all(2 * comm->size);
  const dctResult_t gathered = comm->transport->allgather(comm, mine, all.data(), sizeof(mine), nullptr);
  if (status == dctSuccess) status = gathered;
  DCTCHECK(everyone(comm, status, "link probe: the transport failed on another rank"));
  LinkTiming t;
  t.smallBytes = kSmallCount * sizeof(float);
  t.largeBytes = kLargeCount * sizeof(float);
  t.smallUs = all[0];
  t.largeUs = all[1];
  for (int r = 1; r < comm->size; r++) {
    t.smallUs = std::min(t.smallUs, all[2 * r]);
    t.largeUs = std::min(t.largeUs, all[2 * r + 1]);
  }
  comm->link = t;
  DCT_INFO("link probe, %d ranks: allreduce of %zu B %.1f us, of %zu B %.1f us", comm->size, t.smallBytes,
           t.smallUs, t.largeBytes, t.largeUs);
  return dctSuccess;
}

}  // namespace

dctResult_t probeLinks(dctComm_t comm) {
  DCTCHECK(probeOne(comm));
  if (comm->node == nullptr) return dctSuccess;  // no hierarchy
  // The leaders' links carry the hierarchical steps' sparse exchange; the
  // other ranks learn how that went, so every rank fails alike.
  const dctResult_t mine = comm->leaders ? probeOne(comm->leaders) : dctSuccess;
  return everyone(comm, mine, "link probe: the transport failed between the node leaders");
}

}  // namespace dct
