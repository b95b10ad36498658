// Components linked in (the dct_internal archive, the self-contained
// preload shims): the tables are there, nothing is loaded.
// DCT_LINKED_MPI / DCT_LINKED_DEVICE say which ones this binary has.
#include "base/components.h"

namespace dct {

const MpiComponent* mpiComponent() {
#if DCT_LINKED_MPI
  return dctComponentMpi_v1();
#else
  return nullptr;
#endif
}

const DeviceComponent* deviceComponent() {
#if DCT_LINKED_DEVICE
  return dctComponentCuda_v1();
#else
  return nullptr;
#endif
}

const char* mpiComponentError() { return "the MPI transport is not linked into this binary"; }
const char* deviceComponentError() {
  return "the CUDA twin is not linked into this binary (the MPI shim passes device buffers to MPI uncompressed)";
}

}  // namespace dct
