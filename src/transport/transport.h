// A transport is a struct of function pointers (MPI, NCCL). All sizes are
// in bytes except allreduce's element count; every call is collective over
// the comm and stream-ordered where the backend has streams. No size limit
// leaks through: messages past a backend's int counts are split.
//
// Failure contract (what lets a step fail on every rank at once):
//  * prepare() does everything that can fail locally (staging memory) ahead
//    of the step's agreement, so the data ops themselves allocate nothing;
//  * a rank that fails a data op has still taken part in it, so no peer is
//    left waiting; the outcome reaches every rank through vote().
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/checked_size.h"
#include "dct/dct.h"

namespace dct {

// End of the furthest non-empty block of a (bytes, offsets) layout; 0 for
// a layout no buffer holds (a block end past SIZE_MAX: checkedExtent).
inline size_t blocksExtent(const size_t* bytes, const size_t* offsets, int n) {
  size_t end = 0;
  return checkedExtent(bytes, offsets, n, end) ? end : 0;
}

struct Transport {
  const char* name;
  bool hostBuffers;    // data ops take host buffers
  bool deviceBuffers;  // data ops take device buffers
  // Room for data ops of up to `bytes` on buffers like `sample` (staging).
  dctResult_t (*prepare)(dctComm_t comm, const void* sample, size_t bytes, void* stream);
  dctResult_t (*allgather)(dctComm_t comm, const void* send, void* recv, size_t bytesPerRank,
                           void* stream);
  dctResult_t (*allgatherv)(dctComm_t comm, const void* send, size_t sendBytes, void* recv,
                            const size_t* recvBytes, const size_t* recvOffsets, void* stream);
  // Nonblocking allgather of host buffers into blocks of given capacity:
  // rank q's block at recv + recvOffsets[q] holds up to recvBytes[q] bytes,
  // and a rank sends what it has (sendBytes <= its capacity; only that
  // crosses the wire, the rest of its block elsewhere is left as is, so the
  // data must say its own length). Optional: null where a backend has none
  // (the pipelined allreduce stays off). `send` may be recv +
  // recvOffsets[rank]. Starts the exchange and hands back a request that
  // test() drives: progress happens inside test(), so the caller tests
  // between pieces of its own work. A request may be null (already done).
  // Every started request must be tested until done, failed or not; the
  // arrays may be freed once this returns; requests complete in order.
  dctResult_t (*iallgatherv)(dctComm_t comm, const void* send, size_t sendBytes, void* recv,
                             const size_t* recvBytes, const size_t* recvOffsets, void** request);
  // *done = 1 once the request has completed (it is freed then); a failed
  // request is done too and reports its failure.
  dctResult_t (*test)(dctComm_t comm, void* request, int* done);
  // Nonblocking alltoallv of host buffers (as alltoallv below), driven and
  // completed by test() like iallgatherv's requests, in order. Optional:
  // null where a backend has none (the all-to-all's forward then runs
  // unchunked).
  dctResult_t (*ialltoallv)(dctComm_t comm, const void* send, const size_t* sendBytes, const size_t* sendOffsets,
                            void* recv, const size_t* recvBytes, const size_t* recvOffsets, void** request);
  // Rank q gets sendBytes[q] bytes from send + sendOffsets[q] and this rank
  // gets recvBytes[q] bytes from rank q at recv + recvOffsets[q] (agreed
  // sizes: this rank's sendBytes[q] is rank q's recvBytes[this rank]).
  // totalBytes: what all ranks send together, the same on every rank, so
  // that every rank takes the same path where a backend has to choose.
  dctResult_t (*alltoallv)(dctComm_t comm, const void* send, const size_t* sendBytes, const size_t* sendOffsets,
                           void* recv, const size_t* recvBytes, const size_t* recvOffsets, size_t totalBytes,
                           void* stream);
  // Small host blocks, the same size everywhere: rank q gets bytesPerRank
  // bytes from send + q * bytesPerRank into recv + rank * bytesPerRank.
  // Optional (null: alltoallv does it); MPI's takes log2 P latencies for
  // small blocks (Bruck) where alltoallv takes P - 1, and splits past int
  // counts like alltoallv.
  dctResult_t (*alltoall)(dctComm_t comm, const void* send, void* recv, size_t bytesPerRank, void* stream);
  dctResult_t (*allreduce)(dctComm_t comm, const void* send, void* recv, size_t count,
                           dctDataType_t datatype, void* stream);  // sum
  // recv (on `root` only; ignored elsewhere) = sum over ranks of send, in
  // the backend's order (like allreduce). Hierarchical steps: the node's sum.
  dctResult_t (*reduce)(dctComm_t comm, const void* send, void* recv, size_t count, dctDataType_t datatype,
                        int root, void* stream);
  // buffer on every rank = buffer on `root`.
  dctResult_t (*broadcast)(dctComm_t comm, void* buffer, size_t bytes, int root, void* stream);
  // Collective over comm: ranks passing the same color >= 0 form a new comm
  // (ranks ordered as in comm) with this transport; color < 0 gets nullptr.
  // Null where a backend cannot split (no hierarchical steps there).
  dctResult_t (*split)(dctComm_t comm, int color, dctComm_t* out);
  // Collective: a color shared exactly by the ranks on this rank's
  // shared-memory node. Null where the backend cannot tell (DCT_LOCAL_SIZE
  // then says where nodes end).
  dctResult_t (*nodeColor)(dctComm_t comm, int* color);
  // *worst = max over ranks of `mine` (a dctResult_t; 0 is success). Host
  // values; called by every rank whatever happened before in the step.
  dctResult_t (*vote)(dctComm_t comm, int32_t mine, int32_t* worst, void* stream);
  // Optional: *vote, an int32 in the memory the data ops take, becomes its
  // max over ranks in place, queued on `stream` with nothing read back (the
  // fixed-capacity step's vote on a device, algo/stream_step.cc). Null: the
  // step reads the value, calls vote() and writes the result back.
  dctResult_t (*voteInPlace)(dctComm_t comm, int32_t* vote, void* stream);
  void (*destroy)(dctComm_t comm);
  // Transports of device buffers only (NCCL): zero-filled memory their data
  // ops take, for libdct's own traffic (the link probe), its release, and a
  // wait for what the comm queued on `stream` (to time it). Null where the
  // transport takes host buffers and its ops return when done.
  dctResult_t (*allocate)(dctComm_t comm, size_t bytes, void** ptr);
  void (*release)(dctComm_t comm, void* ptr);
  dctResult_t (*synchronize)(dctComm_t comm, void* stream);
  // Optional (null: recursive doubling runs the allgather plan instead).
  // The one data op only two ranks take part in: host buffers; sends
  // sendBytes from `send` to `peer` (nothing when send is null) and
  // receives from `peer` at most recvCapacity bytes into `recv` (nothing
  // when recv is null), *received = the length that came. maxBytes: the
  // most either rank may send in this exchange, alike on both, so that both
  // take the same path past MPI's int counts. A message longer than
  // recvCapacity fails the receiver (the sender's part still completes).
  dctResult_t (*sendrecv)(dctComm_t comm, int peer, const void* send, size_t sendBytes, void* recv,
                          size_t recvCapacity, size_t* received, size_t maxBytes);
};

}  // namespace dct
