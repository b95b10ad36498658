// The MPI transport's all-to-alls of host or staged buffers: MPI_Alltoall
// and MPI_Alltoallv while every count and displacement fits an int, the
// point-to-point pieces (mpi_nonblocking.cc) past that.
#include <cstdlib>
#include <cstring>

#include "transport/mpi_state.h"

namespace dct::mpi {
namespace {

// A rank whose blocks lie further apart than int displacements reach (the
// counts fit: they are at most totalBytes) takes part through packed
// copies of them; with copy false (a layout no buffer holds) through junk.
// Only sizes past the agreed total (a caller's bug) or no memory for the
// copies keep the rank out.
dctResult_t packedAlltoallv(dctComm_t comm, const char* send, const size_t* sendBytes, const size_t* sendOffsets,
                            char* recv, const size_t* recvBytes, const size_t* recvOffsets, bool copy) {
  const int P = comm->size;
  MpiState* st = stateOf(comm);
  int *sc = st->sendCounts.data(), *sd = st->sendDispls.data(), *rc = st->recvCounts.data(),
      *rd = st->recvDispls.data();
  size_t sendSum = 0, recvSum = 0;
  bool ok = true;
  for (int q = 0; q < P && ok; q++)
    ok = toInt(sendBytes[q], sc[q]) && toInt(sendSum, sd[q]) && checkedAdd(sendSum, sendBytes[q], sendSum) &&
         toInt(recvBytes[q], rc[q]) && toInt(recvSum, rd[q]) && checkedAdd(recvSum, recvBytes[q], recvSum);
  if (!ok || sendSum > mpiCountLimit() || recvSum > mpiCountLimit())
    return fail(comm, dctInternalError, "MPI alltoallv: this rank's blocks exceed the total all ranks send");
  char* packedSend = static_cast<char*>(std::calloc(sendSum + 1, 1));
  char* packedRecv = static_cast<char*>(std::calloc(recvSum + 1, 1));
  if (packedSend == nullptr || packedRecv == nullptr) {
    std::free(packedSend);
    std::free(packedRecv);
    return fail(comm, dctOutOfMemory, "MPI alltoallv: out of memory for packed blocks");
  }
  for (int q = 0; q < P && copy; q++)
    if (sendBytes[q]) std::memcpy(packedSend + sd[q], send + sendOffsets[q], sendBytes[q]);
  const int err = MPI_Alltoallv(packedSend, sc, sd, MPI_BYTE, packedRecv, rc, rd, MPI_BYTE, mpiOf(comm));
  for (int q = 0; q < P && copy && err == MPI_SUCCESS; q++)
    if (recvBytes[q]) std::memcpy(recv + recvOffsets[q], packedRecv + rd[q], recvBytes[q]);
  std::free(packedSend);
  std::free(packedRecv);
  return err == MPI_SUCCESS ? dctSuccess : mpiFail(comm, err, "MPI_Alltoallv (packed)");
}

// Whether every count and displacement of every rank fits an int: at most
// the total all ranks send, which every rank knows alike (the same choice
// everywhere), once each rank's displacements count from its first block.
bool collectiveAlltoallv(size_t totalBytes) { return totalBytes <= mpiCountLimit(); }

// A layout whose offset + bytes wraps: no buffer holds it. The rank still
// takes part (junk out, nothing in) and reports.
dctResult_t unheldAlltoallv(dctComm_t comm, const size_t* sendBytes, const size_t* sendOffsets,
                            const size_t* recvBytes, const size_t* recvOffsets, size_t totalBytes) {
  if (collectiveAlltoallv(totalBytes))
    DCTCHECK(packedAlltoallv(comm, nullptr, sendBytes, sendOffsets, nullptr, recvBytes, recvOffsets, false));
  else
    DCTCHECK(alltoallvLarge(comm, nullptr, sendBytes, sendOffsets, nullptr, recvBytes, recvOffsets));
  return fail(comm, dctInvalidArgument, "MPI alltoallv: a block's offset + bytes does not fit size_t");
}

}  // namespace

// Host blocks only (the split's piece sizes): no staging. Past int counts
// (all P blocks in one call) the blocks go as an alltoallv in pieces.
dctResult_t alltoall(dctComm_t comm, const void* send, void* recv, size_t bytesPerRank, void*) {
  const int P = comm->size;
  size_t total = 0;
  // bytesPerRank is the same on every rank: every rank refuses alike.
  if (!checkedMul(bytesPerRank, static_cast<size_t>(P), total))
    return fail(comm, dctInvalidArgument, "MPI alltoall: %zu bytes per rank x %d ranks does not fit size_t",
                bytesPerRank, P);
  int b = 0;
  if (total <= mpiCountLimit() && toInt(bytesPerRank, b)) {
    MPICHECK(comm, MPI_Alltoall(send, b, MPI_BYTE, recv, b, MPI_BYTE, mpiOf(comm)));
    return dctSuccess;
  }
  MpiState* st = stateOf(comm);
  for (int q = 0; q < P; q++) {
    st->blockBytes[q] = bytesPerRank;
    st->blockOffsets[q] = q * bytesPerRank;  // < total
  }
  return alltoallvLarge(comm, static_cast<const char*>(send), st->blockBytes.data(), st->blockOffsets.data(),
                        static_cast<char*>(recv), st->blockBytes.data(), st->blockOffsets.data());
}

dctResult_t alltoallv(dctComm_t comm, const void* send, const size_t* sendBytes, const size_t* sendOffsets, void* recv,
                      const size_t* recvBytes, const size_t* recvOffsets, size_t totalBytes, void* stream) {
  const int P = comm->size;
  MpiState* st = stateOf(comm);
  HostStaging& stage = st->staging;
  size_t sendExtent = 0, recvExtent = 0;
  if (!checkedExtent(sendBytes, sendOffsets, P, sendExtent) || !checkedExtent(recvBytes, recvOffsets, P, recvExtent))
    return unheldAlltoallv(comm, sendBytes, sendOffsets, recvBytes, recvOffsets, totalBytes);
  dctResult_t staged = stage.input(comm, send, sendExtent, stream);
  keepFirst(staged, stage.output(comm, recv, recvExtent, false, stream));
  if (lost(send, sendExtent) || lost(recv, recvExtent)) return staged;
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  if (collectiveAlltoallv(totalBytes)) {
    int *sc = st->sendCounts.data(), *sd = st->sendDispls.data(), *rc = st->recvCounts.data(),
        *rd = st->recvDispls.data();
    size_t sendBase = 0, recvBase = 0;
    if (intLayout(sendBytes, sendOffsets, P, mpiCountLimit(), sendBase, sc, sd) &&
        intLayout(recvBytes, recvOffsets, P, mpiCountLimit(), recvBase, rc, rd))
      MPICHECK(comm, MPI_Alltoallv(in + sendBase, sc, sd, MPI_BYTE, out + recvBase, rc, rd, MPI_BYTE, mpiOf(comm)));
    else
      DCTCHECK(packedAlltoallv(comm, in, sendBytes, sendOffsets, out, recvBytes, recvOffsets, true));
  } else {
    DCTCHECK(alltoallvLarge(comm, in, sendBytes, sendOffsets, out, recvBytes, recvOffsets));
  }
  return settleStaging(comm, stage, staged, stream);
}

}  // namespace dct::mpi
