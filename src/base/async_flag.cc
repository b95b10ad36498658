#include "base/async_flag.h"

#include "base/components.h"

namespace dct {

AsyncFlag::~AsyncFlag() {
  // Mapped only through the component, which is then loaded.
  if (mapped_) deviceComponent()->hostFree(mapped_);
}

dctResult_t AsyncFlag::mapForDevice() {
  if (mapped_) return dctSuccess;
  const DeviceComponent* cuda = deviceComponent();
  if (cuda == nullptr) return dctNotSupported;
  void* host = nullptr;
  void* device = nullptr;
  if (cuda->hostAlloc(&host, sizeof(int32_t), &device) != dctSuccess) return dctCudaError;
  mapped_ = static_cast<int32_t*>(host);
  *mapped_ = plain_;
  deviceView_ = static_cast<int32_t*>(device);
  return dctSuccess;
}

}  // namespace dct
