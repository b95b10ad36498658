// Communicator entry points.
#include "algo/gather_slot.h"
#include "api/guard.h"
#include "base/components.h"
#include "core/compressor.h"
#include "transport/comm.h"
#include "transport/hierarchy.h"
#include "transport/link_probe.h"
#include "dct/dct_mpi.h"
#include "dct_config.h"
#if DCT_HAVE_NCCL
#include "dct/dct_nccl.h"
#endif

namespace dct {
dctResult_t createCallbacksComm(const dctCallbacks_t* callbacks, dctComm_t* out);

namespace {
// What every comm does after its transport is up: the agreed settings and
// hierarchy, then the link probe and the gather slot it prices. Destroys the comm on failure.
dctResult_t finishComm(dctComm_t made, dctComm_t* out) {
  dctResult_t res = settleComm(made);
  if (res == dctSuccess) res = probeLinks(made);
  if (res == dctSuccess) res = settleGatherSlot(made);
  if (res != dctSuccess) {
    dctCommDestroy(made);
    return res;
  }
  *out = made;
  return dctSuccess;
}
}  // namespace
}  // namespace dct
using namespace dct;

extern "C" dctResult_t dctCommInitMpi(MPI_Comm mpiComm, dctComm_t* comm) {
  return guarded(nullptr, "dctCommInitMpi", [&] {
    if (comm == nullptr) return fail(nullptr, dctInvalidArgument, "dctCommInitMpi: comm is NULL");
    *comm = nullptr;
    const MpiComponent* mpi = mpiComponent();
    if (mpi == nullptr) return fail(nullptr, dctNotSupported, "dctCommInitMpi: %s", mpiComponentError());
    dctComm_t made = nullptr;
    DCTCHECK(mpi->createComm(&mpiComm, &made));
    return finishComm(made, comm);
  });
}

extern "C" dctResult_t dctCommInitCallbacks(const dctCallbacks_t* callbacks, dctComm_t* comm) {
  return guarded(nullptr, "dctCommInitCallbacks", [&] {
    if (comm == nullptr) return fail(nullptr, dctInvalidArgument, "dctCommInitCallbacks: comm is NULL");
    *comm = nullptr;
    dctComm_t made = nullptr;
    DCTCHECK(createCallbacksComm(callbacks, &made));
    return finishComm(made, comm);
  });
}

#if DCT_HAVE_NCCL
extern "C" dctResult_t dctCommInitNccl(ncclComm_t ncclComm, dctComm_t* comm) {
  return guarded(nullptr, "dctCommInitNccl", [&] {
    if (comm == nullptr) return fail(nullptr, dctInvalidArgument, "dctCommInitNccl: comm is NULL");
    *comm = nullptr;
    if (ncclComm == nullptr) return fail(nullptr, dctInvalidArgument, "dctCommInitNccl: ncclComm is NULL");
    const DeviceComponent* cuda = deviceComponent();
    if (cuda == nullptr) return fail(nullptr, dctNotSupported, "dctCommInitNccl: %s", deviceComponentError());
    if (cuda->createNcclComm == nullptr)
      return fail(nullptr, dctNotSupported, "dctCommInitNccl: libdct_cuda.so was built without NCCL");
    dctComm_t made = nullptr;
    DCTCHECK(cuda->createNcclComm(ncclComm, &made));
    return finishComm(made, comm);
  });
}
#endif

extern "C" dctResult_t dctCommDestroy(dctComm_t comm) {
  if (comm == nullptr) return dctSuccess;
  if (!validComm(comm)) return fail(nullptr, dctInvalidArgument, "dctCommDestroy: not a dctComm_t");
  return guarded(nullptr, "dctCommDestroy", [&] {
    destroyHierarchy(comm);
    if (comm->sparseInput) compressorDestroy(comm->sparseInput);
    comm->transport->destroy(comm);
    comm->magic = 0;
    delete comm;
    return dctSuccess;
  });
}

extern "C" dctResult_t dctCommRank(dctComm_t comm, int* rank) {
  if (!validComm(comm)) return fail(nullptr, dctInvalidArgument, "dctCommRank: invalid comm");
  if (rank == nullptr) return fail(comm, dctInvalidArgument, "dctCommRank: rank is NULL");
  *rank = comm->rank;
  return dctSuccess;
}

extern "C" dctResult_t dctCommGetAsyncError(dctComm_t comm, dctResult_t* asyncError) {
  if (!validComm(comm)) return fail(nullptr, dctInvalidArgument, "dctCommGetAsyncError: invalid comm");
  if (asyncError == nullptr) return fail(comm, dctInvalidArgument, "dctCommGetAsyncError: asyncError is NULL");
  const int32_t code = comm->asyncError.read();
  *asyncError = code >= 0 && code < dctNumResults ? static_cast<dctResult_t>(code) : dctInternalError;
  return dctSuccess;
}

extern "C" dctResult_t dctCommSize(dctComm_t comm, int* size) {
  if (!validComm(comm)) return fail(nullptr, dctInvalidArgument, "dctCommSize: invalid comm");
  if (size == nullptr) return fail(comm, dctInvalidArgument, "dctCommSize: size is NULL");
  *size = comm->size;
  return dctSuccess;
}
