// The MPI transport's pairwise exchange (Transport::sendrecv), the rounds of
// recursive doubling. Up to the count limit one MPI_Sendrecv carries a
// message whose length the receiver learns from its status: one latency per
// round. Past it (maxBytes, alike on both ranks, says when) the lengths go
// first, then the pieces, as many as the longer message needs, so that both
// ranks make the same calls.
#include <mpi.h>

#include "transport/mpi_state.h"

namespace dct::mpi {
namespace {

constexpr int kPairTag = 0x5d0b;  // point-to-point only: no collective shares it

// One exchange of at most the count limit each way; null sides skip.
int exchange(MPI_Comm c, int peer, const void* send, int sendCount, void* recv, int recvCount, int* got) {
  MPI_Status st;
  int err = MPI_SUCCESS;
  *got = 0;
  if (send && recv)
    err = MPI_Sendrecv(send, sendCount, MPI_BYTE, peer, kPairTag, recv, recvCount, MPI_BYTE, peer, kPairTag, c, &st);
  else if (send)
    return MPI_Send(send, sendCount, MPI_BYTE, peer, kPairTag, c);
  else if (recv)
    err = MPI_Recv(recv, recvCount, MPI_BYTE, peer, kPairTag, c, &st);
  else
    return MPI_SUCCESS;
  if (err == MPI_SUCCESS) err = MPI_Get_count(&st, MPI_BYTE, got);
  return err;
}

}  // namespace

dctResult_t sendrecv(dctComm_t comm, int peer, const void* send, size_t sendBytes, void* recv, size_t recvCapacity,
                     size_t* received, size_t maxBytes) {
  *received = 0;
  const MpiPieces p = pieces();
  const MPI_Comm c = mpiOf(comm);
  if (sendBytes > maxBytes)
    return fail(comm, dctInternalError, "MPI sendrecv: %zu bytes to send, more than the agreed %zu", sendBytes,
                maxBytes);
  if (maxBytes <= p.limit) {
    const size_t cap = recvCapacity < maxBytes ? recvCapacity : maxBytes;
    int got = 0;
    MPICHECK(comm, exchange(c, peer, send, static_cast<int>(sendBytes), recv, static_cast<int>(cap), &got));
    *received = static_cast<size_t>(got);
    return dctSuccess;
  }
  uint64_t mine = sendBytes, theirs = 0;
  int got = 0;
  MPICHECK(comm, exchange(c, peer, send ? &mine : nullptr, sizeof(mine), recv ? &theirs : nullptr, sizeof(theirs),
                          &got));
  if (recv && got != static_cast<int>(sizeof(theirs)))
    return fail(comm, dctTransportError, "MPI sendrecv: a length of %d bytes from rank %d", got, peer);
  // Every piece the peer sends is received, the part past the capacity
  // into nothing (truncated): the peer's sends complete whatever came.
  const size_t longer = mine > theirs ? mine : theirs, keep = theirs < recvCapacity ? theirs : recvCapacity;
  dctResult_t res = theirs > recvCapacity
                        ? fail(comm, dctTransportError, "MPI sendrecv: rank %d sends %llu bytes, room for %zu", peer,
                               static_cast<unsigned long long>(theirs), recvCapacity)
                        : dctSuccess;
  for (size_t j = 0, at = 0; j < p.piecesOf(longer) && p.pieceAt(0, j, at); j++) {
    const int out = p.pieceLen(sendBytes, j), in = p.pieceLen(keep, j);
    const bool sends = send && out > 0, receives = recv && p.pieceLen(theirs, j) > 0;
    int n = 0;
    const int err = exchange(c, peer, sends ? static_cast<const char*>(send) + at : nullptr, out,
                             receives ? static_cast<char*>(recv) + at : nullptr, in, &n);
    if (err != MPI_SUCCESS && res == dctSuccess) res = mpiFail(comm, err, "MPI_Sendrecv (a piece)");
  }
  *received = keep;
  return res;
}

}  // namespace dct::mpi
