// Every libdct and MPI call of the example is checked: on failure the rank
// prints the call, the result and libdct's last error, then aborts the job
// (MPI_Abort: nonzero exit status, no rank left waiting).
#pragma once

#include <dct/dct_mpi.h>
#include <mpi.h>

#include <cstdio>

namespace dlrm {

[[noreturn]] inline void failDct(const char* call, dctResult_t res, dctComm_t comm, const char* file, int line) {
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "rank %d: %s:%d: %s returned %s: %s\n", rank, file, line, call, dctGetErrorString(res),
               dctGetLastError(comm));
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  __builtin_unreachable();
}

[[noreturn]] inline void failMpi(const char* call, int err, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0, rank = -1;
  MPI_Error_string(err, text, &length);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "rank %d: %s:%d: %s failed: %s\n", rank, file, line, call, text);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  __builtin_unreachable();
}

}  // namespace dlrm

#define DLRM_DCT_CHECK(comm, call)                                              \
  do {                                                                          \
    dctResult_t dlrmRes_ = (call);                                              \
    if (dlrmRes_ != dctSuccess) ::dlrm::failDct(#call, dlrmRes_, (comm), __FILE__, __LINE__); \
  } while (0)

#define DLRM_MPI_CHECK(call)                                                    \
  do {                                                                          \
    int dlrmErr_ = (call);                                                      \
    if (dlrmErr_ != MPI_SUCCESS) ::dlrm::failMpi(#call, dlrmErr_, __FILE__, __LINE__); \
  } while (0)
