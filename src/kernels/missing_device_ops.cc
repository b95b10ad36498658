// The twin for device buffers when the CUDA component cannot be had: no
// context can be made, so no op runs, and the error says how to get it.
#include "base/components.h"
#include "base/debug.h"
#include "kernels/kernels.h"

namespace dct {

const KernelOps& missingDeviceOps() {
  static const KernelOps ops = [] {
    KernelOps o{};
    o.name = "CUDA (component missing)";
    o.device = true;
    o.createContext = [](KernelContext** ctx) {
      *ctx = nullptr;
      return fail(nullptr, dctNotSupported, "device buffers need the CUDA component, but %s", deviceComponentError());
    };
    o.destroyContext = [](KernelContext*) {};
    return o;
  }();
  return ops;
}

}  // namespace dct
