// Recursive doubling (recursive_doubling.h): the schedule, the messages'
// checks and the host merges.
#include "algo/recursive_doubling.h"

#include "algo/coo_merge.h"

#include <cstring>

#include "base/checked_size.h"
#include "base/debug.h"
#include "base/dtype.h"
#include "transport/comm.h"

namespace dct {
namespace {

using coo::addSparse;
using coo::mergeSparse;
using coo::withTypes;

constexpr uint64_t kDenseForm = UINT64_MAX;
constexpr size_t kHeader = sizeof(uint64_t);

// A message of n sparse entries: header, indices padded to 8, values.
bool sparseBytes(uint64_t n, int indexBytes, size_t accBytes, size_t& out) {
  size_t nn = 0, idx = 0, vals = 0;
  if (!toSize(n, nn) || !checkedMulAdd(nn, static_cast<size_t>(indexBytes), kHeader + 7, idx) ||
      !checkedMul(nn, accBytes, vals))
    return false;
  return checkedAdd(idx & ~size_t(7), vals, out);
}

size_t valuesAt(uint64_t n, int indexBytes) { return (kHeader + n * indexBytes + 7) & ~size_t(7); }

// The most a partial sum of at most b entries takes as a message.
bool messageRoom(const RecursiveDoubling& rd, uint64_t b, size_t& out) {
  const size_t acc = dtypeSize(rd.c->accType);
  if (b < rd.switchNnz) return sparseBytes(b, rd.c->indexBytes, acc, out);
  size_t sparse = 0, dense = 0;
  if (!sparseBytes(rd.switchNnz - 1, rd.c->indexBytes, acc, sparse) || !checkedAdd(rd.denseBytes, kHeader, dense))
    return false;
  out = sparse > dense ? sparse : dense;
  return true;
}

// Entries of core ranks [first, first + len) together, at most count.
uint64_t blockBound(const RecursiveDoubling& rd, int first, int len) {
  uint64_t b = 0;
  for (int j = first; j < first + len; j++) b += rd.core[j];  // agreed counts: their sum fits
  return b < rd.count ? b : rd.count;
}

struct Sparse {
  uint64_t n;
  const char* idx;
  const char* vals;
};
Sparse sparseAt(const char* msg, uint64_t n, int indexBytes) { return {n, msg + kHeader, msg + valuesAt(n, indexBytes)}; }

// +0 + each entry into zeros: the dense form of a sparse partial sum.
void densify(RecursiveDoubling& rd, const Sparse& s) {
  std::memset(rd.sum, 0, rd.denseBytes);
  withTypes(rd.c->indexBytes, rd.c->accType, [&](auto i, auto v) {
    using I = decltype(i);
    using V = decltype(v);
    addSparse(reinterpret_cast<V*>(rd.sum), reinterpret_cast<const I*>(s.idx), reinterpret_cast<const V*>(s.vals),
              s.n, false);
    return 0;
  });
  rd.dense = true;
}

dctResult_t malformed(const RecursiveDoubling& rd, int peer, const char* what) {
  return fail(rd.comm, dctInternalError, "%s: malformed partial sum from rank %d (%s)", rd.fn, peer, what);
}

// The peer's message checked: *dense, or its entries in `theirs`.
dctResult_t parse(const RecursiveDoubling& rd, const RdRound& r, const char* msg, size_t got, bool& dense, Sparse& theirs) {
  if (got < kHeader) return malformed(rd, r.peer, "no header");
  uint64_t h = 0;
  std::memcpy(&h, msg, sizeof(h));
  dense = h == kDenseForm;
  if (dense) return got == kHeader + rd.denseBytes ? dctSuccess : malformed(rd, r.peer, "dense length");
  size_t bytes = 0;
  if (h > r.bound || h >= rd.switchNnz || !sparseBytes(h, rd.c->indexBytes, dtypeSize(rd.c->accType), bytes) ||
      bytes != got)
    return malformed(rd, r.peer, "entries and length");
  theirs = sparseAt(msg, h, rd.c->indexBytes);
  const bool ok = rd.c->indexBytes == 4 ? coo::validIndices(reinterpret_cast<const uint32_t*>(theirs.idx), h, 0, rd.count)
                                        : coo::validIndices(reinterpret_cast<const uint64_t*>(theirs.idx), h, 0, rd.count);
  return ok ? dctSuccess : malformed(rd, r.peer, "indices");
}

// This rank's partial sum with the peer's, the lower block's first; dense
// once the union reaches the break-even.
dctResult_t combine(RecursiveDoubling& rd, const RdRound& r, const char* msg, size_t got) {
  bool theirsDense = false;
  Sparse theirs{};
  DCTCHECK(parse(rd, r, msg, got, theirsDense, theirs));
  const int ib = rd.c->indexBytes;
  const Sparse mine = sparseAt(rd.cur, rd.nnz, ib);  // while this rank's is sparse
  withTypes(ib, rd.c->accType, [&](auto i, auto v) {
    using I = decltype(i);
    using V = decltype(v);
    V* sum = reinterpret_cast<V*>(rd.sum);
    const V* dense = reinterpret_cast<const V*>(msg + kHeader);
    auto idx = [](const Sparse& s) { return reinterpret_cast<const I*>(s.idx); };
    auto vals = [](const Sparse& s) { return reinterpret_cast<const V*>(s.vals); };
    if (rd.dense && theirsDense) {
      if (r.lower)
        for (size_t j = 0; j < rd.count; j++) sum[j] = sum[j] + dense[j];
      else
        for (size_t j = 0; j < rd.count; j++) sum[j] = dense[j] + sum[j];
    } else if (rd.dense) {
      addSparse(sum, idx(theirs), vals(theirs), theirs.n, !r.lower);
    } else if (theirsDense) {
      std::memcpy(sum, dense, rd.denseBytes);
      addSparse(sum, idx(mine), vals(mine), mine.n, r.lower);
      rd.dense = true;
    } else {
      const Sparse& a = r.lower ? mine : theirs;
      const Sparse& b = r.lower ? theirs : mine;
      const uint64_t n = mergeSparse<I, V>(idx(a), vals(a), a.n, idx(b), vals(b), b.n, nullptr, nullptr);
      if (n >= rd.switchNnz) {  // +0 + a + b: what the sparse form's end makes of a + b
        densify(rd, a);
        addSparse(sum, idx(b), vals(b), b.n, false);
      } else {
        std::memcpy(rd.spare, &n, sizeof(n));
        const Sparse out = sparseAt(rd.spare, n, ib);
        mergeSparse(idx(a), vals(a), a.n, idx(b), vals(b), b.n, const_cast<I*>(idx(out)), const_cast<V*>(vals(out)));
        std::swap(rd.cur, rd.spare);
        rd.nnz = n;
      }
    }
    return 0;
  });
  return dctSuccess;
}

// Fold out: the peer's message is the result.
dctResult_t adopt(RecursiveDoubling& rd, const RdRound& r, const char* msg, size_t got) {
  bool theirsDense = false;
  Sparse theirs{};
  DCTCHECK(parse(rd, r, msg, got, theirsDense, theirs));
  if (!theirsDense) {
    densify(rd, theirs);
    return dctSuccess;
  }
  std::memcpy(rd.sum, msg + kHeader, rd.denseBytes);
  rd.dense = true;
  return dctSuccess;
}

dctResult_t reserve(const RecursiveDoubling& rd, TwinBuffer& b, size_t bytes, const char* what) {
  return reserveFor(b, bytes, rd.comm, rd.fn, what, rd.count);
}

// This rank's exchanges: fold in, the rounds, fold out.
dctResult_t schedule(RecursiveDoubling& rd, const uint64_t* nnz) {
  const int P = rd.comm->size, p2 = rdCoreRanks(P), extra = P - p2, me = rd.comm->rank;
  rd.rounds.clear();
  auto room = [&](uint64_t b, size_t& out) {
    if (messageRoom(rd, b, out)) return dctSuccess;
    return fail(rd.comm, dctInvalidArgument, "%s: a partial sum of %llu entries needs more than size_t holds", rd.fn,
                static_cast<unsigned long long>(b));
  };
  const uint64_t all = blockBound(rd, 0, p2);
  if (me >= p2) {
    RdRound in, out;
    in.peer = out.peer = me - p2;
    in.sends = true;
    DCTCHECK(room(nnz[me], in.maxBytes));
    out.receives = out.adopt = true;
    out.bound = all;
    DCTCHECK(room(all, out.recvCap));
    out.maxBytes = out.recvCap;
    rd.rounds = {in, out};
    return dctSuccess;
  }
  if (me < extra) {
    RdRound in;
    in.peer = me + p2;
    in.receives = in.lower = true;
    in.bound = nnz[me + p2];
    DCTCHECK(room(in.bound, in.recvCap));
    in.maxBytes = in.recvCap;
    rd.rounds.push_back(in);
  }
  for (int len = 1; len < p2; len <<= 1) {
    RdRound r;
    r.peer = me ^ len;
    r.sends = r.receives = true;
    r.lower = me < r.peer;
    r.bound = blockBound(rd, r.peer & ~(len - 1), len);
    size_t mine = 0;
    DCTCHECK(room(blockBound(rd, me & ~(len - 1), len), mine));
    DCTCHECK(room(r.bound, r.recvCap));
    r.maxBytes = mine > r.recvCap ? mine : r.recvCap;
    rd.rounds.push_back(r);
  }
  if (me < extra) {
    RdRound out;
    out.peer = me + p2;
    out.sends = true;
    DCTCHECK(room(all, out.maxBytes));
    rd.rounds.push_back(out);
  }
  return dctSuccess;
}

}  // namespace

bool recursiveDoublingAvailable(dctCompressor_t c, dctComm_t comm) {
  const Transport* t = comm->transport;
  return !c->ops->device && t->sendrecv != nullptr && t->hostBuffers;
}

int rdCoreRanks(int ranks) {
  int p2 = 1;
  while (p2 * 2 <= ranks) p2 *= 2;
  return p2;
}

dctResult_t rdPrepare(RecursiveDoubling& rd, const uint64_t* nnz, const void* indices, const void* values,
                      size_t inNnz, dctDataType_t dtype, void* stream) {
  dctCompressor_t c = rd.c;
  dctComm_t comm = rd.comm;
  const size_t acc = dtypeSize(c->accType);
  const int ib = c->indexBytes, P = comm->size, p2 = rdCoreRanks(P), me = comm->rank;
  if (!checkedMul(rd.count, acc, rd.denseBytes))
    return fail(comm, dctInvalidArgument, "%s: count %zu is too large for its sum", rd.fn, rd.count);
  // Dense from n entries on: n (index + value) >= count value bytes.
  const unsigned __int128 per = ib + acc;
  rd.switchNnz = static_cast<uint64_t>((static_cast<unsigned __int128>(rd.count) * acc + per - 1) / per);
  rd.core.assign(p2, 0);
  for (int j = 0; j < p2; j++) rd.core[j] = nnz[j] + (j + p2 < P ? nnz[j + p2] : 0);
  DCTCHECK(schedule(rd, nnz));
  const uint64_t held = me >= p2 ? nnz[me] : blockBound(rd, 0, p2);
  if (!sparseBytes(held < rd.switchNnz ? held : rd.switchNnz - 1, ib, acc, rd.partialRoom))
    return fail(comm, dctInvalidArgument, "%s: the partial sums need more than size_t holds", rd.fn);
  rd.recvRoom = kHeader;
  for (const RdRound& r : rd.rounds)
    if (r.receives && r.recvCap > rd.recvRoom) rd.recvRoom = r.recvCap;
  DCTCHECK(reserve(rd, c->wire, rd.partialRoom, "the partial sum"));
  DCTCHECK(reserve(rd, c->nodeSum, rd.partialRoom, "the merged partial sum"));
  DCTCHECK(reserve(rd, c->gathered, rd.recvRoom, "the received partial sum"));
  DCTCHECK(comm->transport->prepare(comm, c->gathered.as(), rd.recvRoom, stream));
  rd.cur = c->wire.as<char>();
  rd.spare = c->nodeSum.as<char>();
  rd.dense = false;
  rd.nnz = 0;
  // This rank's input as its first partial sum (exact: the accumulation
  // type holds every value of the datatype).
  if (inNnz >= rd.switchNnz) {
    DCTCHECK(c->ops->zero(c->kernels, rd.sum, rd.denseBytes, stream));
    ScatterArgs scatter{rd.sum, rd.count, c->accType, ib, indices, values, inNnz, true, 0, dtype};
    DCTCHECK(c->ops->scatterAdd(c->kernels, &scatter, stream));
    rd.dense = true;
    return dctSuccess;
  }
  rd.nnz = inNnz;
  std::memcpy(rd.cur, &rd.nnz, sizeof(rd.nnz));
  if (inNnz == 0) return dctSuccess;
  DCTCHECK(c->ops->copy(c->kernels, rd.cur + kHeader, indices, inNnz * ib, stream));
  return c->ops->convert(c->kernels, rd.cur + valuesAt(inNnz, ib), c->accType, values, dtype, inNnz, 1.0, stream);
}

dctResult_t rdExchange(RecursiveDoubling& rd, size_t& sent, size_t& received, void* stream) {
  static const uint64_t kEmpty = 0;  // what a rank that failed sends on
  dctCompressor_t c = rd.c;
  const Transport* t = rd.comm->transport;
  const size_t acc = dtypeSize(c->accType);
  char* in = c->gathered.as<char>();
  dctResult_t res = c->ops->synchronize(c->kernels, stream);  // the input's copies, before the host reads them
  sent = received = 0;
  for (const RdRound& r : rd.rounds) {
    const void* msg = nullptr;
    size_t bytes = 0;
    if (r.sends && res != dctSuccess) {
      msg = &kEmpty;
      bytes = kHeader;
    } else if (r.sends && rd.dense) {
      std::memcpy(rd.sum - kHeader, &kDenseForm, kHeader);
      msg = rd.sum - kHeader;
      bytes = kHeader + rd.denseBytes;
    } else if (r.sends) {
      msg = rd.cur;
      bytes = sparseBytes(rd.nnz, c->indexBytes, acc, bytes) ? bytes : 0;  // bounded in rdPrepare
    }
    size_t got = 0;
    const dctResult_t op = t->sendrecv(rd.comm, r.peer, msg, bytes, r.receives ? in : nullptr, r.recvCap, &got,
                                       r.maxBytes);
    sent += bytes;
    received += got;
    if (res == dctSuccess) res = op;
    if (res == dctSuccess && r.receives) res = r.adopt ? adopt(rd, r, in, got) : combine(rd, r, in, got);
  }
  if (res == dctSuccess && !rd.dense && !rd.keepSparse) densify(rd, sparseAt(rd.cur, rd.nnz, c->indexBytes));
  return res;
}

RdSparse rdSparseResult(const RecursiveDoubling& rd) {
  const Sparse s = sparseAt(rd.cur, rd.nnz, rd.c->indexBytes);
  return {s.n, s.idx, s.vals};
}

}  // namespace dct
