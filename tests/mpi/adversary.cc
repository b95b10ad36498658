#include "adversary.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

namespace dcttest::adversary {
namespace {

using Bytes = std::vector<unsigned char>;

// Values a corrupted size or count takes: off by one, doubled, zero, at the
// int and size_t limits, or random.
uint64_t badValue(uint64_t old, std::mt19937_64& rng) {
  const uint64_t table[] = {0, 1, old + 1, old - 1, old * 2, old + 8, old ^ (uint64_t(1) << (rng() % 64)),
                            0x7fffffffu, 0x80000000u, 0xffffffffu, uint64_t(1) << 32, uint64_t(1) << 40,
                            uint64_t(1) << 62, uint64_t(1) << 63, UINT64_MAX, UINT64_MAX - 7, rng()};
  return table[rng() % (sizeof(table) / sizeof(table[0]))];
}

// Damages b (a copy of what this rank sends) as the attack says; `resize`:
// the op lets a rank send another length than the receivers expect.
std::string corrupt(Bytes& b, const Attack& a, bool resize) {
  std::mt19937_64 rng(a.bits);
  Kind kind = a.kind;
  if (!resize && kind == Kind::ShortSend) kind = Kind::Truncate;
  if (!resize && kind == Kind::ExtraSend) kind = Kind::Insert;
  const size_t n = b.size();
  if (kind == Kind::ExtraSend) {
    const size_t extra = 1 + rng() % 64;
    for (size_t i = 0; i < extra; i++) b.push_back(static_cast<unsigned char>(rng()));
    return "extra " + std::to_string(extra) + " bytes after " + std::to_string(n);
  }
  if (n == 0) return "empty send";
  const size_t off = a.offset % n;
  const std::string at = " at " + std::to_string(off) + " of " + std::to_string(n);
  switch (kind) {
    case Kind::BitFlips: {
      const int flips = 1 + static_cast<int>(rng() % 3);
      b[off] ^= static_cast<unsigned char>(1u << (rng() % 8));
      for (int i = 1; i < flips; i++) b[rng() % n] ^= static_cast<unsigned char>(1u << (rng() % 8));
      return std::to_string(flips) + " bit flips" + at;
    }
    case Kind::Word64:
      if (n >= 8) {
        const size_t w = std::min(off & ~size_t(7), n - 8);
        uint64_t v;
        std::memcpy(&v, &b[w], 8);
        const uint64_t bad = a.exact ? a.value : badValue(v, rng);
        std::memcpy(&b[w], &bad, 8);
        return "u64 " + std::to_string(v) + " -> " + std::to_string(bad) + " at " + std::to_string(w);
      }
      [[fallthrough]];
    case Kind::Word32:
      if (n >= 4) {
        const size_t w = std::min(off & ~size_t(3), n - 4);
        uint32_t v;
        std::memcpy(&v, &b[w], 4);
        const auto bad = static_cast<uint32_t>(a.exact ? a.value : badValue(v, rng));
        std::memcpy(&b[w], &bad, 4);
        return "u32 " + std::to_string(v) + " -> " + std::to_string(bad) + " at " + std::to_string(w);
      }
      b[off] = static_cast<unsigned char>(rng());
      return "byte" + at;
    case Kind::RandomBlock: {
      const size_t len = 1 + rng() % std::min<size_t>(n - off, rng() % 2 ? 16 : 4096);
      for (size_t i = 0; i < len; i++) b[off + i] = static_cast<unsigned char>(rng());
      return std::to_string(len) + " random bytes" + at;
    }
    case Kind::Truncate:
      std::fill(b.begin() + off, b.end(), 0);
      return "zeros from" + at;
    case Kind::Insert: {
      const size_t k = std::min<size_t>(1 + rng() % 16, n - off);
      std::memmove(&b[off + k], &b[off], n - off - k);
      for (size_t i = 0; i < k; i++) b[off + i] = static_cast<unsigned char>(rng());
      return std::to_string(k) + " bytes inserted" + at;
    }
    case Kind::SwapWords: {
      const size_t w = off & ~size_t(3), v = w + 4 * (1 + rng() % 8);
      if (v + 4 > n) {
        b[off] ^= 0x80;
        return "top bit" + at;
      }
      for (int i = 0; i < 4; i++) std::swap(b[w + i], b[v + i]);
      return "words " + std::to_string(w) + " and " + std::to_string(v) + " swapped";
    }
    case Kind::ShortSend:
      b.resize(off);
      return "only " + std::to_string(off) + " of " + std::to_string(n) + " bytes sent";
    case Kind::WholeRandom:
      for (unsigned char& c : b) c = static_cast<unsigned char>(rng());
      return "all " + std::to_string(n) + " bytes random";
    default:
      return "none";
  }
}

Adversary* self(void* ctx) { return static_cast<Adversary*>(ctx); }

// Whether this op is the one to damage (counts the op).
bool strikes(Adversary* a) {
  const long op = a->ops_++;
  return a->attack.rank == a->rank && a->attack.op == op;
}

void damage(Adversary* a, Bytes& b, bool resize, const char* what) {
  a->fired_ = true;
  a->note_ = std::string(what) + ": " + corrupt(b, a->attack, resize);
}

bool fitsInt(uint64_t v) { return v <= 0x7fffffffu; }

// recv block of `want` bytes from `got` actual bytes: the rest zero; more
// than wanted fails this receiver (after taking part), as MPI would.
int deliver(unsigned char* to, size_t want, const unsigned char* from, size_t got) {
  if (want == 0) return got > 0 ? 3 : 0;
  if (got > 0) std::memcpy(to, from, std::min(want, got));
  if (got < want) std::memset(to + got, 0, want - got);
  return got > want ? 3 : 0;
}

int cbAllgather(const void* send, void* recv, size_t bytes, void* ctx, void*) {
  Adversary* a = self(ctx);
  Bytes b(static_cast<const unsigned char*>(send), static_cast<const unsigned char*>(send) + bytes);
  if (strikes(a)) damage(a, b, false, "allgather");
  if (!fitsInt(bytes)) return 4;
  return MPI_Allgather(b.data(), static_cast<int>(bytes), MPI_BYTE, recv, static_cast<int>(bytes), MPI_BYTE, a->mpi)
             ? 1 : 0;
}

int cbAllgatherv(const void* send, size_t sendBytes, void* recv, const size_t* recvBytes, const size_t* recvOffsets,
                 void* ctx, void*) {
  Adversary* a = self(ctx);
  const int P = a->size;
  Bytes b(static_cast<const unsigned char*>(send), static_cast<const unsigned char*>(send) + sendBytes);
  if (strikes(a)) damage(a, b, true, "allgatherv");
  uint64_t mine = b.size();
  std::vector<uint64_t> actual(P);
  if (MPI_Allgather(&mine, 1, MPI_UINT64_T, actual.data(), 1, MPI_UINT64_T, a->mpi)) return 1;
  std::vector<int> counts(P), displs(P);
  uint64_t total = 0;
  for (int r = 0; r < P; r++) {
    if (!fitsInt(actual[r]) || !fitsInt(total)) return 4;  // the same on every rank
    counts[r] = static_cast<int>(actual[r]);
    displs[r] = static_cast<int>(total);
    total += actual[r];
  }
  Bytes all(total + 1);
  if (MPI_Allgatherv(b.data(), counts[a->rank], MPI_BYTE, all.data(), counts.data(), displs.data(), MPI_BYTE, a->mpi))
    return 1;
  int res = 0;
  for (int r = 0; r < P; r++)
    res |= deliver(static_cast<unsigned char*>(recv) + recvOffsets[r], recvBytes[r], all.data() + displs[r],
                   actual[r]);
  return res;
}

int cbAlltoallv(const void* send, const size_t* sendBytes, const size_t* sendOffsets, void* recv,
                const size_t* recvBytes, const size_t* recvOffsets, void* ctx, void*) {
  Adversary* a = self(ctx);
  const int P = a->size;
  std::vector<Bytes> blocks(P);
  for (int q = 0; q < P; q++) {
    const auto* from = static_cast<const unsigned char*>(send) + (sendBytes[q] ? sendOffsets[q] : 0);
    blocks[q].assign(from, from + sendBytes[q]);
  }
  if (strikes(a)) {
    // The block to one peer: the first non-empty one from a seeded start.
    const int start = static_cast<int>(a->attack.bits % static_cast<uint64_t>(P));
    int q = start;
    for (int i = 0; i < P; i++)
      if (!blocks[(start + i) % P].empty()) {
        q = (start + i) % P;
        break;
      }
    damage(a, blocks[q], true, ("alltoallv to rank " + std::to_string(q)).c_str());
  }
  std::vector<uint64_t> sendActual(P), recvActual(P);
  for (int q = 0; q < P; q++) sendActual[q] = blocks[q].size();
  if (MPI_Alltoall(sendActual.data(), 1, MPI_UINT64_T, recvActual.data(), 1, MPI_UINT64_T, a->mpi)) return 1;
  std::vector<int> sc(P), sd(P), rc(P), rd(P);
  uint64_t st = 0, rt = 0;
  bool fits = true;
  for (int q = 0; q < P; q++) {
    fits = fits && fitsInt(sendActual[q]) && fitsInt(recvActual[q]) && fitsInt(st) && fitsInt(rt);
    sc[q] = static_cast<int>(sendActual[q]);
    sd[q] = static_cast<int>(st);
    rc[q] = static_cast<int>(recvActual[q]);
    rd[q] = static_cast<int>(rt);
    st += sendActual[q];
    rt += recvActual[q];
  }
  // Sizes past int: every rank still takes part (with nothing), then fails.
  int bad = fits ? 0 : 1, anyBad = 0;
  if (MPI_Allreduce(&bad, &anyBad, 1, MPI_INT, MPI_MAX, a->mpi)) return 1;
  if (anyBad) return 4;
  Bytes out(st + 1), in(rt + 1);
  for (int q = 0; q < P; q++)
    if (!blocks[q].empty()) std::memcpy(out.data() + sd[q], blocks[q].data(), blocks[q].size());
  if (MPI_Alltoallv(out.data(), sc.data(), sd.data(), MPI_BYTE, in.data(), rc.data(), rd.data(), MPI_BYTE, a->mpi))
    return 1;
  int res = 0;
  for (int q = 0; q < P; q++)
    res |= deliver(static_cast<unsigned char*>(recv) + (recvBytes[q] ? recvOffsets[q] : 0), recvBytes[q],
                   in.data() + rd[q], recvActual[q]);
  return res;
}

int cbAllreduceSum(const void* send, void* recv, size_t count, dctDataType_t type, void* ctx, void*) {
  Adversary* a = self(ctx);
  const bool f64 = type == dctFloat64;
  const size_t bytes = count * (f64 ? 8 : 4);
  Bytes b(static_cast<const unsigned char*>(send), static_cast<const unsigned char*>(send) + bytes);
  if (strikes(a)) damage(a, b, false, "allreduceSum");
  if (type != dctFloat32 && !f64) return 5;  // the fuzz runs fp32 and fp64 tensors only
  if (!fitsInt(count)) return 4;
  return MPI_Allreduce(b.data(), recv, static_cast<int>(count), f64 ? MPI_DOUBLE : MPI_FLOAT, MPI_SUM, a->mpi) ? 1
                                                                                                                : 0;
}

// The trusted channel: never corrupted, not counted among the data ops.
int cbVoteMax(int32_t mine, int32_t* max, void* ctx) {
  return MPI_Allreduce(&mine, max, 1, MPI_INT32_T, MPI_MAX, self(ctx)->mpi) ? 1 : 0;
}

}  // namespace

const char* kindName(Kind k) {
  static const char* names[] = {"bitflips", "word64",    "word32",    "randomblock", "truncate",
                                "insert",   "swapwords", "shortsend", "extrasend",   "wholerandom"};
  const int i = static_cast<int>(k);
  return i >= 0 && i < static_cast<int>(Kind::kCount) ? names[i] : "?";
}

Adversary::Adversary() {
  MPI_Comm_dup(MPI_COMM_WORLD, &mpi);
  MPI_Comm_set_errhandler(mpi, MPI_ERRORS_RETURN);
  MPI_Comm_rank(mpi, &rank);
  MPI_Comm_size(mpi, &size);
  dctCallbacks_t cb = DCT_CALLBACKS_INITIALIZER;
  cb.rank = rank;
  cb.nranks = size;
  cb.context = this;
  cb.allgather = cbAllgather;
  cb.allgatherv = cbAllgatherv;
  cb.alltoallv = cbAlltoallv;
  cb.allreduceSum = cbAllreduceSum;
  cb.voteMax = cbVoteMax;
  REQUIRE(dctCommInitCallbacks(&cb, &comm_) == dctSuccess);
}

Adversary::~Adversary() {
  dctCommDestroy(comm_);
  MPI_Comm_free(&mpi);
}

void Adversary::arm(const Attack& a) {
  attack = a;
  ops_ = 0;
  fired_ = false;
  note_.clear();
}

}  // namespace dcttest::adversary
