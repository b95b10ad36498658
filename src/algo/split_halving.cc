// Recursive halving for the split plans (split_halving.h): the schedule,
// its bounds and buffers, and the rounds (the blocks: halving_blocks.h).
#include "algo/split_halving.h"

#include <algorithm>
#include <cstring>

#include "algo/halving_blocks.h"
#include "base/checked_size.h"
#include "base/debug.h"
#include "base/dtype.h"
#include "transport/comm.h"

namespace dct {
namespace {

constexpr const char* kFn = "dctSparseAllreduce";
constexpr size_t kHeader = sizeof(uint64_t);

// This rank's exchanges: fold in, the rounds, fold out.
void schedule(SplitHalving& h, const HvView& v, const uint64_t* nnz) {
  const int me = h.comm->rank, P = v.P, p2 = v.p2;
  uint64_t all = 0;
  for (int r = 0; r < P; r++) all = std::min<uint64_t>(all + nnz[r], h.c->count);
  h.rounds.clear();
  if (me >= p2) {
    const int pos = v.firstPos(me - p2) + 1;
    HvRound in, out;
    in.peer = out.peer = me - p2;
    in.sends = true;
    in.giveA = 0, in.giveB = P;
    in.maxBytes = v.bound(nnz[me], 0, P);
    out.receives = out.adopt = true;
    out.keepA = pos, out.keepB = pos + 1;
    out.recvCap = out.maxBytes = v.bound(all, pos, pos + 1);
    h.rounds = {in, out};
    return;
  }
  if (me < v.extra) {
    HvRound in;
    in.peer = me + p2;
    in.receives = in.lower = true;
    in.keepA = 0, in.keepB = P;
    in.recvCap = in.maxBytes = v.bound(nnz[me + p2], 0, P);
    h.rounds.push_back(in);
  }
  for (int d = p2 / 2; d >= 1; d /= 2) {
    HvRound r;
    r.peer = me ^ d;
    r.sends = r.receives = true;
    r.lower = me < r.peer;
    const int w = me & ~(2 * d - 1), keep = r.lower ? w : w + d, give = r.lower ? w + d : w;
    r.keepA = v.firstPos(keep), r.keepB = v.firstPos(keep + d);
    r.giveA = v.firstPos(give), r.giveB = v.firstPos(give + d);
    const size_t mine = v.bound(v.group(me, 2 * d), r.giveA, r.giveB);
    r.recvCap = v.bound(v.group(r.peer, 2 * d), r.keepA, r.keepB);
    r.maxBytes = std::max(mine, r.recvCap);
    h.rounds.push_back(r);
  }
  if (me < v.extra) {
    const int pos = v.firstPos(me) + 1;
    HvRound out;
    out.peer = me + p2;
    out.sends = true;
    out.giveA = pos, out.giveB = pos + 1;
    out.maxBytes = v.bound(all, pos, pos + 1);
    h.rounds.push_back(out);
  }
}

// The partial room this rank needs: its own selection, then each partial
// it holds after a merge.
size_t partialRoom(const SplitHalving& h, const HvView& v, const uint64_t* nnz) {
  const int me = h.comm->rank;
  size_t room = v.bound(nnz[me], 0, v.P);
  if (me >= v.p2) return room;
  if (me < v.extra) room = std::max(room, v.bound(h.core[me], 0, v.P));
  for (const HvRound& r : h.rounds)
    if (r.sends && r.receives) {
      const int d = r.peer ^ me;
      room = std::max(room, v.bound(v.group(me, d), r.keepA, r.keepB));
    }
  return room;
}

dctResult_t reserve(const SplitHalving& h, TwinBuffer& b, size_t bytes, const char* what) {
  return reserveFor(b, bytes, h.comm, kFn, what, h.c->count);
}

}  // namespace

bool splitHalvingAvailable(dctCompressor_t c, dctComm_t comm) { return recursiveDoublingAvailable(c, comm); }

dctResult_t halvingPrepare(SplitHalving& h, const uint64_t* nnz, const Message& msg, void* stream) {
  dctCompressor_t c = h.c;
  dctComm_t comm = h.comm;
  const HvView v(h);
  const int P = v.P, p2 = v.p2;
  // Every bound is at most count x (index + value) + slack per range.
  size_t entryBytes = 0, slack = 0, most = 0;
  if (!checkedMul(c->count, static_cast<size_t>(v.ib) + v.acc, entryBytes) ||
      !checkedMul(kBlockSlack, static_cast<size_t>(P), slack) || !checkedAdd(entryBytes, slack, most))
    return fail(comm, dctInvalidArgument, "%s: count %zu is too large for its partial sums", kFn, c->count);
  h.order.clear();
  for (int s = 0; s < p2; s++) {
    h.order.push_back(s);
    if (s < v.extra) h.order.push_back(s + p2);
  }
  h.core.assign(p2, 0);
  for (int j = 0; j < p2; j++) h.core[j] = std::min<uint64_t>(nnz[j] + (j + p2 < P ? nnz[j + p2] : 0), c->count);
  h.cut.assign(P + 1, 0);
  schedule(h, v, nnz);
  const size_t room = partialRoom(h, v, nnz);
  size_t recvRoom = kHeader;
  for (const HvRound& r : h.rounds) recvRoom = std::max(recvRoom, r.recvCap);
  // The selection's values in the accumulation type (exact: it holds every
  // wire value) go through c->gathered until the first partial is laid out
  // in c->wire; then c->selection, free once read, is the spare partial.
  // (c->nodeSum and c->staged may hold a hierarchical step's input and
  // target.)
  const size_t scratch = std::max(recvRoom, msg.nnz * v.acc);
  DCTCHECK(reserve(h, c->wire, room, "the partial sum"));
  DCTCHECK(reserve(h, c->gathered, scratch, "the received partial sum"));
  DCTCHECK(comm->transport->prepare(comm, c->gathered.as(), scratch, stream));
  h.cur = c->wire.as<char>();
  h.in = c->gathered.as<char>();
  if (msg.nnz) DCTCHECK(c->ops->convert(c->kernels, h.in, c->accType, msg.values, c->wireType, msg.nnz, 1.0, stream));
  DCTCHECK(c->ops->synchronize(c->kernels, stream));
  firstPartial(h, v, msg.indices, h.in, msg.nnz);
  DCTCHECK(reserve(h, c->selection, room, "the merged partial sum"));
  h.spare = c->selection.as<char>();
  return dctSuccess;
}

dctResult_t halvingExchange(SplitHalving& h, void* target, uint64_t& inflow, size_t& sent, size_t& received,
                            void* stream) {
  (void)stream;
  const HvView v(h);
  const Transport* t = h.comm->transport;
  const int me = h.comm->rank;
  dctResult_t res = dctSuccess;
  sent = received = 0;
  inflow = 0;
  for (const HvRound& r : h.rounds) {
    static const char kNothing = 0;
    const char* msg = r.sends ? &kNothing : nullptr;  // null: no send at all
    size_t bytes = 0;
    if (r.sends && res == dctSuccess) {  // a rank that failed sends 0 bytes
      msg = h.cur + blocksBytes(v, h.cur, h.holdA, r.giveA);
      bytes = blocksBytes(v, msg, r.giveA, r.giveB);
    }
    size_t got = 0;
    const dctResult_t op = t->sendrecv(h.comm, r.peer, msg, bytes, r.receives ? h.in : nullptr, r.recvCap, &got,
                                       r.maxBytes);
    sent += bytes;
    received += got;
    if (res == dctSuccess) res = op;
    if (res != dctSuccess || !r.receives) continue;
    if (got > 0) res = checkBlocks(v, r.peer, h.in, got, r.keepA, r.keepB);
    if (res != dctSuccess) continue;
    if (r.adopt) {  // nothing from a peer that failed: an empty range, never read uninitialised
      static const uint64_t kEmpty = 0;
      writeBlock(v, me, got > 0 ? h.in : reinterpret_cast<const char*>(&kEmpty), target, inflow);
      return dctSuccess;
    }
    mergeBlocks(h, v, r, got > 0 ? h.in : nullptr);
  }
  if (res != dctSuccess || me >= v.p2) return res;
  writeBlock(v, me, h.cur, target, inflow);  // range me leads its slot
  return dctSuccess;
}

}  // namespace dct
