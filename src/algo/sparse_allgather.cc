// Sparse allgather of caller COO: values and indices gathered in rank order
// straight into the caller's buffers (two allgatherv, no staging copy).
#include <vector>

#include "algo/algorithms.h"
#include "transport/comm.h"
#include "base/debug.h"

namespace dct {

dctResult_t sparseAllgather(dctComm_t comm, const void* values, const uint32_t* indices,
                            size_t valueBytes, const std::vector<uint64_t>& nnz,
                            void* recvValues, uint32_t* recvIndices, std::vector<size_t>& table, void* stream) {
  const int P = comm->size;
  table.assign(4 * size_t(P), 0);  // within the caller's reservation
  size_t* valBytes = table.data();
  size_t *valOffsets = valBytes + P, *idxBytes = valOffsets + P, *idxOffsets = idxBytes + P;
  size_t total = 0;
  for (int r = 0; r < P; r++) {
    valBytes[r] = nnz[r] * valueBytes;
    valOffsets[r] = total * valueBytes;
    idxBytes[r] = nnz[r] * sizeof(uint32_t);
    idxOffsets[r] = total * sizeof(uint32_t);
    total += nnz[r];
  }
  if (total == 0) return dctSuccess;
  const int me = comm->rank;
  // Both run whatever the first did: the peers wait in the second.
  const dctResult_t idx = comm->transport->allgatherv(comm, indices, idxBytes[me], recvIndices, idxBytes,
                                                      idxOffsets, stream);
  const dctResult_t val = comm->transport->allgatherv(comm, values, valBytes[me], recvValues, valBytes,
                                                      valOffsets, stream);
  return idx != dctSuccess ? idx : val;
}

}  // namespace dct
