// Data-parallel replicas must stay bit-identical: the examples compare an
// FNV-1a hash of their replicated parameters across ranks after each epoch.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>

namespace examples {

// FNV-1a over the bytes of n floats.
inline uint64_t checksum(const float* data, size_t n) {
  const auto* p = reinterpret_cast<const unsigned char*>(data);
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n * sizeof(float); i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

// True when the n floats have the same bits on every rank of comm (a failed
// MPI call counts as a difference).
inline bool replicasIdentical(const float* data, size_t n, MPI_Comm comm) {
  const uint64_t mine = checksum(data, n);
  uint64_t lo = 0, hi = 0;
  if (MPI_Allreduce(&mine, &lo, 1, MPI_UINT64_T, MPI_MIN, comm) != MPI_SUCCESS ||
      MPI_Allreduce(&mine, &hi, 1, MPI_UINT64_T, MPI_MAX, comm) != MPI_SUCCESS)
    return false;
  return lo == hi;
}

}  // namespace examples
