#include "transport/host_staging.h"

#include <cstdlib>

#include "base/debug.h"
#include "base/memory_space.h"
#include "dct_config.h"
#include "transport/fault_injection.h"

#if DCT_HAVE_CUDA
#include <mpi.h>

#include "base/cuda_check.h"
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#endif

namespace dct {

#if DCT_HAVE_CUDA

namespace {
// CUDACHECK records a failure for this thread only; staging knows the comm,
// so dctGetLastError(comm) names the failed copy or allocation too.
dctResult_t stagingFail(dctComm_t comm, cudaError_t err, const char* call, int line) {
  const dctResult_t res = cudaFail(err, call, __FILE__, line);
  if (comm != nullptr) setCommLastError(comm, threadLastErrorMessage());
  return res;
}
}  // namespace

#define STAGINGCHECK(comm, call)                                        \
  do {                                                                  \
    cudaError_t staging_err_ = (call);                                  \
    if (staging_err_ != cudaSuccess)                                    \
      return stagingFail(comm, staging_err_, #call, __LINE__);          \
  } while (0)

HostStaging::~HostStaging() {
  if (in_.host) cudaFreeHost(in_.host);
  if (out_.host) cudaFreeHost(out_.host);
  std::free(in_.spare);
  std::free(out_.spare);
}

bool HostStaging::needed() {
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  static const bool aware = MPIX_Query_cuda_support() == 1;
  return !aware;
#else
  return true;
#endif
}

dctResult_t HostStaging::reserve(dctComm_t comm, Slot& slot, size_t bytes) {
  if (bytes <= slot.capacity) return dctSuccess;
  if (slot.host) STAGINGCHECK(comm, cudaFreeHost(slot.host));
  slot.host = nullptr;
  slot.capacity = 0;
  STAGINGCHECK(comm, cudaMallocHost(&slot.host, bytes + bytes / 2));
  slot.capacity = bytes + bytes / 2;
  return dctSuccess;
}

dctResult_t HostStaging::prepare(dctComm_t comm, const void* sample, size_t bytes) {
  if (bytes == 0 || !needed() || !isDeviceMemory(sample)) return dctSuccess;
  DCTCHECK(reserve(comm, in_, bytes));
  return reserve(comm, out_, bytes);
}

void* HostStaging::standIn(Slot& slot, const void* ptr, size_t bytes) {
  if (bytes == 0 || !isDeviceMemory(ptr) || !needed()) return const_cast<void*>(ptr);
  if (bytes <= slot.capacity) return slot.host;
  std::free(slot.spare);
  slot.spare = std::malloc(bytes);
  return slot.spare;
}

dctResult_t HostStaging::stageInput(dctComm_t comm, const void*& ptr, size_t bytes, void* stream) {
  if (bytes == 0 || !isDeviceMemory(ptr)) return dctSuccess;
  auto st = static_cast<cudaStream_t>(stream);
  // CUDA-aware MPI reads the device buffer itself, but only after the
  // stream's producers (the caller's kernels, our pack copies) are done.
  if (!needed()) {
    STAGINGCHECK(comm, cudaStreamSynchronize(st));
    return dctSuccess;
  }
  DCTCHECK(reserve(comm, in_, bytes));
  STAGINGCHECK(comm, cudaMemcpyAsync(in_.host, ptr, bytes, cudaMemcpyDeviceToHost, st));
  STAGINGCHECK(comm, cudaStreamSynchronize(st));
  ptr = in_.host;
  return dctSuccess;
}

dctResult_t HostStaging::stageOutput(dctComm_t comm, void*& ptr, size_t bytes, bool copyIn, void* stream) {
  if (bytes == 0 || !isDeviceMemory(ptr)) return dctSuccess;
  auto st = static_cast<cudaStream_t>(stream);
  if (!needed()) {  // queued work that still reads or writes ptr ends before MPI writes it
    STAGINGCHECK(comm, cudaStreamSynchronize(st));
    return dctSuccess;
  }
  DCTCHECK(reserve(comm, out_, bytes));
  if (copyIn) STAGINGCHECK(comm, cudaMemcpyAsync(out_.host, ptr, bytes, cudaMemcpyDeviceToHost, st));
  STAGINGCHECK(comm, cudaStreamSynchronize(st));  // the device data is ready before MPI reads/overwrites
  pendingDevice_ = ptr;
  pendingBytes_ = bytes;
  ptr = out_.host;
  return dctSuccess;
}

dctResult_t HostStaging::finish(dctComm_t comm, void* stream) {
  if (pendingDevice_ == nullptr) return dctSuccess;
  auto st = static_cast<cudaStream_t>(stream);
  STAGINGCHECK(comm, cudaMemcpyAsync(pendingDevice_, out_.host, pendingBytes_, cudaMemcpyHostToDevice, st));
  STAGINGCHECK(comm, cudaStreamSynchronize(st));
  pendingDevice_ = nullptr;
  return dctSuccess;
}

#else  // host-only build: every buffer is a host buffer

HostStaging::~HostStaging() = default;
bool HostStaging::needed() { return false; }
void* HostStaging::standIn(Slot&, const void* ptr, size_t) { return const_cast<void*>(ptr); }
dctResult_t HostStaging::reserve(dctComm_t, Slot&, size_t) { return dctSuccess; }
dctResult_t HostStaging::prepare(dctComm_t, const void*, size_t) { return dctSuccess; }
dctResult_t HostStaging::stageInput(dctComm_t, const void*&, size_t, void*) { return dctSuccess; }
dctResult_t HostStaging::stageOutput(dctComm_t, void*&, size_t, bool, void*) { return dctSuccess; }
dctResult_t HostStaging::finish(dctComm_t, void*) { return dctSuccess; }

#endif

dctResult_t HostStaging::input(dctComm_t comm, const void*& ptr, size_t bytes, void* stream) {
  dctResult_t res = stageInput(comm, ptr, bytes, stream);
  if (res == dctSuccess && stagingFaultHit()) res = fail(comm, dctTransportError, "injected fault in input staging");
  if (res != dctSuccess) ptr = standIn(in_, ptr, bytes);
  return res;
}

dctResult_t HostStaging::output(dctComm_t comm, void*& ptr, size_t bytes, bool copyIn, void* stream) {
  pendingDevice_ = nullptr;  // an earlier op that failed before finish() left nothing to copy
  dctResult_t res = stageOutput(comm, ptr, bytes, copyIn, stream);
  if (res == dctSuccess && stagingFaultHit()) res = fail(comm, dctTransportError, "injected fault in output staging");
  if (res != dctSuccess) {
    pendingDevice_ = nullptr;  // a stand-in's junk never reaches the device
    ptr = standIn(out_, ptr, bytes);
  }
  return res;
}

}  // namespace dct
