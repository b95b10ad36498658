// The MPI transport's point-to-point exchanges: iallgatherv and ialltoallv
// (driven by test()), and the alltoallv past int counts. Every block goes in
// pieces of at most the count limit; the pieces of one pair arrive in order
// (same source, tag and comm), so successive exchanges match in order too.
//
// A rank whose post fails (MPI_Isend/MPI_Irecv) still completes every send
// and receive of that exchange, blocking, before it reports the failure:
// its peers posted theirs and wait for this rank's, and the comm's next
// exchange must not meet this one's leftover messages.
#include <algorithm>
#include <cstring>
#include <new>

#include "transport/mpi_post_fault.h"
#include "transport/mpi_state.h"

namespace dct::mpi {
namespace {

// Point to point, not MPI_Iallgatherv: a receive may be larger than the
// message, so only the bytes a rank has cross the wire, and the blocks'
// capacities can be generous.
constexpr int kGatherTag = 0x6763;
constexpr int kAlltoallTag = 0;

// One side of an exchange with every peer: block q holds bytes(q) bytes at
// base + offset(q) and travels in piecesOf(cap(q)) pieces (a receiver knows
// the capacity, not what was sent). A gather's send side is one block for
// every peer. An invalid side (a layout no buffer can hold) still takes
// part, with empty pieces.
struct Side {
  char* base;
  const size_t* bytes;
  const size_t* caps;
  const size_t* offsets;
  bool one;  // the same block for every peer
  bool valid;
  MpiPieces p;

