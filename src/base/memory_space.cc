// CUDA builds only. The driver is looked up with RTLD_NOLOAD: if nothing in
// the process has loaded it, nothing can have allocated device memory.
#include "base/memory_space.h"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <link.h>

#include <cstddef>
#include <cstring>

#include <atomic>

namespace dct {
namespace {

// The few driver entry points needed, resolved by name (libdct does not
// link the driver, so a CUDA build still loads on machines without one).
struct Driver {
  int (*ctxGetCurrent)(void** ctx) = nullptr;
  int (*deviceGetCount)(int* count) = nullptr;
  int (*deviceGet)(int* device, int ordinal) = nullptr;
  int (*primaryCtxGetState)(int device, unsigned* flags, int* active) = nullptr;
  bool load() {
    // dlopen(RTLD_NOLOAD) of a library not loaded still searches the file
    // system (measured ~50 us a call, several calls a collective): look in
    // the list of loaded objects first, which costs no system call.
    if (!inProcess()) return false;
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (lib == nullptr) return false;
    ctxGetCurrent = reinterpret_cast<decltype(ctxGetCurrent)>(dlsym(lib, "cuCtxGetCurrent"));
    deviceGetCount = reinterpret_cast<decltype(deviceGetCount)>(dlsym(lib, "cuDeviceGetCount"));
    deviceGet = reinterpret_cast<decltype(deviceGet)>(dlsym(lib, "cuDeviceGet"));
    primaryCtxGetState = reinterpret_cast<decltype(primaryCtxGetState)>(dlsym(lib, "cuDevicePrimaryCtxGetState"));
    return ctxGetCurrent && deviceGetCount && deviceGet && primaryCtxGetState;
  }
  // dl_iterate_phdr hands every object its loader's running count of loads
  // (dlpi_adds): while it has not moved since a scan that found no driver,
  // the answer stands, after looking at one object instead of every plugin
  // MPI loaded (a strstr over ~100 names was ~10% of a 64 KiB allreduce).
  static bool inProcess() {
    static std::atomic<unsigned long long> scannedAdds{0};
    struct Scan {
      unsigned long long known, adds = 0;
      bool unchanged = false;
    } scan{scannedAdds.load(std::memory_order_relaxed)};
    const int found = dl_iterate_phdr(
        [](dl_phdr_info* info, size_t size, void* data) {
          auto* s = static_cast<Scan*>(data);
          if (s->adds == 0 && size >= offsetof(dl_phdr_info, dlpi_subs)) {
            s->adds = info->dlpi_adds;
            if (s->adds == s->known) {
              s->unchanged = true;
              return 1;
            }
          }
          return info->dlpi_name != nullptr && std::strstr(info->dlpi_name, "libcuda.so") != nullptr ? 1 : 0;
        },
        &scan);
    if (scan.unchanged) return false;
    if (!found) scannedAdds.store(scan.adds, std::memory_order_relaxed);
    return found != 0;
  }
};

bool anyContext() {
  static Driver driver;
  static std::atomic<bool> loaded{false};
  if (!loaded.load(std::memory_order_acquire)) {
    if (!driver.load()) return false;  // driver not in the process (yet)
    loaded.store(true, std::memory_order_release);
  }
  void* current = nullptr;
  if (driver.ctxGetCurrent(&current) == 0 && current != nullptr) return true;
  int devices = 0;
  if (driver.deviceGetCount(&devices) != 0) return false;  // not initialised: no context
  for (int d = 0; d < devices; d++) {
    int dev = 0, active = 0;
    unsigned flags = 0;
    if (driver.deviceGet(&dev, d) == 0 && driver.primaryCtxGetState(dev, &flags, &active) == 0 && active)
      return true;
  }
  return false;
}

// Sticky: once a context has existed, ask the runtime every time.
bool deviceMemoryPossible() {
  static std::atomic<bool> seen{false};
  if (seen.load(std::memory_order_relaxed)) return true;
  if (!anyContext()) return false;
  seen.store(true, std::memory_order_relaxed);
  return true;
}

}  // namespace

bool isDeviceMemory(const void* ptr) {
  if (ptr == nullptr || !deviceMemoryPossible()) return false;
  cudaPointerAttributes attr;
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}

}  // namespace dct
