// MPI transport: host buffers (device buffers staged, or passed to
// CUDA-aware MPI) over a private duplicate of the user's comm. The calls a
// PMPI shim may intercept (MPI_Allreduce, MPI_Comm_free: libdct's own
// src/preload/mpi_preload.cc, or a user's tool) go to their PMPI_ entry
// points, so libdct's own traffic never re-enters an interceptor.
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <new>
#include <vector>

#include "base/debug.h"
#include "dct/dct_mpi.h"
#include "transport/comm.h"
#include "transport/host_staging.h"
#include "transport/mpi_half.h"
#include "transport/mpi_limits.h"

namespace dct {

dctResult_t createMpiComm(MPI_Comm mpiComm, dctComm_t* out);

namespace {

struct MpiState {
  MPI_Comm comm = MPI_COMM_NULL;
  HostStaging staging;  // device buffers through pinned host memory
  MpiHalfOps halfOps;   // fp16/bf16 sums, created on first use
};

MpiState* stateOf(dctComm_t comm) { return static_cast<MpiState*>(comm->transportState); }
MPI_Comm mpiOf(dctComm_t comm) { return stateOf(comm)->comm; }

dctResult_t mpiFail(dctComm_t comm, int err, const char* what) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(err, msg, &len);
  return fail(comm, dctTransportError, "%s failed: %s", what, msg);
}

#define MPICHECK(comm, call)                                            \
  do {                                                                  \
    int mpi_err_ = (call);                                              \
    if (mpi_err_ != MPI_SUCCESS) return mpiFail(comm, mpi_err_, #call); \
  } while (0)

// Beyond MPI's int counts a block of `cap` bytes travels as ceil(cap /
// limit) pieces of at most the limit, j-th piece pieceLen(bytes, j) long.
// Sizes that are agreed give the same pieces on every rank; a capacity
// gives the receiver the count without knowing what was sent (trailing
// pieces empty when the sender has less).
size_t piecesOf(size_t cap) { return (cap + mpiCountLimit() - 1) / mpiCountLimit(); }
int pieceLen(size_t bytes, size_t j) {
  const size_t at = j * mpiCountLimit();
  return static_cast<int>(bytes > at ? std::min(mpiCountLimit(), bytes - at) : 0);
}

// Beyond MPI's int counts and displacements: every rank's block is
// broadcast from its owner in pieces of at most the count limit. Every rank
// computes the same pieces from the same (agreed) sizes.
dctResult_t allgathervLarge(dctComm_t comm, const void* send, size_t sendBytes, char* recv,
                            const size_t* bytes, const size_t* offsets) {
  const size_t piece = mpiCountLimit();
  if (sendBytes && send != recv + offsets[comm->rank]) std::memcpy(recv + offsets[comm->rank], send, sendBytes);
  for (int root = 0; root < comm->size; root++)
    for (size_t j = 0; j < piecesOf(bytes[root]); j++)
      MPICHECK(comm,
               MPI_Bcast(recv + offsets[root] + j * piece, pieceLen(bytes[root], j), MPI_BYTE, root, mpiOf(comm)));
  return dctSuccess;
}

dctResult_t allgatherv(dctComm_t comm, const void* send, size_t sendBytes, void* recv,
                       const size_t* recvBytes, const size_t* recvOffsets, void* stream) {
  const int P = comm->size;
  HostStaging& stage = stateOf(comm)->staging;
  DCTCHECK(stage.input(comm, send, sendBytes, stream));
  DCTCHECK(stage.output(comm, recv, blocksExtent(recvBytes, recvOffsets, P), false, stream));
  std::vector<int> counts(P), displs(P);
  bool fits = sendBytes <= mpiCountLimit();
  for (int r = 0; r < P && fits; r++) {
    fits = recvBytes[r] <= mpiCountLimit() && recvOffsets[r] <= mpiCountLimit();
    counts[r] = static_cast<int>(recvBytes[r]);
    displs[r] = static_cast<int>(recvOffsets[r]);
  }
  // The same decision on every rank: the sizes were agreed on.
  if (fits)
    MPICHECK(comm, MPI_Allgatherv(send, static_cast<int>(sendBytes), MPI_BYTE, recv, counts.data(),
                                  displs.data(), MPI_BYTE, mpiOf(comm)));
  else
    DCTCHECK(allgathervLarge(comm, send, sendBytes, static_cast<char*>(recv), recvBytes, recvOffsets));
  return stage.finish(comm, stream);
}

// Point to point, not MPI_Iallgatherv: a receive may be larger than the
// message, so only the bytes a rank has cross the wire, and the blocks'
// capacities can be generous. Same source, tag and comm: successive
// requests match in order.
constexpr int kGatherTag = 0x6763;

struct MpiRequest {
  std::vector<MPI_Request> requests;
};

// Still takes part when the request cannot be allocated: blocking, piece by
// piece, pairing each send with the receive from the rank as far behind.
dctResult_t blockingAllgatherv(dctComm_t comm, char* out, size_t sendBytes, const size_t* recvBytes,
                               const size_t* recvOffsets) {
  const int P = comm->size, me = comm->rank;
  const size_t L = mpiCountLimit();
  for (int k = 1; k < P; k++) {
    const int to = (me + k) % P, from = (me - k + P) % P;
    for (size_t j = 0; j < std::max(piecesOf(recvBytes[me]), piecesOf(recvBytes[from])); j++) {
      const bool sends = j < piecesOf(recvBytes[me]), receives = j < piecesOf(recvBytes[from]);
      MPICHECK(comm, MPI_Sendrecv(out + recvOffsets[me] + j * L, sends ? pieceLen(sendBytes, j) : 0, MPI_BYTE,
                                  sends ? to : MPI_PROC_NULL, kGatherTag, out + recvOffsets[from] + j * L,
                                  receives ? pieceLen(recvBytes[from], j) : 0, MPI_BYTE,
                                  receives ? from : MPI_PROC_NULL, kGatherTag, mpiOf(comm), MPI_STATUS_IGNORE));
    }
  }
  return fail(comm, dctOutOfMemory, "MPI iallgatherv: out of memory");
}

dctResult_t iallgatherv(dctComm_t comm, const void* send, size_t sendBytes, void* recv, const size_t* recvBytes,
                        const size_t* recvOffsets, void** request) {
  *request = nullptr;
  const int P = comm->size, me = comm->rank;
  const size_t L = mpiCountLimit();
  char* out = static_cast<char*>(recv);
  // Too much to send: the block's capacity still goes, so nobody waits.
  const bool over = sendBytes > recvBytes[me];
  if (over) sendBytes = recvBytes[me];
  if (send != out + recvOffsets[me] && sendBytes) std::memcpy(out + recvOffsets[me], send, sendBytes);
  auto* req = new (std::nothrow) MpiRequest();
  if (req == nullptr) return blockingAllgatherv(comm, out, sendBytes, recvBytes, recvOffsets);
  int err = MPI_SUCCESS;
  for (int q = 0; q < P && err == MPI_SUCCESS; q++) {
    for (size_t j = 0; q != me && j < piecesOf(recvBytes[q]) && err == MPI_SUCCESS; j++) {
      req->requests.emplace_back();
      err = MPI_Irecv(out + recvOffsets[q] + j * L, pieceLen(recvBytes[q], j), MPI_BYTE, q, kGatherTag,
                      mpiOf(comm), &req->requests.back());
    }
  }
  for (int k = 1; k < P && err == MPI_SUCCESS; k++) {  // rank me + k first: spread the load
    for (size_t j = 0; j < piecesOf(recvBytes[me]) && err == MPI_SUCCESS; j++) {
      req->requests.emplace_back();
      err = MPI_Isend(out + recvOffsets[me] + j * L, pieceLen(sendBytes, j), MPI_BYTE, (me + k) % P, kGatherTag,
                      mpiOf(comm), &req->requests.back());
    }
  }
  *request = req;  // whatever was posted is completed by test()
  if (err != MPI_SUCCESS) return mpiFail(comm, err, "MPI_Irecv/MPI_Isend");
  return over ? fail(comm, dctInternalError, "MPI iallgatherv: a block exceeds its capacity") : dctSuccess;
}

dctResult_t test(dctComm_t comm, void* request, int* done) {
  *done = 1;
  auto* req = static_cast<MpiRequest*>(request);
  if (req == nullptr) return dctSuccess;
  int flag = 0;
  int err = MPI_Testall(static_cast<int>(req->requests.size()), req->requests.data(), &flag, MPI_STATUSES_IGNORE);
  if (err == MPI_SUCCESS && !flag) {
    *done = 0;
    return dctSuccess;
  }
  delete req;
  return err == MPI_SUCCESS ? dctSuccess : mpiFail(comm, err, "MPI_Testall");
}

dctResult_t allgather(dctComm_t comm, const void* send, void* recv, size_t bytes, void* stream) {
  if (bytes * comm->size <= mpiCountLimit()) {
    HostStaging& stage = stateOf(comm)->staging;
    DCTCHECK(stage.input(comm, send, bytes, stream));
    DCTCHECK(stage.output(comm, recv, bytes * comm->size, false, stream));
    MPICHECK(comm, MPI_Allgather(send, static_cast<int>(bytes), MPI_BYTE, recv, static_cast<int>(bytes),
                                 MPI_BYTE, mpiOf(comm)));
    return stage.finish(comm, stream);
  }
  std::vector<size_t> sizes(comm->size, bytes), offsets(comm->size);
  for (int r = 0; r < comm->size; r++) offsets[r] = r * bytes;
  return allgatherv(comm, send, bytes, recv, sizes.data(), offsets.data(), stream);
}

// Beyond int counts: every block in pieces of at most the count limit, all
// posted nonblocking (pieces of one pair arrive in order: same source, tag
// and comm), the own block copied.
dctResult_t alltoallvLarge(dctComm_t comm, const char* send, const size_t* sendBytes, const size_t* sendOffsets,
                           char* recv, const size_t* recvBytes, const size_t* recvOffsets) {
  const size_t piece = mpiCountLimit();
  const int me = comm->rank;
  std::vector<MPI_Request> requests;
  auto post = [&](bool isSend, int peer, char* base, size_t bytes) -> dctResult_t {
    for (size_t j = 0; j < piecesOf(bytes); j++) {
      char* at = base + j * piece;
      requests.emplace_back();
      if (isSend) MPICHECK(comm, MPI_Isend(at, pieceLen(bytes, j), MPI_BYTE, peer, 0, mpiOf(comm), &requests.back()));
      else MPICHECK(comm, MPI_Irecv(at, pieceLen(bytes, j), MPI_BYTE, peer, 0, mpiOf(comm), &requests.back()));
    }
    return dctSuccess;
  };
  for (int q = 0; q < comm->size; q++)
    if (q != me) DCTCHECK(post(false, q, recv + recvOffsets[q], recvBytes[q]));
  for (int q = 0; q < comm->size; q++)
    if (q != me) DCTCHECK(post(true, q, const_cast<char*>(send) + sendOffsets[q], sendBytes[q]));
  if (sendBytes[me]) std::memcpy(recv + recvOffsets[me], send + sendOffsets[me], sendBytes[me]);
  MPICHECK(comm, MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE));
  return dctSuccess;
}

dctResult_t alltoallv(dctComm_t comm, const void* send, const size_t* sendBytes, const size_t* sendOffsets, void* recv,
                      const size_t* recvBytes, const size_t* recvOffsets, size_t totalBytes, void* stream) {
  const int P = comm->size;
  HostStaging& stage = stateOf(comm)->staging;
  DCTCHECK(stage.input(comm, send, blocksExtent(sendBytes, sendOffsets, P), stream));
  DCTCHECK(stage.output(comm, recv, blocksExtent(recvBytes, recvOffsets, P), false, stream));
  // Every count and displacement of every rank is at most the total all
  // ranks send, which every rank knows alike: the same choice everywhere.
  std::vector<int> sc(P), sd(P), rc(P), rd(P);
  for (int q = 0; q < P; q++) {
    sc[q] = static_cast<int>(sendBytes[q]);
    sd[q] = static_cast<int>(sendOffsets[q]);
    rc[q] = static_cast<int>(recvBytes[q]);
    rd[q] = static_cast<int>(recvOffsets[q]);
  }
  if (totalBytes <= mpiCountLimit())
    MPICHECK(comm, MPI_Alltoallv(send, sc.data(), sd.data(), MPI_BYTE, recv, rc.data(), rd.data(), MPI_BYTE,
                                 mpiOf(comm)));
  else
    DCTCHECK(alltoallvLarge(comm, static_cast<const char*>(send), sendBytes, sendOffsets, static_cast<char*>(recv),
                            recvBytes, recvOffsets));
  return stage.finish(comm, stream);
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

dctResult_t allreduce(dctComm_t comm, const void* send, void* recv, size_t count,
                      dctDataType_t datatype, void* stream) {
  MpiSum sum;
  DCTCHECK(sumOf(comm, datatype, sum));
  const size_t elem = sum.elem;
  const bool inPlace = send == recv;
  HostStaging& stage = stateOf(comm)->staging;
  DCTCHECK(stage.output(comm, recv, count * elem, inPlace, stream));
  if (!inPlace) DCTCHECK(stage.input(comm, send, count * elem, stream));
  // Pieces whose element count fits an int.
  const size_t piece = mpiCountLimit() / elem;
  for (size_t off = 0; off < count; off += piece) {
    int n = static_cast<int>(count - off < piece ? count - off : piece);
    const void* s = inPlace ? MPI_IN_PLACE : static_cast<const char*>(send) + off * elem;
    MPICHECK(comm, PMPI_Allreduce(s, static_cast<char*>(recv) + off * elem, n, sum.type, sum.op, mpiOf(comm)));
  }
  return stage.finish(comm, stream);
}

dctResult_t reduce(dctComm_t comm, const void* send, void* recv, size_t count, dctDataType_t datatype, int root,
                   void* stream) {
  MpiSum sum;
  DCTCHECK(sumOf(comm, datatype, sum));
  const size_t elem = sum.elem;
  const bool isRoot = comm->rank == root;
  HostStaging& stage = stateOf(comm)->staging;
  DCTCHECK(stage.input(comm, send, count * elem, stream));
  if (isRoot) DCTCHECK(stage.output(comm, recv, count * elem, false, stream));
  const size_t piece = mpiCountLimit() / elem;
  for (size_t off = 0; off < count; off += piece) {
    int n = static_cast<int>(count - off < piece ? count - off : piece);
    void* to = isRoot ? static_cast<char*>(recv) + off * elem : nullptr;
    MPICHECK(comm, MPI_Reduce(static_cast<const char*>(send) + off * elem, to, n, sum.type, sum.op, root, mpiOf(comm)));
  }
  return stage.finish(comm, stream);
}

dctResult_t broadcast(dctComm_t comm, void* buffer, size_t bytes, int root, void* stream) {
  HostStaging& stage = stateOf(comm)->staging;
  // The root's data goes in, everyone's comes out.
  DCTCHECK(stage.output(comm, buffer, bytes, comm->rank == root, stream));
  for (size_t off = 0; off < bytes; off += mpiCountLimit()) {
    const size_t n = bytes - off < mpiCountLimit() ? bytes - off : mpiCountLimit();
    MPICHECK(comm, MPI_Bcast(static_cast<char*>(buffer) + off, static_cast<int>(n), MPI_BYTE, root, mpiOf(comm)));
  }
  return stage.finish(comm, stream);
}

dctResult_t split(dctComm_t comm, int color, dctComm_t* out) {
  *out = nullptr;
  MPI_Comm part = MPI_COMM_NULL;
  MPICHECK(comm, MPI_Comm_split(mpiOf(comm), color < 0 ? MPI_UNDEFINED : color, comm->rank, &part));
  if (part == MPI_COMM_NULL) return dctSuccess;
  dctResult_t res = createMpiComm(part, out);
  MPI_Comm_free(&part);  // createMpiComm keeps a duplicate
  return res;
}

// The lowest rank of this rank's shared-memory node names the node.
dctResult_t nodeColor(dctComm_t comm, int* color) {
  MPI_Comm node = MPI_COMM_NULL;
  MPICHECK(comm, MPI_Comm_split_type(mpiOf(comm), MPI_COMM_TYPE_SHARED, comm->rank, MPI_INFO_NULL, &node));
  int err = PMPI_Allreduce(&comm->rank, color, 1, MPI_INT, MPI_MIN, node);
  MPI_Comm_free(&node);
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
    .alltoallv = alltoallv,
    .allreduce = allreduce,
    .reduce = reduce,
    .broadcast = broadcast,
    .split = split,
    .nodeColor = nodeColor,
    .vote = vote,
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
