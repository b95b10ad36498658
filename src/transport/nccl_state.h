// Shared by the NCCL transport's files (nccl.cc, nccl_gather.cc): its state,
// NCCL error handling including nonblocking communicators' ncclInProgress,
// and the guard that runs each op on the communicator's device.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>

#include "base/cuda_check.h"
#include "base/debug.h"
#include "transport/comm.h"
#include "transport/nccl_sizes.h"

// The NCCL calls libdct_nccl_preload.so intercepts go to NCCL's pnccl*
// entry points (NCCL >= 2.16), so libdct's own operations never re-enter an
// interceptor (ours also lets them through when it sees them re-entered).
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 16, 0)
#define DCT_NCCL_OWN(fn) p##fn
#else
#define DCT_NCCL_OWN(fn) fn
#endif

namespace dct::nccl {

// Host data (headers, counts, votes) moves through a device buffer sized at
// init for rounds of kHostChunk bytes per rank: the rounds depend only on
// the byte count and the comm size, so every rank runs the same ones, and
// the op never allocates.
constexpr size_t kHostChunk = 256;

struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
};

struct State {
  ncclComm_t comm = nullptr;
  bool owned = false;                // made by a split: destroyed with the dctComm
  int device = -1;                   // the communicator's CUDA device
  DeviceBuffer host;                 // (size + 1) * kHostChunk, from init
  DeviceBuffer padded;               // padded allgatherv; grown by prepare()
  cudaEvent_t paddedFree = nullptr;  // the last op reading `padded` is done
  bool paddedPending = false;
};

inline State* stateOf(dctComm_t comm) { return static_cast<State*>(comm->transportState); }

// Nonblocking communicators (ncclConfig_t.blocking = 0) may answer any call
// with ncclInProgress and finish it in the background; this waits for that
// (polling ncclCommGetAsyncError) and returns the final result, so each call
// is complete - enqueued on its stream - before the next one is made.
// Blocking communicators never return ncclInProgress: a no-op for them.
ncclResult_t settle(ncclComm_t comm, ncclResult_t res);

dctResult_t ncclFail(dctComm_t comm, ncclResult_t res, const char* what);

// Grows `padded` to at least `bytes` once nothing reads it any more.
dctResult_t reservePadded(State* s, size_t bytes);

#define NCCLCHECK(comm, call)                                                        \
  do {                                                                               \
    ncclResult_t nccl_res_ = ::dct::nccl::settle(::dct::nccl::stateOf(comm)->comm, (call)); \
    if (nccl_res_ != ncclSuccess) return ::dct::nccl::ncclFail(comm, nccl_res_, #call);  \
  } while (0)

// Makes the communicator's device current for one op and restores the
// caller's after it. NCCL switches devices itself, but the staging copies
// and a NULL stream then resolve on the communicator's device too, so the
// agreement still works on a rank whose caller forgot cudaSetDevice (and
// reports it: prepare() checks the device).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) : target_(device) {
    if (cudaGetDevice(&saved_) != cudaSuccess || (saved_ != device && cudaSetDevice(device) != cudaSuccess)) {
      (void)cudaGetLastError();
      saved_ = device;  // nothing to restore
    }
  }
  ~DeviceGuard() {
    if (saved_ != target_) (void)cudaSetDevice(saved_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int target_;
  int saved_ = -1;
};

// Data ops of nccl_gather.cc (see there).
dctResult_t allgatherHost(dctComm_t comm, const void* send, void* recv, size_t bytes, cudaStream_t st);
dctResult_t allgathervDevice(dctComm_t comm, const void* send, void* recv, const size_t* recvBytes,
                             const size_t* recvOffsets, cudaStream_t st);
// kPaddedCap, paddedRoom and the allgatherv's form: nccl_sizes.h.

}  // namespace dct::nccl
