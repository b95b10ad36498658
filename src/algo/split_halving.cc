// Recursive halving for the split plans (split_halving.h): the schedule,
// the blocks' checks and the host merges.
#include "algo/split_halving.h"

#include <algorithm>
#include <cstring>

#include "algo/coo_merge.h"
#include "algo/recursive_doubling.h"
#include "algo/split_allreduce.h"
#include "base/checked_size.h"
#include "base/debug.h"
#include "base/dtype.h"
#include "transport/comm.h"

namespace dct {
namespace {

constexpr const char* kFn = "dctSparseAllreduce";
constexpr uint64_t kDenseForm = UINT64_MAX;
constexpr size_t kHeader = sizeof(uint64_t);
// A block's most bytes beyond its entries' (index + value each): header
// and two paddings (a dense block's values take no more than its entries'
// would: it is dense only from the break-even on).
constexpr size_t kBlockSlack = 24;

size_t pad8(size_t x) { return (x + 7) & ~size_t(7); }

struct View {
  const SplitHalving& h;
  int P, p2, extra;
  size_t acc;
  int ib;
  explicit View(const SplitHalving& s)
      : h(s), P(s.comm->size), p2(rdCoreRanks(s.comm->size)), extra(P - p2), acc(dtypeSize(s.c->accType)),
        ib(s.c->indexBytes) {}
  size_t begin(int q) const { return splitRangeBegin(h.c->count, P, q); }
  size_t length(int q) const { return begin(q + 1) - begin(q); }
  int rangeAt(int pos) const { return h.order[pos]; }
  // The first position of slot s (slots below `extra` hold two ranges).
  int firstPos(int s) const { return s + std::min(s, extra); }
  uint64_t denseFrom(int q) const { return coo::denseFrom(length(q), ib, acc); }
  size_t blockBytes(uint64_t n, int q) const {
    return n == kDenseForm ? kHeader + pad8(length(q) * acc) : kHeader + pad8(n * ib) + pad8(n * acc);
  }
  uint64_t windowLength(int a, int b) const {
    uint64_t n = 0;
    for (int pos = a; pos < b; pos++) n += length(rangeAt(pos));
    return n;
  }
  // The most a partial of at most `entries` over positions [a, b) takes:
  // the caller has checked count x (index + value) + slack x P fits.
  size_t bound(uint64_t entries, int a, int b) const {
    const uint64_t n = std::min(entries, windowLength(a, b));
    return kBlockSlack * static_cast<size_t>(b - a) + static_cast<size_t>(n) * (ib + acc);
  }
  // Entries of the core ranks r with r = j (mod m), at most the count.
  uint64_t group(int j, int m) const {
    uint64_t n = 0;
    for (int r = j % m; r < p2; r += m) n = std::min<uint64_t>(n + h.core[r], h.c->count);
    return n;
  }
};

dctResult_t malformed(const SplitHalving& h, int peer, int q, const char* what) {
  return fail(h.comm, dctInternalError, "%s: malformed partial sum from rank %d (range %d: %s)", kFn, peer, q, what);
}

// The peer's message for positions [a, b) checked block by block: headers,
// lengths, indices inside their ranges and ascending, nothing left over.
dctResult_t check(const View& v, int peer, const char* msg, size_t got, int a, int b) {
  size_t at = 0;
  for (int pos = a; pos < b; pos++) {
    const int q = v.rangeAt(pos);
    if (got - at < kHeader) return malformed(v.h, peer, q, "no header");
    uint64_t n = 0;
    std::memcpy(&n, msg + at, sizeof(n));
    if (n != kDenseForm && (n > v.length(q) || n >= v.denseFrom(q))) return malformed(v.h, peer, q, "entries");
    const size_t bytes = v.blockBytes(n, q);
    if (got - at < bytes) return malformed(v.h, peer, q, "length");
    if (n != kDenseForm) {
      const char* idx = msg + at + kHeader;
      const uint64_t lo = v.begin(q), hi = v.begin(q + 1);
      const bool ok = v.ib == 4 ? coo::validIndices(reinterpret_cast<const uint32_t*>(idx), n, lo, hi)
                                : coo::validIndices(reinterpret_cast<const uint64_t*>(idx), n, lo, hi);
      if (!ok) return malformed(v.h, peer, q, "indices");
    }
    at += bytes;
  }
  return at == got ? dctSuccess : malformed(v.h, peer, v.rangeAt(b - 1), "bytes past the last block");
}

struct Block {
  uint64_t n;  // entries, or kDenseForm
  const char* data;
};
Block blockAt(const char* p) {
  Block b{0, p + kHeader};
  std::memcpy(&b.n, p, sizeof(b.n));
  return b;
}

// Writes range q's sum of `mine` and `theirs` (the lower's values first) at
// `out`; returns its bytes. Both sparse and past the break-even: +0 + a + b
// dense, as recursive doubling makes it.
template <typename I, typename V>
size_t combineBlock(const View& v, int q, Block mine, Block theirs, bool lower, char* out) {
  const size_t len = v.length(q), base = v.begin(q);
  V* dense = reinterpret_cast<V*>(out + kHeader);
  const uint64_t dn = kDenseForm;
  auto idx = [&](const Block& b) { return reinterpret_cast<const I*>(b.data); };
  auto vals = [&](const Block& b) { return reinterpret_cast<const V*>(b.data + pad8(b.n * sizeof(I))); };
  auto values = [&](const Block& b) { return reinterpret_cast<const V*>(b.data); };
  if (mine.n == kDenseForm && theirs.n == kDenseForm) {
    const V* a = values(lower ? mine : theirs);
    const V* b = values(lower ? theirs : mine);
    for (size_t j = 0; j < len; j++) dense[j] = a[j] + b[j];
  } else if (mine.n == kDenseForm || theirs.n == kDenseForm) {
    const Block& d = mine.n == kDenseForm ? mine : theirs;
    const Block& s = mine.n == kDenseForm ? theirs : mine;
    std::memcpy(dense, d.data, len * sizeof(V));
    // The sparse side first where it is the lower's.
    coo::addSparse(dense, idx(s), vals(s), s.n, (&s == &mine) == lower, base);
  } else {
    const Block& a = lower ? mine : theirs;
    const Block& b = lower ? theirs : mine;
    const uint64_t n = coo::mergeSparse<I, V>(idx(a), vals(a), a.n, idx(b), vals(b), b.n, nullptr, nullptr);
    if (n < v.denseFrom(q)) {
      std::memcpy(out, &n, sizeof(n));
      I* oi = reinterpret_cast<I*>(out + kHeader);
      V* ov = reinterpret_cast<V*>(out + kHeader + pad8(n * sizeof(I)));
      coo::mergeSparse(idx(a), vals(a), a.n, idx(b), vals(b), b.n, oi, ov);
      return v.blockBytes(n, q);
    }
    std::memset(dense, 0, len * sizeof(V));
    coo::addSparse(dense, idx(a), vals(a), a.n, false, base);
    coo::addSparse(dense, idx(b), vals(b), b.n, false, base);
  }
  std::memcpy(out, &dn, sizeof(dn));
  return v.blockBytes(kDenseForm, q);
}

// The kept positions of cur merged with the peer's message (null: the peer
// failed, nothing from it) into spare; cur and spare swap.
void merge(SplitHalving& h, const View& v, const HvRound& r, const char* theirs, int mineA) {
  static const uint64_t kEmpty = 0;
  const char* mine = h.cur;
  for (int pos = mineA; pos < r.keepA; pos++) mine += v.blockBytes(blockAt(mine).n, v.rangeAt(pos));
  char* out = h.spare;
  coo::withTypes(v.ib, h.c->accType, [&](auto i, auto val) {
    using I = decltype(i);
    using V = decltype(val);
    for (int pos = r.keepA; pos < r.keepB; pos++) {
      const int q = v.rangeAt(pos);
      const Block m = blockAt(mine);
      const Block t = theirs ? blockAt(theirs) : Block{0, reinterpret_cast<const char*>(&kEmpty)};
      out += combineBlock<I, V>(v, q, m, t, r.lower, out);
      mine += v.blockBytes(m.n, q);
      if (theirs) theirs += v.blockBytes(t.n, q);
    }
    return 0;
  });
  std::swap(h.cur, h.spare);
  h.holdA = r.keepA;
  h.holdB = r.keepB;
}

// Range q's block written into its place in the target from +0.
void writeRange(const SplitHalving& h, const View& v, int q, const char* block, void* target, uint64_t& inflow) {
  const Block b = blockAt(block);
  const size_t len = v.length(q);
  char* range = static_cast<char*>(target) + v.begin(q) * v.acc;
  if (b.n == kDenseForm) {
    std::memcpy(range, b.data, len * v.acc);
    inflow = len;
    return;
  }
  std::memset(range, 0, len * v.acc);
  inflow = b.n;
  coo::withTypes(v.ib, h.c->accType, [&](auto i, auto val) {
    using I = decltype(i);
    using V = decltype(val);
    coo::addSparse(reinterpret_cast<V*>(range), reinterpret_cast<const I*>(b.data),
                   reinterpret_cast<const V*>(b.data + pad8(b.n * sizeof(I))), b.n, false, v.begin(q));
    return 0;
  });
}

// This rank's exchanges: fold in, the rounds, fold out.
void schedule(SplitHalving& h, const View& v, const uint64_t* nnz) {
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
size_t partialRoom(const SplitHalving& h, const View& v, const uint64_t* nnz) {
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
  const dctResult_t res = b.reserve(bytes);
  if (res == dctOutOfMemory)
    return fail(h.comm, res, "%s: out of memory for %s (%zu bytes, count %zu)", kFn, what, bytes, h.c->count);
  return res;
}

// The selection (indices msg.indices, values already in accType at `vals`)
// as blocks over every range in slot order at h.cur.
template <typename I, typename V>
void firstPartial(SplitHalving& h, const View& v, const I* idx, const V* vals, size_t nnz) {
  std::vector<uint64_t>& at = h.cut;  // reserved by the caller: P + 1
  for (int q = 0; q <= v.P; q++) {
    const uint64_t key = v.begin(q);
    at[q] = static_cast<uint64_t>(
        std::lower_bound(idx, idx + nnz, key, [](I x, uint64_t k) { return static_cast<uint64_t>(x) < k; }) - idx);
  }
  char* out = h.cur;
  for (int pos = 0; pos < v.P; pos++) {
    const int q = v.rangeAt(pos);
    const uint64_t n = at[q + 1] - at[q];
    Block b{n, reinterpret_cast<const char*>(idx + at[q])};
    if (n < v.denseFrom(q)) {
      std::memcpy(out, &n, sizeof(n));
      std::memcpy(out + kHeader, idx + at[q], n * sizeof(I));
      std::memcpy(out + kHeader + pad8(n * sizeof(I)), vals + at[q], n * sizeof(V));
    } else {  // +0 + each value: the dense form's start
      const uint64_t dn = kDenseForm;
      std::memcpy(out, &dn, sizeof(dn));
      V* dense = reinterpret_cast<V*>(out + kHeader);
      std::memset(dense, 0, v.length(q) * sizeof(V));
      coo::addSparse(dense, reinterpret_cast<const I*>(b.data), vals + at[q], n, false, v.begin(q));
      b.n = kDenseForm;
    }
    out += v.blockBytes(b.n, q);
  }
  h.holdA = 0;
  h.holdB = v.P;
}

}  // namespace

bool splitHalvingAvailable(dctCompressor_t c, dctComm_t comm) { return recursiveDoublingAvailable(c, comm); }

dctResult_t halvingPrepare(SplitHalving& h, const uint64_t* nnz, const Message& msg, void* stream) {
  dctCompressor_t c = h.c;
  dctComm_t comm = h.comm;
  const View v(h);
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
  coo::withTypes(v.ib, c->accType, [&](auto i, auto val) {
    using I = decltype(i);
    using V = decltype(val);
    firstPartial<I, V>(h, v, static_cast<const I*>(msg.indices), reinterpret_cast<const V*>(h.in), msg.nnz);
    return 0;
  });
  DCTCHECK(reserve(h, c->selection, room, "the merged partial sum"));
  h.spare = c->selection.as<char>();
  return dctSuccess;
}

dctResult_t halvingExchange(SplitHalving& h, void* target, uint64_t& inflow, size_t& sent, size_t& received,
                            void* stream) {
  (void)stream;
  const View v(h);
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
      msg = h.cur;
      for (int pos = h.holdA; pos < r.giveA; pos++) msg += v.blockBytes(blockAt(msg).n, v.rangeAt(pos));
      const char* end = msg;
      for (int pos = r.giveA; pos < r.giveB; pos++) end += v.blockBytes(blockAt(end).n, v.rangeAt(pos));
      bytes = static_cast<size_t>(end - msg);
    }
    size_t got = 0;
    const dctResult_t op = t->sendrecv(h.comm, r.peer, msg, bytes, r.receives ? h.in : nullptr, r.recvCap, &got,
                                       r.maxBytes);
    sent += bytes;
    received += got;
    if (res == dctSuccess) res = op;
    if (res != dctSuccess || !r.receives) continue;
    if (got > 0) res = check(v, r.peer, h.in, got, r.keepA, r.keepB);
    if (res != dctSuccess) continue;
    if (r.adopt) {  // nothing from a peer that failed: an empty range, never read uninitialised
      static const uint64_t kEmpty = 0;
      writeRange(h, v, me, got > 0 ? h.in : reinterpret_cast<const char*>(&kEmpty), target, inflow);
      return dctSuccess;
    }
    merge(h, v, r, got > 0 ? h.in : nullptr, h.holdA);
  }
  if (res != dctSuccess || me >= v.p2) return res;
  writeRange(h, v, me, h.cur, target, inflow);  // range me leads its slot
  return dctSuccess;
}

}  // namespace dct
