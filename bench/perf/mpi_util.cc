// Small helpers the collectives share: hashing for cross-rank identity
// checks, dtype mapping, failure reports.
#include <cstdio>
#include <cstring>

#include "harness.h"

namespace dctbench {

uint64_t hashBytes(const void* data, size_t bytes) {
  // Word-at-a-time multiply-rotate mix: a 64 MiB buffer hashes in a few ms.
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t h = 0x243f6a8885a308d3ull ^ bytes;
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
  }
  for (; i < bytes; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h ^ (h >> 32);
}

bool sameOnAllRanks(uint64_t hash, MPI_Comm mpi) {
  uint64_t lo = 0, hi = 0;
  MPI_Allreduce(&hash, &lo, 1, MPI_UINT64_T, MPI_MIN, mpi);
  MPI_Allreduce(&hash, &hi, 1, MPI_UINT64_T, MPI_MAX, mpi);
  return lo == hi;
}

bool allOk(bool ok, MPI_Comm mpi) {
  int bad = ok ? 0 : 1, anyBad = 0;
  MPI_Allreduce(&bad, &anyBad, 1, MPI_INT, MPI_MAX, mpi);
  return anyBad == 0;
}

MPI_Datatype mpiType(dctDataType_t dtype) { return dtype == dctFloat64 ? MPI_DOUBLE : MPI_FLOAT; }

void reportDctFailure(dctComm_t comm, int rank, const char* what, dctResult_t res) {
  std::fprintf(stderr, "[rank %d] %s failed: %s (%s)\n", rank, what, dctGetErrorString(res),
               dctGetLastError(comm));
}

}  // namespace dctbench