  size_t at(int q) const { return one ? 0 : static_cast<size_t>(q); }
  size_t pieces(int q) const { return p.piecesOf(caps[at(q)]); }
  int len(int q, size_t j) const { return valid ? p.pieceLen(bytes[at(q)], j) : 0; }
  char* ptr(int q, size_t j) const {
    size_t off = 0;
    return valid && p.pieceAt(offsets[at(q)], j, off) ? base + off : base;
  }
};

int post(bool send, const Side& s, int q, size_t j, int tag, MPI_Comm c, MPI_Request* r) {
  if (mpiPostFaultHit()) return MPI_ERR_OTHER;
  return send ? MPI_Isend(s.ptr(q, j), s.len(q, j), MPI_BYTE, q, tag, c, r)
              : MPI_Irecv(s.ptr(q, j), s.len(q, j), MPI_BYTE, q, tag, c, r);
}

// Blocking, pair by pair: in round k each piece to the rank k ahead is
// paired with the one from the rank k behind. Only the pieces past
// sent[q] / received[q] (per peer; null: all) go, the rest having been
// posted. Deadlock-free whatever the peers do: a rank blocked in round k
// waits only on a posted request or on a peer's same round and piece.
// Every piece is tried even after a failure; returns the first error.
int exchangeBlocking(dctComm_t comm, const Side& out, const Side& in, int tag, const size_t* sent,
                     const size_t* received) {
  const int P = comm->size, me = comm->rank;
  int first = MPI_SUCCESS;
  for (int k = 1; k < P; k++) {
    const int to = (me + k) % P, from = (me - k + P) % P;
    const size_t s0 = sent ? sent[to] : 0, r0 = received ? received[from] : 0;
    const size_t sn = out.pieces(to), rn = in.pieces(from);
    for (size_t j = std::min(s0, r0); j < std::max(sn, rn); j++) {
      const bool s = j >= s0 && j < sn, r = j >= r0 && j < rn;
      if (!s && !r) continue;
      const int err = MPI_Sendrecv(out.ptr(to, j), s ? out.len(to, j) : 0, MPI_BYTE, s ? to : MPI_PROC_NULL, tag,
                                   in.ptr(from, j), r ? in.len(from, j) : 0, MPI_BYTE, r ? from : MPI_PROC_NULL, tag,
                                   mpiOf(comm), MPI_STATUS_IGNORE);
      if (first == MPI_SUCCESS) first = err;
    }
  }
  return first;
}

// Pieces to post: every piece to and from every peer.
bool requestCount(dctComm_t comm, const Side& out, const Side& in, int& count) {
  size_t n = 0;
  for (int q = 0; q < comm->size; q++)
    if (q != comm->rank && (!checkedAdd(n, out.pieces(q), n) || !checkedAdd(n, in.pieces(q), n))) return false;
  return toInt(n, count);
}

// Posts every piece into `req`: the receives first (in rank order), then
// the sends (the rank k ahead first: spreads the load). Without room for
// the requests (`req` null, or more requests than an int counts) the
// exchange runs blocking instead, `blocking` set and `req` left empty. A
// failed post completes the rest blocking and drains what it posted before
// it reports.
dctResult_t postExchange(dctComm_t comm, const Side& out, const Side& in, int tag, MpiRequest* req, bool& blocking) {
  const int P = comm->size, me = comm->rank;
  int n = 0;
  blocking = req == nullptr || !requestCount(comm, out, in, n);
  if (!blocking) req->requests.reset(new (std::nothrow) MPI_Request[n]);
  blocking = blocking || (n && req->requests == nullptr);
  if (blocking) {
    const int err = exchangeBlocking(comm, out, in, tag, nullptr, nullptr);
    return err == MPI_SUCCESS ? dctSuccess : mpiFail(comm, err, "MPI_Sendrecv");
  }
  MpiState* st = stateOf(comm);
  size_t* sent = st->sentPieces.data();
  size_t* received = st->receivedPieces.data();
  std::fill(sent, sent + P, size_t(0));
  std::fill(received, received + P, size_t(0));
  MPI_Request* r = req->requests.get();
  int& posted = req->count;
  int err = MPI_SUCCESS;
  for (int q = 0; q < P && err == MPI_SUCCESS; q++)
    for (size_t j = 0; q != me && j < in.pieces(q) && err == MPI_SUCCESS; j++) {
      err = post(false, in, q, j, tag, mpiOf(comm), &r[posted]);
      if (err == MPI_SUCCESS) posted++, received[q]++;
    }
  for (int k = 1; k < P && err == MPI_SUCCESS; k++) {
    const int q = (me + k) % P;
    for (size_t j = 0; j < out.pieces(q) && err == MPI_SUCCESS; j++) {
      err = post(true, out, q, j, tag, mpiOf(comm), &r[posted]);
      if (err == MPI_SUCCESS) posted++, sent[q]++;
    }
  }
  if (err == MPI_SUCCESS) return dctSuccess;
  // The posted requests progress while the rest goes blocking.
  (void)exchangeBlocking(comm, out, in, tag, sent, received);
  drain(r, posted);
  posted = 0;
  return mpiFail(comm, err, "MPI_Irecv/MPI_Isend");
}

Side gatherSide(char* base, const size_t* bytes, const size_t* caps, const size_t* offsets, bool one, bool valid) {
  return Side{base, bytes, caps, offsets, one, valid, pieces()};
}

dctResult_t waitAll(dctComm_t comm, MpiRequest& req) {
  const int err = MPI_Waitall(req.count, req.requests.get(), MPI_STATUSES_IGNORE);
  if (err != MPI_SUCCESS) drain(req.requests.get(), req.count);
  return err == MPI_SUCCESS ? dctSuccess : mpiFail(comm, err, "MPI_Waitall");
}

// Posts an alltoallv's pieces, the own block copied. An invalid local
// layout (offset + bytes wraps: no buffer holds it; the buffers may be
// null then) takes part with empty pieces and reports.
dctResult_t postAlltoallv(dctComm_t comm, const char* send, const size_t* sendBytes, const size_t* sendOffsets,
                          char* recv, const size_t* recvBytes, const size_t* recvOffsets, MpiRequest* req,
                          bool& blocking) {
  const int P = comm->size, me = comm->rank;
  size_t sendEnd = 0, recvEnd = 0;
  const bool valid =
      checkedExtent(sendBytes, sendOffsets, P, sendEnd) && checkedExtent(recvBytes, recvOffsets, P, recvEnd);
  if (valid && sendBytes[me] && recv + recvOffsets[me] != send + sendOffsets[me])
    std::memcpy(recv + recvOffsets[me], send + sendOffsets[me], std::min(sendBytes[me], recvBytes[me]));
  const Side out = gatherSide(const_cast<char*>(send), sendBytes, sendBytes, sendOffsets, false, valid);
  const Side in = gatherSide(recv, recvBytes, recvBytes, recvOffsets, false, valid);
  DCTCHECK(postExchange(comm, out, in, kAlltoallTag, req, blocking));
  if (valid) return dctSuccess;
  if (req) {  // nothing stays posted; the empty receives' truncation is expected
    (void)waitAll(comm, *req);
    req->count = 0;
  }
  return fail(comm, dctInvalidArgument, "MPI alltoallv: a block's offset + bytes does not fit size_t");
}

}  // namespace

dctResult_t iallgatherv(dctComm_t comm, const void* send, size_t sendBytes, void* recv, const size_t* recvBytes,
                        const size_t* recvOffsets, void** request) {
  *request = nullptr;
  const int me = comm->rank;
  char* out = static_cast<char*>(recv);
  size_t end = 0;
  // The layout is agreed: every rank refuses alike.
  if (!checkedExtent(recvBytes, recvOffsets, comm->size, end))
    return fail(comm, dctInvalidArgument, "MPI iallgatherv: a block's offset + bytes does not fit size_t");
  // Too much to send: the block's capacity still goes, so nobody waits.
  const bool over = sendBytes > recvBytes[me];
  if (over) sendBytes = recvBytes[me];
  if (send != out + recvOffsets[me] && sendBytes) std::memcpy(out + recvOffsets[me], send, sendBytes);
  const Side mine = gatherSide(out, &sendBytes, &recvBytes[me], &recvOffsets[me], true, true);
  const Side theirs = gatherSide(out, recvBytes, recvBytes, recvOffsets, false, true);
  std::unique_ptr<MpiRequest> req(new (std::nothrow) MpiRequest());  // null: exchange blocking
  bool blocking = false;
  DCTCHECK(postExchange(comm, mine, theirs, kGatherTag, req.get(), blocking));
  if (blocking) return fail(comm, dctOutOfMemory, "MPI iallgatherv: out of memory");
  *request = req.release();
  return over ? fail(comm, dctInternalError, "MPI iallgatherv: a block exceeds its capacity") : dctSuccess;
}

dctResult_t test(dctComm_t comm, void* request, int* done) {
  *done = 1;
  auto* req = static_cast<MpiRequest*>(request);
  if (req == nullptr) return dctSuccess;
  int flag = 0;
  int err = MPI_Testall(req->count, req->requests.get(), &flag, MPI_STATUSES_IGNORE);
  if (err == MPI_SUCCESS && !flag) {
    *done = 0;
    return dctSuccess;
  }
  if (err != MPI_SUCCESS) drain(req->requests.get(), req->count);  // done means MPI is done with the buffers
  delete req;
  return err == MPI_SUCCESS ? dctSuccess : mpiFail(comm, err, "MPI_Testall");
}

dctResult_t alltoallvLarge(dctComm_t comm, const char* send, const size_t* sendBytes, const size_t* sendOffsets,
                           char* recv, const size_t* recvBytes, const size_t* recvOffsets) {
  MpiRequest req;
  bool blocking = false;
  DCTCHECK(postAlltoallv(comm, send, sendBytes, sendOffsets, recv, recvBytes, recvOffsets, &req, blocking));
  return waitAll(comm, req);
}

// Host buffers only (the all-to-all's pipelined forward). A failure to post
// has still taken part and left nothing posted.
dctResult_t ialltoallv(dctComm_t comm, const void* send, const size_t* sendBytes, const size_t* sendOffsets,
                       void* recv, const size_t* recvBytes, const size_t* recvOffsets, void** request) {
  *request = nullptr;
  std::unique_ptr<MpiRequest> req(new (std::nothrow) MpiRequest());  // null: exchange blocking
  bool blocking = false;
  DCTCHECK(postAlltoallv(comm, static_cast<const char*>(send), sendBytes, sendOffsets, static_cast<char*>(recv),
                         recvBytes, recvOffsets, req.get(), blocking));
  if (!blocking) *request = req.release();
  return dctSuccess;
}

}  // namespace dct::mpi
