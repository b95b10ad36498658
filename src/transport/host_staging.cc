#include "transport/host_staging.h"

#include <mpi.h>

#include <cstdlib>
#include <string>

#include "base/checked_size.h"
#include "base/components.h"
#include "base/debug.h"
#include "base/memory_space.h"
#include "transport/fault_injection.h"

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

namespace dct {

namespace {
// The CUDA component records a failure for this thread only; staging knows
// the comm, so dctGetLastError(comm) names the failed copy or allocation too.
dctResult_t stagingFail(dctComm_t comm, dctResult_t res) {
  if (comm != nullptr) setCommLastError(comm, threadLastErrorMessage());
  return res;
}

// Only asked once isDeviceMemory() said yes, which needs a CUDA context.
dctResult_t cudaOf(dctComm_t comm, const DeviceComponent** out) {
  *out = deviceComponent();
  if (*out != nullptr) return dctSuccess;
  const std::string why = deviceComponentError();
  return fail(comm, dctNotSupported, "MPI transport: device buffers need the CUDA component, but %s", why.c_str());
}
}  // namespace

#define STAGINGCHECK(comm, call)                             \
  do {                                                       \
    const dctResult_t staging_res_ = (call);                 \
    if (staging_res_ != dctSuccess)                          \
      return stagingFail(comm, staging_res_);                \
  } while (0)

HostStaging::~HostStaging() {
  // Pinned only through the component, which is then loaded.
  if (in_.host) deviceComponent()->hostFree(in_.host);
  if (out_.host) deviceComponent()->hostFree(out_.host);
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
  const DeviceComponent* cuda = nullptr;
  DCTCHECK(cudaOf(comm, &cuda));
  if (slot.host) cuda->hostFree(slot.host);
  slot.host = nullptr;
  slot.capacity = 0;
  size_t room = 0;
  if (!checkedAdd(bytes, bytes / 2, room)) room = bytes;
  STAGINGCHECK(comm, cuda->hostAlloc(&slot.host, room, nullptr));
  slot.capacity = room;
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
  const DeviceComponent* cuda = nullptr;
  DCTCHECK(cudaOf(comm, &cuda));
  // CUDA-aware MPI reads the device buffer itself, but only after the
  // stream's producers (the caller's kernels, our pack copies) are done.
  if (!needed()) {
    STAGINGCHECK(comm, cuda->streamSync(stream));
    return dctSuccess;
  }
  DCTCHECK(reserve(comm, in_, bytes));
  STAGINGCHECK(comm, cuda->copyAsync(in_.host, ptr, bytes, stream));
  STAGINGCHECK(comm, cuda->streamSync(stream));
  ptr = in_.host;
  return dctSuccess;
}

dctResult_t HostStaging::stageOutput(dctComm_t comm, void*& ptr, size_t bytes, bool copyIn, void* stream) {
  if (bytes == 0 || !isDeviceMemory(ptr)) return dctSuccess;
  const DeviceComponent* cuda = nullptr;
  DCTCHECK(cudaOf(comm, &cuda));
  if (!needed()) {  // queued work that still reads or writes ptr ends before MPI writes it
    STAGINGCHECK(comm, cuda->streamSync(stream));
    return dctSuccess;
  }
  DCTCHECK(reserve(comm, out_, bytes));
  if (copyIn) STAGINGCHECK(comm, cuda->copyAsync(out_.host, ptr, bytes, stream));
  STAGINGCHECK(comm, cuda->streamSync(stream));  // the device data is ready before MPI reads/overwrites
  pendingDevice_ = ptr;
  pendingBytes_ = bytes;
  ptr = out_.host;
  return dctSuccess;
}

dctResult_t HostStaging::finish(dctComm_t comm, void* stream) {
  if (pendingDevice_ == nullptr) return dctSuccess;
  const DeviceComponent* cuda = nullptr;
  DCTCHECK(cudaOf(comm, &cuda));
  STAGINGCHECK(comm, cuda->copyAsync(pendingDevice_, out_.host, pendingBytes_, stream));
  STAGINGCHECK(comm, cuda->streamSync(stream));
  pendingDevice_ = nullptr;
  return dctSuccess;
}

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
