// libdct_mpi.so's table: the MPI transport.
#include <mpi.h>

#include "base/components.h"
#include "dct_config.h"

namespace dct {
dctResult_t createMpiComm(MPI_Comm mpiComm, dctComm_t* out);

namespace {
dctResult_t createComm(const void* mpiComm, dctComm_t* out) {
  return createMpiComm(*static_cast<const MPI_Comm*>(mpiComm), out);
}
}  // namespace
}  // namespace dct

extern "C" __attribute__((visibility("default"))) const dct::MpiComponent* dctComponentMpi_v1() {
  static const dct::MpiComponent table = {dct::kComponentAbi, DCT_BUILD_VERSION, dct::createComm};
  return &table;
}
