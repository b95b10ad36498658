// Lets a host-only transport (MPI without CUDA support) move device
// buffers: device inputs are copied into pinned host memory before the
// call, device outputs are received there and copied back after it. Host
// buffers pass straight through; without a CUDA context nothing is staged.
// The copies go through the CUDA component (base/components.h).
//
// A failed input() or output() still leaves `ptr` on host memory of `bytes`
// (a stand-in with undefined contents: the staging slot, or a plain
// allocation), so the op takes part in its collective before it reports the
// failure (transport.h's contract); nullptr only when no host memory at all
// could be had.
#pragma once

#include <cstddef>

#include "dct/dct.h"

namespace dct {

class HostStaging {
 public:
  HostStaging() = default;
  HostStaging(const HostStaging&) = delete;
  HostStaging& operator=(const HostStaging&) = delete;
  ~HostStaging();

  // False when MPI can take device pointers itself (CUDA-aware MPI).
  static bool needed();
  // Staging room for ops of up to `bytes` on buffers like `sample`, so the
  // ops themselves allocate nothing (a no-op for host buffers).
  dctResult_t prepare(dctComm_t comm, const void* sample, size_t bytes);
  // Replaces a device input pointer by a host copy (stream synchronised).
  dctResult_t input(dctComm_t comm, const void*& ptr, size_t bytes, void* stream);
  // Replaces a device output pointer by a host buffer; with copyIn its
  // current contents come along (in-place operations).
  dctResult_t output(dctComm_t comm, void*& ptr, size_t bytes, bool copyIn, void* stream);
  // Copies staged outputs back to the device and waits for them.
  dctResult_t finish(dctComm_t comm, void* stream);

 private:
  struct Slot {
    void* host = nullptr;
    size_t capacity = 0;
    void* spare = nullptr;  // a failed op's stand-in when `host` is too small
  };
  dctResult_t reserve(dctComm_t comm, Slot& slot, size_t bytes);
  dctResult_t stageInput(dctComm_t comm, const void*& ptr, size_t bytes, void* stream);
  dctResult_t stageOutput(dctComm_t comm, void*& ptr, size_t bytes, bool copyIn, void* stream);
  // Host memory of `bytes` for an op whose staging failed: ptr itself when
  // the op could take it.
  static void* standIn(Slot& slot, const void* ptr, size_t bytes);
  Slot in_, out_;
  void* pendingDevice_ = nullptr;
  size_t pendingBytes_ = 0;
};

}  // namespace dct
