// libdct_mpi_preload.so: a PMPI shim. Preloaded (mpirun -x LD_PRELOAD=...)
// with DCT_MPI_COMPRESS=1, MPI_Allreduce calls that sum MPI_FLOAT or
// MPI_DOUBLE buffers of at least DCT_PRELOAD_MIN_BYTES on an
// intracommunicator the policy admits (MPI_IN_PLACE included) run libdct's
// sparse allreduce; everything else, MPI_Iallreduce and every other call
// included, is MPI's own. libdct's own MPI traffic goes through the PMPI_*
// entry points, so it never comes back here. Exports exactly MPI_Allreduce,
// MPI_Comm_free and MPI_Finalize (cmake/mpi_preload.map).
// Needs no CUDA: a device buffer binds no compressor here (no CUDA twin
// linked in), so the call fails on every rank and goes to MPI as it was.
#include <mpi.h>

#include <cstdlib>
#include <new>

#include "base/dtype.h"
#include "base/env.h"
#include "dct/dct_mpi.h"
#include "preload/session.h"
#include "preload/shielded.h"

using namespace dct::preload;

namespace {

// Leaked on purpose, like the NCCL shim's: a program that exits without
// MPI_Finalize must not have a static destructor free its compressors'
// device memory after the CUDA runtime may be gone (nor call MPI after
// exit began). MPI_Finalize releases everything; an exit handler without it
// only logs the summary.
Session& session() {
  static Session* s = [] {
    auto* made = new Session("libdct MPI preload", policyFromEnv("libdct MPI preload", "DCT_MPI_COMPRESS"),
                             dct::envPositiveInteger("DCT_PRELOAD_CACHE", 64));
    std::atexit([] { session().finish(false); });
    return made;
  }();
  return *s;
}

bool dctTypeOf(MPI_Datatype type, dctDataType_t* out) {
  if (type == MPI_FLOAT) *out = dctFloat32;
  else if (type == MPI_DOUBLE) *out = dctFloat64;
  else return false;
  return true;
}

}  // namespace

// Every exported call runs shielded (preload/shielded.h).
template <typename Fn>
int shielded(Fn&& fn) noexcept {
  return dct::preload::shielded<int>(MPI_ERR_NO_MEM, MPI_ERR_INTERN, fn);
}

#define DCT_PRELOAD_EXPORT extern "C" __attribute__((visibility("default")))

static int interceptAllreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                              MPI_Comm comm) {
  auto below = [&] { return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm); };
  Session& s = session();
  if (count <= 0 || comm == MPI_COMM_NULL) return below();
  int inter = 0;
  CallFacts facts;
  if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter ||
      PMPI_Comm_size(comm, &facts.commSize) != MPI_SUCCESS)
    return below();  // MPI reports a bad communicator; intercommunicators are MPI's
  CompressCall call;
  facts.typeSupported = dctTypeOf(datatype, &call.datatype);
  facts.opSupported = op == MPI_SUM;
  facts.bytes = facts.typeSupported ? static_cast<uint64_t>(count) * dct::dtypeSize(call.datatype) : 0;
  // Through the layer below, on the caller's communicator: the first call
  // there compares the ranks' policies (even where this rank's is off).
  const Agreer agree = [&](uint64_t* values, int n) {
    return PMPI_Allreduce(MPI_IN_PLACE, values, n, MPI_UINT64_T, MPI_MAX, comm) == MPI_SUCCESS;
  };
  if (s.admit(handleKey(comm), facts, agree) != Verdict::Compress) return below();
  call.comm = handleKey(comm);
  call.sendbuf = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  call.recvbuf = recvbuf;
  call.count = static_cast<size_t>(count);
  call.op = dctSum;
  const dctResult_t res = s.compress(call, [&](dctComm_t* out) { return dctCommInitMpi(comm, out); }, agree);
  return res == dctSuccess ? MPI_SUCCESS : below();  // failed on every rank, nothing written
}

DCT_PRELOAD_EXPORT int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                                     MPI_Op op, MPI_Comm comm) {
  return shielded([&] { return interceptAllreduce(sendbuf, recvbuf, count, datatype, op, comm); });
}

DCT_PRELOAD_EXPORT int MPI_Comm_free(MPI_Comm* comm) {
  return shielded([&] {
    if (comm != nullptr && *comm != MPI_COMM_NULL) session().forget(handleKey(*comm));
    return PMPI_Comm_free(comm);
  });
}

DCT_PRELOAD_EXPORT int MPI_Finalize() {
  return shielded([] {
    session().finish(true);
    return PMPI_Finalize();
  });
}
