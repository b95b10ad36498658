// The driver is looked up with RTLD_NOLOAD: if nothing in the process has
// loaded it, nothing can have allocated device memory, and the CUDA
// component is never loaded. Once a context exists the component's runtime
// answers; without the component the driver itself does, so a device buffer
// fails clearly instead of being read as host memory.
#include "base/memory_space.h"

#include <dlfcn.h>
#include <link.h>

#include <cstddef>
#include <cstring>

#include <atomic>

#include "base/components.h"

namespace dct {
namespace {

// The few driver entry points needed, resolved by name (libdct does not
// link the driver, so it still loads on machines without one).
struct Driver {
  int (*ctxGetCurrent)(void** ctx) = nullptr;
  int (*pointerGetAttribute)(void* data, int attribute, unsigned long long ptr) = nullptr;
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
    pointerGetAttribute = reinterpret_cast<decltype(pointerGetAttribute)>(dlsym(lib, "cuPointerGetAttribute"));
    return ctxGetCurrent && deviceGetCount && deviceGet && primaryCtxGetState && pointerGetAttribute;
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

Driver driver;

bool anyContext() {
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

// The driver's view (no runtime): device, unified or managed memory.
bool driverSaysDevice(const void* ptr) {
  constexpr int kMemoryType = 2, kIsManaged = 8;   // CU_POINTER_ATTRIBUTE_*
  constexpr unsigned kDevice = 2, kUnified = 4;    // CU_MEMORYTYPE_*
  const auto p = reinterpret_cast<unsigned long long>(ptr);
  unsigned type = 0, managed = 0;
  if (driver.pointerGetAttribute(&managed, kIsManaged, p) == 0 && managed) return true;
  return driver.pointerGetAttribute(&type, kMemoryType, p) == 0 && (type == kDevice || type == kUnified);
}

}  // namespace

bool isDeviceMemory(const void* ptr) {
  if (ptr == nullptr || !deviceMemoryPossible()) return false;
  if (const DeviceComponent* d = deviceComponent()) return d->isDeviceMemory(ptr);
  return driverSaysDevice(ptr);
}

}  // namespace dct
