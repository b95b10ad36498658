// The parts of libdct that need MPI or CUDA live in components loaded on
// first use (libdct_mpi.so, libdct_cuda.so beside libdct.so), so libdct.so
// itself loads without either. Each component exports one C entry point
// returning its table; the loader checks the table's abi and version.
#pragma once

#include <cstddef>

#include "dct/dct.h"

namespace dct {

struct KernelOps;

constexpr int kComponentAbi = 1;

struct MpiComponent {
  int abi;               // kComponentAbi
  const char* version;   // DCT_VERSION_STRING of the build
  // mpiComm points to an MPI_Comm (its type differs between MPIs).
  dctResult_t (*createComm)(const void* mpiComm, dctComm_t* out);
};

// The CUDA runtime's services for code outside the component, and its twin.
struct DeviceComponent {
  int abi;
  const char* version;
  const KernelOps* kernels;                    // the CUDA twin
  bool (*isDeviceMemory)(const void* ptr);     // device or managed memory
  int (*currentDevice)();                      // -1 when none
  // Pinned host memory; with deviceView, mapped into the device's space.
  dctResult_t (*hostAlloc)(void** ptr, size_t bytes, void** deviceView);
  void (*hostFree)(void* ptr);
  dctResult_t (*copyAsync)(void* dst, const void* src, size_t bytes, void* stream);  // any direction
  dctResult_t (*streamSync)(void* stream);
  // Null when built without NCCL. ncclComm is an ncclComm_t.
  dctResult_t (*createNcclComm)(void* ncclComm, dctComm_t* out);
};

// Null when the component cannot be had; componentError() says why (the
// file, the folder searched, the loader's message, how to get it).
const MpiComponent* mpiComponent();
const DeviceComponent* deviceComponent();
const char* mpiComponentError();
const char* deviceComponentError();

}  // namespace dct

// The components' entry points (extern "C": found with dlsym).
extern "C" const dct::MpiComponent* dctComponentMpi_v1();
extern "C" const dct::DeviceComponent* dctComponentCuda_v1();
