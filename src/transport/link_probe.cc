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
#include <optional>
#include <vector>

#include "base/debug.h"
#include "base/mapped_memory.h"
#include "transport/comm.h"

namespace dct {
namespace {

constexpr size_t kSmallCount = 256, kLargeCount = size_t(1) << 18;  // fp32: 1 KiB, 1 MiB
constexpr int kRuns = 5;                                             // the first warms up

// The probe's two buffers, zero-filled, in memory the transport's allreduce
// takes: mapped straight from the kernel where it takes host buffers (heap
// memory that MPI had sent from, freed and reused for a compressor's
// buffers, made its selection 30% slower for good: 64 MiB at 4 ranks, 25 ->
// 32 ms), else the transport's own (NCCL: the comm's device). Null where
// there is no memory.
class ProbeBuffers {
 public:
  ProbeBuffers(dctComm_t comm, size_t bytes) : comm_(comm) {
    if (comm->transport->hostBuffers) {
      in_ = hostIn_.emplace(bytes).data();
      out_ = hostOut_.emplace(bytes).data();
    } else if (comm->transport->allocate(comm, bytes, &in_) == dctSuccess) {
      (void)comm->transport->allocate(comm, bytes, &out_);  // null on failure: not ready()
    }
  }
  ~ProbeBuffers() {
    if (hostIn_) return;
    comm_->transport->release(comm_, in_);
    comm_->transport->release(comm_, out_);
  }
  ProbeBuffers(const ProbeBuffers&) = delete;
  ProbeBuffers& operator=(const ProbeBuffers&) = delete;
  bool ready() const { return in_ != nullptr && out_ != nullptr; }
  void* in() const { return in_; }
  void* out() const { return out_; }

 private:
  dctComm_t comm_;
  std::optional<MappedMemory> hostIn_, hostOut_;  // no heap: nothing may throw before the vote
  void* in_ = nullptr;
  void* out_ = nullptr;
};

// Every rank runs every allreduce, failed or not (transport.h's contract);
// a transport that queues its ops is waited for, so each run is timed whole.
dctResult_t timeAllreduce(dctComm_t comm, const ProbeBuffers& buffers, size_t count, double& bestUs) {
  const Transport* t = comm->transport;
  dctResult_t status = dctSuccess;
  bestUs = std::numeric_limits<double>::infinity();
  for (int run = 0; run < kRuns; run++) {
    const auto start = std::chrono::steady_clock::now();
    dctResult_t res = t->allreduce(comm, buffers.in(), buffers.out(), count, dctFloat32, nullptr);
    if (t->synchronize) {
      const dctResult_t waited = t->synchronize(comm, nullptr);
      if (res == dctSuccess) res = waited;
    }
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    if (status == dctSuccess) status = res;
    if (run > 0) bestUs = std::min(bestUs, us);
  }
  return status;
}

dctResult_t probeOne(dctComm_t comm) {
  comm->link = LinkTiming{};
  // Every rank of a comm has its transport: all measure, or none.
  if (comm->size < 2 || !(comm->transport->hostBuffers || comm->transport->allocate)) return dctSuccess;
  const ProbeBuffers buffers(comm, kLargeCount * sizeof(float));
  // Out of memory on one rank: all skip the probe alike (the model keeps
  // its defaults), nobody waits in an allreduce.
  int32_t missing = 0;
  DCTCHECK(comm->transport->vote(comm, buffers.ready() ? 0 : 1, &missing, nullptr));
  if (missing) return dctSuccess;
  double mine[2] = {0, 0};
  dctResult_t status = timeAllreduce(comm, buffers, kSmallCount, mine[0]);
  const dctResult_t large = timeAllreduce(comm, buffers, kLargeCount, mine[1]);
  if (status == dctSuccess) status = large;
  std::vector<double> all(2 * comm->size);
  const dctResult_t gathered = comm->transport->allgather(comm, mine, all.data(), sizeof(mine), nullptr);
  if (status == dctSuccess) status = gathered;
  DCTCHECK(voteOnSetup(comm, status, "link probe: the transport failed on another rank"));
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
  return voteOnSetup(comm, mine, "link probe: the transport failed between the node leaders");
}

}  // namespace dct
