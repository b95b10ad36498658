// MPI transport: host buffers over a private duplicate of the user's comm.
#include <mpi.h>

#include <climits>
#include <vector>

#include "transport/comm.h"
#include "base/debug.h"
#include "dct/dct_mpi.h"
#include "transport/host_staging.h"

namespace dct {
namespace {

struct MpiState {
  MPI_Comm comm = MPI_COMM_NULL;
  HostStaging staging;  // device buffers through pinned host memory
};

MpiState* stateOf(dctComm_t comm) { return static_cast<MpiState*>(comm->transportState); }
MPI_Comm mpiOf(dctComm_t comm) { return stateOf(comm)->comm; }

size_t extent(const size_t* bytes, const size_t* offsets, int n) {
  size_t end = 0;
  for (int i = 0; i < n; i++)
    if (bytes[i] && offsets[i] + bytes[i] > end) end = offsets[i] + bytes[i];
  return end;
}

dctResult_t mpiFail(dctComm_t comm, int err, const char* what) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(err, msg, &len);
  return fail(comm, dctTransportError, "%s failed: %s", what, msg);
}

#define MPICHECK(comm, call)                                        \
  do {                                                              \
    int mpi_err_ = (call);                                          \
    if (mpi_err_ != MPI_SUCCESS) return mpiFail(comm, mpi_err_, #call); \
  } while (0)

// MPI counts are int: convert, refusing what does not fit.
dctResult_t toInts(dctComm_t comm, const size_t* in, int n, std::vector<int>& out) {
  out.resize(n);
  for (int i = 0; i < n; i++) {
    if (in[i] > static_cast<size_t>(INT_MAX))
      return fail(comm, dctNotSupported,
                  "message of %zu bytes exceeds MPI's int count limit (2 GiB per rank)", in[i]);
    out[i] = static_cast<int>(in[i]);
  }
  return dctSuccess;
}

dctResult_t allgather(dctComm_t comm, const void* send, void* recv, size_t bytes, void* stream) {
  if (bytes * comm->size > static_cast<size_t>(INT_MAX))
    return fail(comm, dctNotSupported, "allgather of %zu bytes per rank is too large", bytes);
  HostStaging& stage = stateOf(comm)->staging;
  DCTCHECK(stage.input(comm, send, bytes, stream));
  DCTCHECK(stage.output(comm, recv, bytes * comm->size, false, stream));
  MPICHECK(comm, MPI_Allgather(send, static_cast<int>(bytes), MPI_BYTE, recv,
                               static_cast<int>(bytes), MPI_BYTE, mpiOf(comm)));
  return stage.finish(comm, stream);
}

dctResult_t allgatherv(dctComm_t comm, const void* send, size_t sendBytes, void* recv,
                       const size_t* recvBytes, const size_t* recvOffsets, void* stream) {
  std::vector<int> counts, displs, own;
  DCTCHECK(toInts(comm, recvBytes, comm->size, counts));
  DCTCHECK(toInts(comm, recvOffsets, comm->size, displs));
  DCTCHECK(toInts(comm, &sendBytes, 1, own));
  HostStaging& stage = stateOf(comm)->staging;
  DCTCHECK(stage.input(comm, send, sendBytes, stream));
  DCTCHECK(stage.output(comm, recv, extent(recvBytes, recvOffsets, comm->size), false, stream));
  MPICHECK(comm, MPI_Allgatherv(send, own[0], MPI_BYTE, recv, counts.data(), displs.data(),
                                MPI_BYTE, mpiOf(comm)));
  return stage.finish(comm, stream);
}

dctResult_t allreduce(dctComm_t comm, const void* send, void* recv, size_t count,
                      dctDataType_t datatype, void* stream) {
  if (datatype != dctFloat32 && datatype != dctFloat64)
    return fail(comm, dctNotSupported, "MPI allreduce: datatype %d", static_cast<int>(datatype));
  MPI_Datatype type = datatype == dctFloat64 ? MPI_DOUBLE : MPI_FLOAT;
  const size_t elem = datatype == dctFloat64 ? 8 : 4;
  const bool inPlace = send == recv;
  HostStaging& stage = stateOf(comm)->staging;
  DCTCHECK(stage.output(comm, recv, count * elem, inPlace, stream));
  if (!inPlace) DCTCHECK(stage.input(comm, send, count * elem, stream));
  const void* src = inPlace ? MPI_IN_PLACE : send;
  // Chunk so that every call's count fits an int.
  const size_t chunk = static_cast<size_t>(INT_MAX) / 2;
  for (size_t off = 0; off < count; off += chunk) {
    int n = static_cast<int>(count - off < chunk ? count - off : chunk);
    const void* s = src == MPI_IN_PLACE ? MPI_IN_PLACE
                                        : static_cast<const char*>(send) + off * elem;
    MPICHECK(comm, MPI_Allreduce(s, static_cast<char*>(recv) + off * elem, n, type, MPI_SUM,
                                 mpiOf(comm)));
  }
  return stage.finish(comm, stream);
}

void destroy(dctComm_t comm) {
  auto* state = static_cast<MpiState*>(comm->transportState);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && state->comm != MPI_COMM_NULL) MPI_Comm_free(&state->comm);
  delete state;
  comm->transportState = nullptr;
}

constexpr Transport kMpiTransport = {
    .name = "MPI",
    .allgather = allgather,
    .allgatherv = allgatherv,
    .allreduce = allreduce,
    .destroy = destroy,
};

}  // namespace

// Builds a comm on a duplicate of mpiComm; called by dctCommInitMpi.
dctResult_t createMpiComm(MPI_Comm mpiComm, dctComm_t* out) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    return fail(nullptr, dctInvalidUsage, "dctCommInitMpi: MPI is not initialised (or already finalised)");
  if (mpiComm == MPI_COMM_NULL) return fail(nullptr, dctInvalidArgument, "dctCommInitMpi: MPI_COMM_NULL");
  auto* comm = new dctComm();
  auto* state = new MpiState();
  comm->transport = &kMpiTransport;
  comm->transportState = state;
  int err = MPI_Comm_dup(mpiComm, &state->comm);
  if (err == MPI_SUCCESS) err = MPI_Comm_set_errhandler(state->comm, MPI_ERRORS_RETURN);
  if (err == MPI_SUCCESS) err = MPI_Comm_rank(state->comm, &comm->rank);
  if (err == MPI_SUCCESS) err = MPI_Comm_size(state->comm, &comm->size);
  if (err != MPI_SUCCESS) {
    dctResult_t res = mpiFail(nullptr, err, "dctCommInitMpi");
    destroy(comm);
    delete comm;
    return res;
  }
  *out = comm;
  return dctSuccess;
}

}  // namespace dct
