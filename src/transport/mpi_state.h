// Shared by the MPI transport's files (mpi.cc: the comm, gathers and sums;
// mpi_alltoall.cc: the all-to-alls; mpi_nonblocking.cc: the point-to-point
// exchanges): its per-comm state and error handling.
#pragma once

#include <mpi.h>

#include <memory>
#include <vector>

#include "base/debug.h"
#include "transport/comm.h"
#include "transport/host_staging.h"
#include "transport/mpi_half.h"
#include "transport/mpi_limits.h"
#include "transport/mpi_pieces.h"

namespace dct::mpi {

struct MpiState {
  MPI_Comm comm = MPI_COMM_NULL;
  HostStaging staging;  // device buffers through pinned host memory
  MpiHalfOps halfOps;   // fp16/bf16 sums, created on first use
  // MPI's int counts and displacements, one per rank: send side, receive side.
  std::vector<int> sendCounts, sendDispls, recvCounts, recvDispls;
  // Per rank: pieces of an exchange posted so far, to it and from it (what a
  // failed post leaves to complete), and an equal-block layout (alltoall's
  // split path).
  std::vector<size_t> sentPieces, receivedPieces, blockBytes, blockOffsets;
};

inline MpiState* stateOf(dctComm_t comm) { return static_cast<MpiState*>(comm->transportState); }
inline MPI_Comm mpiOf(dctComm_t comm) { return stateOf(comm)->comm; }
inline MpiPieces pieces() { return MpiPieces{mpiCountLimit()}; }

dctResult_t mpiFail(dctComm_t comm, int err, const char* what);

#define MPICHECK(comm, call)                                            \
  do {                                                                  \
    int mpi_err_ = (call);                                              \
    if (mpi_err_ != MPI_SUCCESS) return mpiFail(comm, mpi_err_, #call); \
  } while (0)

// The first failure of an op's parts.
inline void keepFirst(dctResult_t& res, dctResult_t r) {
  if (res == dctSuccess) res = r;
}

// Completes whatever MPI may still write into or read from (after a failed
// post or test): the peers posted theirs, so this returns.
inline void drain(MPI_Request* requests, int n) {
  for (int i = 0; i < n; i++)
    if (requests[i] != MPI_REQUEST_NULL) (void)MPI_Wait(&requests[i], MPI_STATUS_IGNORE);
}

// After the MPI call: a staging failure is reported now that the rank has
// taken part; otherwise staged outputs go back to the device.
inline dctResult_t settleStaging(dctComm_t comm, HostStaging& stage, dctResult_t staged, void* stream) {
  return staged != dctSuccess ? staged : stage.finish(comm, stream);
}

// Whether a staging failure left a buffer MPI cannot take: no host memory
// at all for a stand-in, the one case where the rank cannot take part.
inline bool lost(const void* ptr, size_t bytes) { return bytes != 0 && ptr == nullptr; }

// A nonblocking exchange in flight.
struct MpiRequest {
  std::unique_ptr<MPI_Request[]> requests;
  int count = 0;  // posted
};

// mpi_alltoall.cc
dctResult_t alltoall(dctComm_t comm, const void* send, void* recv, size_t bytesPerRank, void* stream);
dctResult_t alltoallv(dctComm_t comm, const void* send, const size_t* sendBytes, const size_t* sendOffsets, void* recv,
                      const size_t* recvBytes, const size_t* recvOffsets, size_t totalBytes, void* stream);

// mpi_nonblocking.cc
dctResult_t iallgatherv(dctComm_t comm, const void* send, size_t sendBytes, void* recv, const size_t* recvBytes,
                        const size_t* recvOffsets, void** request);
dctResult_t test(dctComm_t comm, void* request, int* done);
dctResult_t ialltoallv(dctComm_t comm, const void* send, const size_t* sendBytes, const size_t* sendOffsets,
                       void* recv, const size_t* recvBytes, const size_t* recvOffsets, void** request);
// mpi_sendrecv.cc
dctResult_t sendrecv(dctComm_t comm, int peer, const void* send, size_t sendBytes, void* recv, size_t recvCapacity,
                     size_t* received, size_t maxBytes);
// The alltoallv past int counts: every block in pieces, then waited for.
dctResult_t alltoallvLarge(dctComm_t comm, const char* send, const size_t* sendBytes, const size_t* sendOffsets,
                           char* recv, const size_t* recvBytes, const size_t* recvOffsets);

}  // namespace dct::mpi
