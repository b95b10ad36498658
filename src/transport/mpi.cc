// MPI transport: host buffers (device buffers staged, or passed to
// CUDA-aware MPI) over a private duplicate of the user's comm. The calls a
// PMPI shim may intercept (MPI_Allreduce, MPI_Comm_free: libdct's own
// src/preload/mpi_preload.cc, or a user's tool) go to their PMPI_ entry
// points, so libdct's own traffic never re-enters an interceptor.
//
// A data op allocates nothing that can throw (per-rank arrays live in the
// state, sized at creation), and a rank whose staging fails still makes the
// MPI call on stand-in buffers (host_staging.h) before it reports the
// failure; requests are never dropped while MPI may still write into them.
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <new>
#include <vector>

#include "dct/dct_mpi.h"
#include "transport/fault_injection.h"
#include "transport/mpi_state.h"

namespace dct {

dctResult_t createMpiComm(MPI_Comm mpiComm, dctComm_t* out);

namespace mpi {

dctResult_t mpiFail(dctComm_t comm, int err, const char* what) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(err, msg, &len);
  return fail(comm, dctTransportError, "%s failed: %s", what, msg);
}

namespace {

// Beyond MPI's int counts and displacements: every rank's block is
// broadcast from its owner in pieces of at most the count limit. Every rank
// computes the same pieces from the same (agreed) sizes.
dctResult_t allgathervLarge(dctComm_t comm, const void* send, size_t sendBytes, char* recv,
                            const size_t* bytes, const size_t* offsets) {
  const MpiPieces p = pieces();
  if (sendBytes && send != recv + offsets[comm->rank]) std::memcpy(recv + offsets[comm->rank], send, sendBytes);
  for (int root = 0; root < comm->size; root++)
    for (size_t j = 0, at = 0; j < p.piecesOf(bytes[root]); j++)
      if (p.pieceAt(offsets[root], j, at))  // inside the checked extent
        MPICHECK(comm, MPI_Bcast(recv + at, p.pieceLen(bytes[root], j), MPI_BYTE, root, mpiOf(comm)));
  return dctSuccess;
}

dctResult_t allgatherv(dctComm_t comm, const void* send, size_t sendBytes, void* recv,
                       const size_t* recvBytes, const size_t* recvOffsets, void* stream) {
  const int P = comm->size;
  MpiState* st = stateOf(comm);
  HostStaging& stage = st->staging;
  size_t extent = 0;
  // The layout is agreed: every rank refuses alike, and makes the same choice below.
  if (!checkedExtent(recvBytes, recvOffsets, P, extent))
    return fail(comm, dctInvalidArgument, "MPI allgatherv: a block's offset + bytes does not fit size_t");
  sendBytes = std::min(sendBytes, recvBytes[comm->rank]);  // equal by contract; never past the block
  dctResult_t staged = stage.input(comm, send, sendBytes, stream);
  keepFirst(staged, stage.output(comm, recv, extent, false, stream));
  if (lost(send, sendBytes) || lost(recv, extent)) return staged;
  int* counts = st->recvCounts.data();
  int* displs = st->recvDispls.data();
  size_t base = 0;
  int sendCount = 0;
  if (intLayout(recvBytes, recvOffsets, P, mpiCountLimit(), base, counts, displs) && toInt(sendBytes, sendCount))
    MPICHECK(comm, MPI_Allgatherv(send, sendCount, MPI_BYTE, static_cast<char*>(recv) + base, counts, displs,
                                  MPI_BYTE, mpiOf(comm)));
  else
    DCTCHECK(allgathervLarge(comm, send, sendBytes, static_cast<char*>(recv), recvBytes, recvOffsets));
  return settleStaging(comm, stage, staged, stream);
}

// allgathervLarge for equal blocks: every rank's block broadcast from its
// owner in pieces.
dctResult_t allgatherLarge(dctComm_t comm, const void* send, char* recv, size_t bytes) {
  const MpiPieces p = pieces();
  char* mine = recv + comm->rank * bytes;  // the caller checked bytes x P
  if (bytes && send != mine) std::memcpy(mine, send, bytes);
  for (int root = 0; root < comm->size; root++)
    for (size_t j = 0, at = 0; j < p.piecesOf(bytes); j++)
      if (p.pieceAt(root * bytes, j, at))
        MPICHECK(comm, MPI_Bcast(recv + at, p.pieceLen(bytes, j), MPI_BYTE, root, mpiOf(comm)));
  return dctSuccess;
}

dctResult_t allgather(dctComm_t comm, const void* send, void* recv, size_t bytes, void* stream) {
  const int P = comm->size;
  size_t total = 0;
  // bytes is the same on every rank: every rank refuses alike.
  if (!checkedMul(bytes, static_cast<size_t>(P), total))
    return fail(comm, dctInvalidArgument, "MPI allgather: %zu bytes x %d ranks does not fit size_t", bytes, P);
  HostStaging& stage = stateOf(comm)->staging;
  dctResult_t staged = stage.input(comm, send, bytes, stream);
  keepFirst(staged, stage.output(comm, recv, total, false, stream));
  if (lost(send, bytes) || lost(recv, total)) return staged;
  int b = 0;
  if (total <= mpiCountLimit() && toInt(bytes, b))
    MPICHECK(comm, MPI_Allgather(send, b, MPI_BYTE, recv, b, MPI_BYTE, mpiOf(comm)));
  else
    DCTCHECK(allgatherLarge(comm, send, static_cast<char*>(recv), bytes));
  return settleStaging(comm, stage, staged, stream);
}

// The MPI type, sum and element size of a dctDataType_t.
struct MpiSum {
  MPI_Datatype type = MPI_FLOAT;
  MPI_Op op = MPI_SUM;
  size_t elem = 4;
};

dctResult_t sumOf(dctComm_t comm, dctDataType_t datatype, MpiSum& sum) {
  if (datatype == dctFloat64) sum = {MPI_DOUBLE, MPI_SUM, 8};
  else if (datatype == dctFloat16 || datatype == dctBFloat16) {
    sum = {MPI_UINT16_T, MPI_SUM, 2};
    MPICHECK(comm, mpiHalfSum(stateOf(comm)->halfOps, datatype, &sum.op));
  } else if (datatype != dctFloat32) {
    return fail(comm, dctNotSupported, "MPI sum: datatype %d", static_cast<int>(datatype));
  }
  return dctSuccess;
}

// count x elem bytes; count is the same on every rank: every rank refuses alike.
dctResult_t sumBytes(dctComm_t comm, const char* op, size_t count, size_t elem, size_t& bytes) {
  if (checkedMul(count, elem, bytes)) return dctSuccess;
  return fail(comm, dctInvalidArgument, "MPI %s: %zu elements of %zu bytes do not fit size_t", op, count, elem);
}

// Elements per MPI call: an int count whose bytes stay within the count
// limit (at least one element).
size_t sumPiece(size_t elem) { return mpiCountLimit() / elem ? mpiCountLimit() / elem : 1; }

dctResult_t allreduce(dctComm_t comm, const void* send, void* recv, size_t count,
                      dctDataType_t datatype, void* stream) {
  MpiSum sum;
  DCTCHECK(sumOf(comm, datatype, sum));
  const size_t elem = sum.elem;
  size_t bytes = 0;
  DCTCHECK(sumBytes(comm, "allreduce", count, elem, bytes));
  const bool inPlace = send == recv;
  HostStaging& stage = stateOf(comm)->staging;
  dctResult_t staged = stage.output(comm, recv, bytes, inPlace, stream);
  if (!inPlace) keepFirst(staged, stage.input(comm, send, bytes, stream));
  if (lost(recv, bytes) || (!inPlace && lost(send, bytes))) return staged;
  const size_t piece = sumPiece(elem);
  for (size_t off = 0; off < count; off += piece) {  // off + piece <= count + INT_MAX: count x elem fits
    const int n = static_cast<int>(count - off < piece ? count - off : piece);  // <= piece <= INT_MAX
    const void* s = inPlace ? MPI_IN_PLACE : static_cast<const char*>(send) + off * elem;
    MPICHECK(comm, PMPI_Allreduce(s, static_cast<char*>(recv) + off * elem, n, sum.type, sum.op, mpiOf(comm)));
  }
  return settleStaging(comm, stage, staged, stream);
}

dctResult_t reduce(dctComm_t comm, const void* send, void* recv, size_t count, dctDataType_t datatype, int root,
                   void* stream) {
  MpiSum sum;
  DCTCHECK(sumOf(comm, datatype, sum));
  const size_t elem = sum.elem;
  size_t bytes = 0;
  DCTCHECK(sumBytes(comm, "reduce", count, elem, bytes));
  const bool isRoot = comm->rank == root;
  HostStaging& stage = stateOf(comm)->staging;
  dctResult_t staged = stage.input(comm, send, bytes, stream);
  if (isRoot) keepFirst(staged, stage.output(comm, recv, bytes, false, stream));
  if (lost(send, bytes) || (isRoot && lost(recv, bytes))) return staged;
  const size_t piece = sumPiece(elem);
  for (size_t off = 0; off < count; off += piece) {
    const int n = static_cast<int>(count - off < piece ? count - off : piece);  // <= piece <= INT_MAX
    void* to = isRoot ? static_cast<char*>(recv) + off * elem : nullptr;
    MPICHECK(comm, MPI_Reduce(static_cast<const char*>(send) + off * elem, to, n, sum.type, sum.op, root, mpiOf(comm)));
  }
  return settleStaging(comm, stage, staged, stream);
}

dctResult_t broadcast(dctComm_t comm, void* buffer, size_t bytes, int root, void* stream) {
  HostStaging& stage = stateOf(comm)->staging;
  // The root's data goes in, everyone's comes out.
  const dctResult_t staged = stage.output(comm, buffer, bytes, comm->rank == root, stream);
  if (lost(buffer, bytes)) return staged;
  const MpiPieces p = pieces();
  for (size_t j = 0, at = 0; j < p.piecesOf(bytes) && p.pieceAt(0, j, at); j++)
    MPICHECK(comm, MPI_Bcast(static_cast<char*>(buffer) + at, p.pieceLen(bytes, j), MPI_BYTE, root, mpiOf(comm)));
  return settleStaging(comm, stage, staged, stream);
}

dctResult_t split(dctComm_t comm, int color, dctComm_t* out) {
  *out = nullptr;
  MPI_Comm part = MPI_COMM_NULL;
  MPICHECK(comm, MPI_Comm_split(mpiOf(comm), color < 0 ? MPI_UNDEFINED : color, comm->rank, &part));
  if (part == MPI_COMM_NULL) return dctSuccess;
  dctResult_t res = createMpiComm(part, out);
  PMPI_Comm_free(&part);  // createMpiComm keeps a duplicate
  return res;
}

// The lowest rank of this rank's shared-memory node names the node.
dctResult_t nodeColor(dctComm_t comm, int* color) {
  MPI_Comm node = MPI_COMM_NULL;
  MPICHECK(comm, MPI_Comm_split_type(mpiOf(comm), MPI_COMM_TYPE_SHARED, comm->rank, MPI_INFO_NULL, &node));
  int err = PMPI_Allreduce(&comm->rank, color, 1, MPI_INT, MPI_MIN, node);
  PMPI_Comm_free(&node);
  return err == MPI_SUCCESS ? dctSuccess : mpiFail(comm, err, "MPI_Allreduce (node color)");
}

dctResult_t vote(dctComm_t comm, int32_t mine, int32_t* worst, void*) {
  int in = mine, out = 0;
  MPICHECK(comm, PMPI_Allreduce(&in, &out, 1, MPI_INT, MPI_MAX, mpiOf(comm)));
  *worst = out;
  return dctSuccess;
}

dctResult_t prepare(dctComm_t comm, const void* sample, size_t bytes, void*) {
  return stateOf(comm)->staging.prepare(comm, sample, bytes);
}

void destroy(dctComm_t comm) {
  auto* state = static_cast<MpiState*>(comm->transportState);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && state->comm != MPI_COMM_NULL) PMPI_Comm_free(&state->comm);
  if (!finalized) mpiHalfOpsFree(state->halfOps);
  delete state;
  comm->transportState = nullptr;
}

constexpr Transport kMpiTransport = {
    .name = "MPI",
    .hostBuffers = true,
    .deviceBuffers = true,  // staged through pinned host memory unless CUDA-aware
    .prepare = prepare,
    .allgather = allgather,
    .allgatherv = allgatherv,
    .iallgatherv = iallgatherv,
    .test = test,
    .ialltoallv = ialltoallv,
    .alltoallv = alltoallv,
    .alltoall = alltoall,
    .allreduce = allreduce,
    .reduce = reduce,
    .broadcast = broadcast,
    .split = split,
    .nodeColor = nodeColor,
    .vote = vote,
    .voteInPlace = nullptr,  // host values: vote() serves
    .destroy = destroy,
    .allocate = nullptr,  // takes host buffers
    .release = nullptr,
    .synchronize = nullptr,
    .sendrecv = sendrecv,
};

}  // namespace
}  // namespace mpi

