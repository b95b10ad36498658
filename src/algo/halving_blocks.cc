// Recursive halving's blocks (halving_blocks.h): checks and host merges.
#include "algo/halving_blocks.h"

#include <cstring>
#include <vector>

#include "base/debug.h"

namespace dct {
namespace {

constexpr const char* kFn = "dctSparseAllreduce";
constexpr size_t kHeader = sizeof(uint64_t);

size_t pad8(size_t x) { return (x + 7) & ~size_t(7); }

dctResult_t malformed(const SplitHalving& h, int peer, int q, const char* what) {
  return fail(h.comm, dctInternalError, "%s: malformed partial sum from rank %d (range %d: %s)", kFn, peer, q, what);
}

struct Block {
  uint64_t n;  // entries, or kHalvingDense
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
size_t combineBlock(const HvView& v, int q, Block mine, Block theirs, bool lower, char* out) {
  const size_t len = v.length(q), base = v.begin(q);
  V* dense = reinterpret_cast<V*>(out + kHeader);
  const uint64_t dn = kHalvingDense;
  auto idx = [&](const Block& b) { return reinterpret_cast<const I*>(b.data); };
  auto vals = [&](const Block& b) { return reinterpret_cast<const V*>(b.data + pad8(b.n * sizeof(I))); };
  auto values = [&](const Block& b) { return reinterpret_cast<const V*>(b.data); };
  if (mine.n == kHalvingDense && theirs.n == kHalvingDense) {
    const V* a = values(lower ? mine : theirs);
    const V* b = values(lower ? theirs : mine);
    for (size_t j = 0; j < len; j++) dense[j] = a[j] + b[j];
  } else if (mine.n == kHalvingDense || theirs.n == kHalvingDense) {
    const Block& d = mine.n == kHalvingDense ? mine : theirs;
    const Block& s = mine.n == kHalvingDense ? theirs : mine;
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
  return v.blockBytes(kHalvingDense, q);
}

template <typename I, typename V>
void layOut(SplitHalving& h, const HvView& v, const I* idx, const V* vals, size_t nnz) {
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
      const uint64_t dn = kHalvingDense;
      std::memcpy(out, &dn, sizeof(dn));
      V* dense = reinterpret_cast<V*>(out + kHeader);
      std::memset(dense, 0, v.length(q) * sizeof(V));
      coo::addSparse(dense, reinterpret_cast<const I*>(b.data), vals + at[q], n, false, v.begin(q));
      b.n = kHalvingDense;
    }
    out += v.blockBytes(b.n, q);
  }
  h.holdA = 0;
  h.holdB = v.P;
}


}  // namespace

dctResult_t checkBlocks(const HvView& v, int peer, const char* msg, size_t got, int a, int b) {
  size_t at = 0;
  for (int pos = a; pos < b; pos++) {
    const int q = v.rangeAt(pos);
    if (got - at < kHeader) return malformed(v.h, peer, q, "no header");
    uint64_t n = 0;
    std::memcpy(&n, msg + at, sizeof(n));
    if (n != kHalvingDense && (n > v.length(q) || n >= v.denseFrom(q))) return malformed(v.h, peer, q, "entries");
    const size_t bytes = v.blockBytes(n, q);
    if (got - at < bytes) return malformed(v.h, peer, q, "length");
    if (n != kHalvingDense) {
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

void mergeBlocks(SplitHalving& h, const HvView& v, const HvRound& r, const char* theirs) {
  static const uint64_t kEmpty = 0;
  const char* mine = h.cur + blocksBytes(v, h.cur, h.holdA, r.keepA);
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

void writeBlock(const HvView& v, int q, const char* block, void* target, uint64_t& inflow) {
  const Block b = blockAt(block);
  const size_t len = v.length(q);
  char* range = static_cast<char*>(target) + v.begin(q) * v.acc;
  if (b.n == kHalvingDense) {
    std::memcpy(range, b.data, len * v.acc);
    inflow = len;
    return;
  }
  std::memset(range, 0, len * v.acc);
  inflow = b.n;
  coo::withTypes(v.ib, v.h.c->accType, [&](auto i, auto val) {
    using I = decltype(i);
    using V = decltype(val);
    coo::addSparse(reinterpret_cast<V*>(range), reinterpret_cast<const I*>(b.data),
                   reinterpret_cast<const V*>(b.data + pad8(b.n * sizeof(I))), b.n, false, v.begin(q));
    return 0;
  });
}

size_t blocksBytes(const HvView& v, const char* p, int from, int to) {
  const char* at = p;
  for (int pos = from; pos < to; pos++) at += v.blockBytes(blockAt(at).n, v.rangeAt(pos));
  return static_cast<size_t>(at - p);
}

void firstPartial(SplitHalving& h, const HvView& v, const void* indices, const void* values, size_t nnz) {
  coo::withTypes(v.ib, h.c->accType, [&](auto i, auto val) {
    using I = decltype(i);
    using V = decltype(val);
    layOut<I, V>(h, v, static_cast<const I*>(indices), static_cast<const V*>(values), nnz);
    return 0;
  });
}

}  // namespace dct
