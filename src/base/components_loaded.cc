// libdct.so's components: dlopen'd on first use from the folder libdct.so
// itself was loaded from (DCT_COMPONENT_DIR overrides it), once per process.
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "base/components.h"
#include "dct_config.h"

namespace dct {
namespace {

struct Loaded {
  const void* table = nullptr;
  std::string error;
};

std::string ownFolder() {
  if (const char* dir = std::getenv("DCT_COMPONENT_DIR"); dir != nullptr && *dir != '\0') return dir;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&mpiComponent), &info) == 0 || info.dli_fname == nullptr) return ".";
  const char* slash = std::strrchr(info.dli_fname, '/');
  return slash ? std::string(info.dli_fname, slash) : std::string(".");
}

// The table's abi and version must be this build's: the component calls
// libdct's internals, which have no stable ABI.
template <typename Table>
Loaded load(const char* file, const char* entry, bool built, const char* howToGet) {
  Loaded out;
  const std::string dir = ownFolder();
  const std::string path = dir + "/" + file;
  auto why = [&](const std::string& what) {
    out.error = std::string(file) + " " + what + " (searched " + dir + "; " + howToGet + ")";
  };
  if (!built) {
    why("is not part of this build");
    return out;
  }
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = dlerror();
    why(std::string("cannot be loaded: ") + (err ? err : "unknown error"));
    return out;
  }
  using Entry = const Table* (*)();
  auto fn = reinterpret_cast<Entry>(dlsym(lib, entry));
  const Table* table = fn ? fn() : nullptr;
  if (table == nullptr || table->abi != kComponentAbi || table->version == nullptr ||
      std::strcmp(table->version, DCT_BUILD_VERSION) != 0) {
    why(std::string("is not from this libdct ") + DCT_BUILD_VERSION + " (no " + entry + " of its abi and version)");
    dlclose(lib);
    return out;
  }
  out.table = table;  // kept loaded for the process's life
  return out;
}

const Loaded& mpi() {
  static const Loaded loaded = load<MpiComponent>(
      "libdct_mpi.so", "dctComponentMpi_v1", DCT_HAVE_MPI,
      "build libdct with MPI found, or install the libdct wheel, which has it");
  return loaded;
}

const Loaded& device() {
  static const Loaded loaded = load<DeviceComponent>(
      "libdct_cuda.so", "dctComponentCuda_v1", DCT_HAVE_CUDA,
      "build libdct where the CUDA toolkit (and NCCL for dctCommInitNccl) is found, or install a libdct wheel "
      "built with CUDA");
  return loaded;
}

}  // namespace

const MpiComponent* mpiComponent() { return static_cast<const MpiComponent*>(mpi().table); }
const DeviceComponent* deviceComponent() { return static_cast<const DeviceComponent*>(device().table); }
const char* mpiComponentError() { return mpi().error.c_str(); }
const char* deviceComponentError() { return device().error.c_str(); }

}  // namespace dct