using mpi::MpiState;

// Builds a comm on a duplicate of mpiComm; called by dctCommInitMpi. Every
// rank takes part in the duplication and in one vote after it, whatever
// failed before, so a rank out of memory here fails every rank instead of
// leaving the others in the comm's first collective.
dctResult_t createMpiComm(MPI_Comm mpiComm, dctComm_t* out) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    return fail(nullptr, dctInvalidUsage, "dctCommInitMpi: MPI is not initialised (or already finalised)");
  if (mpiComm == MPI_COMM_NULL) return fail(nullptr, dctInvalidArgument, "dctCommInitMpi: MPI_COMM_NULL");
  const bool injected = commCreateFaultHit();
  auto* comm = injected ? nullptr : new (std::nothrow) dctComm();
  auto* state = injected ? nullptr : new (std::nothrow) MpiState();
  MPI_Comm dup = MPI_COMM_NULL;
  int err = MPI_Comm_dup(mpiComm, &dup);
  if (err == MPI_SUCCESS) err = MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  if (err == MPI_SUCCESS && (comm == nullptr || state == nullptr)) err = MPI_ERR_NO_MEM;
  if (err == MPI_SUCCESS) err = MPI_Comm_rank(dup, &comm->rank);
  if (err == MPI_SUCCESS) err = MPI_Comm_size(dup, &comm->size);
  if (err == MPI_SUCCESS) {
    try {
      for (auto* v : {&state->sendCounts, &state->sendDispls, &state->recvCounts, &state->recvDispls})
        v->resize(comm->size);
      for (auto* v : {&state->sentPieces, &state->receivedPieces, &state->blockBytes, &state->blockOffsets})
        v->resize(comm->size);
    } catch (const std::bad_alloc&) {
      err = MPI_ERR_NO_MEM;
    }
  }
  int mine = err != MPI_SUCCESS, anyone = 1;
  if (PMPI_Allreduce(&mine, &anyone, 1, MPI_INT, MPI_MAX, mpiComm) != MPI_SUCCESS) anyone = 1;
  if (anyone) {
    if (dup != MPI_COMM_NULL) PMPI_Comm_free(&dup);
    delete state;
    delete comm;
    if (mine) return mpi::mpiFail(nullptr, err, "dctCommInitMpi");
    return fail(nullptr, dctInvalidUsage, "dctCommInitMpi: another rank could not create its comm");
  }
  state->comm = dup;
  comm->transport = &mpi::kMpiTransport;
  comm->transportState = state;
  *out = comm;
  return dctSuccess;
}

}  // namespace dct
