// Kernel contexts for the entry points that work on one rank's buffers
// (dctScatterAdd, index checks on device): one per twin, kept for the
// process's life.
#pragma once

#include <mutex>

#include "base/components.h"
#include "base/debug.h"
#include "kernels/kernels.h"

namespace dct {

// One kernel context per twin (per device for the CUDA twin) for the local
// entry points, created on first use and never destroyed: a static
// destructor could call CUDA after the driver unloaded. Contexts are not
// thread-safe, so fn runs under the slot's mutex.
struct LocalContextSlot {
  std::mutex mutex;
  KernelContext* ctx = nullptr;
};
constexpr int kLocalContextDevices = 64;  // more devices: a context per call

inline LocalContextSlot* localContextSlot(const KernelOps& twin) {
  static LocalContextSlot* const slots = new LocalContextSlot[1 + kLocalContextDevices];
  if (!twin.device) return &slots[0];
  const DeviceComponent* cuda = deviceComponent();
  const int device = cuda ? cuda->currentDevice() : -1;
  return device >= 0 && device < kLocalContextDevices ? &slots[1 + device] : nullptr;
}

template <typename Fn>
dctResult_t withLocalContext(const KernelOps& twin, Fn&& fn) {
  LocalContextSlot* slot = localContextSlot(twin);
  if (slot == nullptr) {
    KernelContext* ctx = nullptr;
    DCTCHECK(twin.createContext(&ctx));
    dctResult_t res = fn(ctx);
    twin.destroyContext(ctx);
    return res;
  }
  std::lock_guard<std::mutex> lock(slot->mutex);
  if (slot->ctx == nullptr) DCTCHECK(twin.createContext(&slot->ctx));
  return fn(slot->ctx);
}

}  // namespace dct
