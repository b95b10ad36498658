// One drop-in shim's state: the policy, a dctComm_t per intercepted
// communicator (made on its first compressed call), a bounded cache of
// compressors per communicator, and the counters of the DCT_DEBUG=INFO
// summary. Thread-safe: a global lock guards the maps and counters; each
// communicator's own lock is held through its collective, so threads that
// drive different communicators never wait on each other.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "dct/dct.h"
#include "preload/policy.h"

namespace dct::preload {

// An intercepted allreduce, in libdct's terms. `comm` identifies the foreign
// communicator (its handle's bits).
struct CompressCall {
  uintptr_t comm = 0;
  const void* sendbuf = nullptr;  // == recvbuf when in place
  void* recvbuf = nullptr;
  size_t count = 0;
  dctDataType_t datatype = dctFloat32;
  dctRedOp_t op = dctSum;
  void* stream = nullptr;
  bool capturing = false;  // inside CUDA graph capture: nothing may wait for the host
};

// Makes the dctComm_t of a foreign communicator (dctCommInitMpi/Nccl).
using CommOpener = std::function<dctResult_t(dctComm_t*)>;
// The elementwise maximum of `n` values over the foreign communicator,
// through the layer below (PMPI_Allreduce, NCCL's own allreduce); false
// when that collective failed.
using Agreer = std::function<bool(uint64_t* values, int n)>;

struct Summary {
  uint64_t calls = 0;       // allreduce calls seen
  uint64_t compressed = 0;  // run by libdct
  uint64_t fellBack = 0;    // libdct failed on every rank: run by the layer below instead
  std::array<uint64_t, static_cast<size_t>(Verdict::NumVerdicts)> passed{};  // by reason
  uint64_t wireBytes = 0;   // payload this rank sent in compressed calls
  uint64_t denseBytes = 0;  // count * element size of those calls
  uint64_t buffers = 0;     // compressors created
  uint64_t evictions = 0;
};

class Session {
 public:
  Session(const char* name, Policy policy, size_t cacheEntriesPerComm);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const Policy& policy() const { return policy_; }
  const char* name() const { return name_; }

  // Counts the call on its communicator (facts.callIndex is filled in) and
  // decides; verdicts other than Compress are counted here. The first call
  // on a communicator compares the ranks' policies through `agree` (every
  // rank's first intercepted allreduce there, compressible or not): if they
  // differ, every rank passes every call on it through (one WARN line).
  Verdict admit(uintptr_t comm, CallFacts facts, const Agreer& agree);
  // Whether the ranks' policies on `comm` have been compared (admit).
  bool agreed(uintptr_t comm);
  // For a call admitted as Compress that the caller passes on after all.
  void countPass(Verdict v);

  // libdct's sparse allreduce of the call. An error means every rank failed
  // and recvbuf is untouched (libdct's agreement and vote): the caller then
  // runs the layer below, so the program still gets its exact allreduce.
  // The dctComm_t is made on the first compressed call, and whether every
  // rank made it is agreed through `agree`: if one could not, all pass
  // every call on the communicator through from then on. Under capture
  // (call.capturing) nothing is made: a call that is not captureReady fails
  // before any collective, and the statistics are what a queued step sends
  // (reading the compressor's would wait for the stream).
  dctResult_t compress(const CompressCall& call, const CommOpener& open, const Agreer& agree);

  // Whether libdct can run this call under CUDA graph capture: the
  // communicator is wrapped on every rank and the buffer's compressor is
  // cached, in the fixed-capacity mode (or 1-bit) on a device and past its
  // first step
  // (core/stream_setup.h: stepCapturable), so its step queues without a
  // host round trip. The same on every rank of a program that makes the
  // same calls (the caches evolve alike).
  bool captureReady(uintptr_t comm, const void* recvbuf, size_t count, dctDataType_t datatype);

  // The communicator is being freed: its compressors and dctComm_t go.
  void forget(uintptr_t comm);
  // Everything goes (release = false leaks device memory instead, for exit
  // after the CUDA runtime may be gone); logs the summary once.
  void finish(bool release);

  Summary summary() const;

 private:
  struct CommState;
  std::shared_ptr<CommState> commState(uintptr_t comm);  // under lock_
  std::shared_ptr<CommState> lockedState(uintptr_t comm);
  // Whether every rank holds `mine`.
  bool sameEverywhere(uint64_t mine, const Agreer& agree) const;

  const char* name_;
  Policy policy_;
  size_t cacheEntries_;
  mutable std::mutex lock_;
  std::unordered_map<uintptr_t, std::shared_ptr<CommState>> comms_;
  Summary summary_;
  bool finished_ = false;
};

// A handle's bits as a map key (pointers in Open MPI and NCCL, ints in MPICH).
template <typename Handle>
uintptr_t handleKey(Handle h) {
  if constexpr (sizeof(Handle) == sizeof(uintptr_t)) {
    uintptr_t k;
    __builtin_memcpy(&k, &h, sizeof(k));
    return k;
  } else {
    return static_cast<uintptr_t>(h);
  }
}

}  // namespace dct::preload
