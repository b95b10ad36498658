// Shared by the MPI transport's tests (test_mpi_post_faults,
// test_mpi_limits): a byte pattern every rank can check, and an uneven,
// agreed alltoallv layout built from it.
#pragma once

#include <cstddef>
#include <vector>

namespace dcttest {

// Byte b of the block rank `from` sends rank `to`.
inline unsigned char pattern(int from, int to, size_t b) {
  return static_cast<unsigned char>(31 * from + 17 * to + 7 * b + 1);
}

// Bytes rank `from` sends rank `to` in the all-to-all: uneven, agreed.
inline size_t pairBytes(int from, int to) { return 3 + (7 * from + 5 * to) % 11; }

// This rank's side of the all-to-all, packed; `total`: what all ranks send.
struct Alltoall {
  std::vector<unsigned char> send, recv;
  std::vector<size_t> sendBytes, sendOffsets, recvBytes, recvOffsets;
  size_t total = 0;
  Alltoall(int me, int P) : sendBytes(P), sendOffsets(P), recvBytes(P), recvOffsets(P) {
    size_t s = 0, r = 0;
    for (int q = 0; q < P; q++) {
      sendBytes[q] = pairBytes(me, q);
      recvBytes[q] = pairBytes(q, me);
      sendOffsets[q] = s;
      recvOffsets[q] = r;
      s += sendBytes[q];
      r += recvBytes[q];
      for (int p = 0; p < P; p++) total += pairBytes(p, q);
    }
    send.resize(s);
    for (int q = 0; q < P; q++)
      for (size_t b = 0; b < sendBytes[q]; b++) send[sendOffsets[q] + b] = pattern(me, q, b);
    recv.resize(r);
  }
  // Whether every block arrived (but the one from `except`, if any).
  bool okFrom(int me, int except) const {
    for (size_t q = 0; q < recvBytes.size(); q++)
      for (size_t b = 0; b < recvBytes[q] && static_cast<int>(q) != except; b++)
        if (recv[recvOffsets[q] + b] != pattern(static_cast<int>(q), me, b)) return false;
    return true;
  }
  bool ok(int me) const { return okFrom(me, -1); }
};

}  // namespace dcttest
