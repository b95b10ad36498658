// CPU twin of the DES row-block ops (kernels.h, "DES rows"). Workers split
// a block by flag words (32 rows each), so no two write the same word; a
// flagged row's place in `packed` is the popcount of the flags before it,
// from a prefix over the words.
#include <algorithm>
#include <bit>
#include <cstring>
#include <type_traits>
#include <vector>

#include "base/dtype.h"
#include "kernels/cpu_context.h"

namespace dct {
namespace {

// The unsigned integer as wide as T, its sign bit, and its exponent field.
template <typename T>
struct Bits {
  using U = std::conditional_t<sizeof(T) == 8, uint64_t, std::conditional_t<sizeof(T) == 4, uint32_t, uint16_t>>;
  static constexpr U sign = U(1) << (8 * sizeof(T) - 1);
  static constexpr U exponent = std::is_same_v<T, double> ? U(0x7ff0000000000000ull)
                                : std::is_same_v<T, float> ? U(0x7f800000u)
                                : std::is_same_v<T, Half>  ? U(0x7c00u)
                                                           : U(0x7f80u);
};

// Words per worker chunk: enough rows to be worth a thread.
size_t minWordsPerWorker(size_t rowLength) {
  return std::max<size_t>(1, kMinPerWorker / 32 / std::max<size_t>(1, rowLength));
}

bool flagged(const uint32_t* flags, size_t r) { return flags == nullptr || ((flags[r / 32] >> (r % 32)) & 1u); }

// prefix[w] = flagged rows before word w (W + 1 entries).
std::vector<uint64_t> wordPrefix(const uint32_t* flags, size_t rows) {
  const size_t W = maskWords(rows);
  std::vector<uint64_t> prefix(W + 1, 0);
  for (size_t w = 0; w < W; w++) prefix[w + 1] = prefix[w] + (flags ? std::popcount(flags[w]) : std::min<size_t>(32, rows - w * 32));
  return prefix;
}

uint64_t packedRow(const uint32_t* flags, const std::vector<uint64_t>& prefix, size_t r) {
  if (flags == nullptr) return r;
  return prefix[r / 32] + std::popcount(flags[r / 32] & ((1u << (r % 32)) - 1u));
}

// fn(r, at) for every flagged row r of words [wb, we), `at` its packed row.
template <typename Fn>
void forFlagged(const RowBlockArgs& a, const std::vector<uint64_t>& prefix, size_t wb, size_t we, Fn&& fn) {
  for (size_t r = wb * 32; r < std::min(we * 32, a.rowCount); r++)
    if (flagged(a.flags, r)) fn(r, packedRow(a.flags, prefix, r));
}

}  // namespace

dctResult_t cpuRowFlags(KernelContext* kc, RowBlockArgs* args, void*) {
  CpuContext* ctx = cpuCtx(kc);
  RowBlockArgs& a = *args;
  const size_t D = a.rowLength, W = maskWords(a.rowCount);
  std::vector<uint64_t> count(ctx->pool.size(), 0), nonFinite(ctx->pool.size(), 0);
  dctResult_t res = dispatchAnyValue(a.dtype, [&]<typename T>() {
    using U = typename Bits<T>::U;
    const U* rows = static_cast<const U*>(a.rows);
    ctx->pool.parallelFor(W, minWordsPerWorker(D), [&](size_t wb, size_t we, int worker) {
      for (size_t w = wb; w < we; w++) {
        uint32_t word = 0;
        for (size_t r = w * 32; r < std::min(w * 32 + 32, a.rowCount); r++) {
          U any = 0;
          uint64_t nf = 0;
          for (size_t j = 0; j < D; j++) {
            const U x = rows[r * D + j];
            any |= x & U(~Bits<T>::sign);
            nf += (x & Bits<T>::exponent) == Bits<T>::exponent;
          }
          if (any == 0) continue;
          word |= 1u << (r % 32);
          count[worker]++;
          nonFinite[worker] += nf;
        }
        a.flags[w] = word;
      }
    });
  });
  a.count = a.nonFinite = 0;
  for (size_t i = 0; i < count.size(); i++) a.count += count[i], a.nonFinite += nonFinite[i];
  return res;
}

dctResult_t cpuRowGather(KernelContext* kc, const RowBlockArgs* args, void*) {
  CpuContext* ctx = cpuCtx(kc);
  const RowBlockArgs& a = *args;
  const size_t rowBytes = a.rowLength * dtypeSize(a.dtype);
  const auto prefix = wordPrefix(a.flags, a.rowCount);
  const char* in = static_cast<const char*>(a.rows);
  char* out = static_cast<char*>(a.packed);
  ctx->pool.parallelFor(maskWords(a.rowCount), minWordsPerWorker(a.rowLength), [&](size_t wb, size_t we, int) {
    forFlagged(a, prefix, wb, we, [&](size_t r, uint64_t at) { std::memcpy(out + at * rowBytes, in + r * rowBytes, rowBytes); });
  });
  return dctSuccess;
}

dctResult_t cpuRowScatter(KernelContext* kc, const RowBlockArgs* args, void*) {
  CpuContext* ctx = cpuCtx(kc);
  const RowBlockArgs& a = *args;
  const size_t rowBytes = a.rowLength * dtypeSize(a.dtype);
  const auto prefix = wordPrefix(a.flags, a.rowCount);
  const char* in = static_cast<const char*>(a.packed);
  char* out = static_cast<char*>(a.rows);
  ctx->pool.parallelFor(maskWords(a.rowCount), minWordsPerWorker(a.rowLength), [&](size_t wb, size_t we, int) {
    for (size_t r = wb * 32; r < std::min(we * 32, a.rowCount); r++) {
      if (!flagged(a.flags, r)) {
        std::memset(out + r * rowBytes, 0, rowBytes);
        continue;
      }
      const uint64_t at = a.denseSource ? r : packedRow(a.flags, prefix, r);
      std::memcpy(out + r * rowBytes, in + at * rowBytes, rowBytes);
    }
  });
  return dctSuccess;
}

dctResult_t cpuRowAccumulate(KernelContext* kc, const RowBlockArgs* args, void*) {
  CpuContext* ctx = cpuCtx(kc);
  const RowBlockArgs& a = *args;
  if (a.accType != accumulationType(a.dtype)) return dctNotSupported;
  const auto prefix = wordPrefix(a.flags, a.rowCount);
  if (a.flags) {
    const size_t W = maskWords(a.rowCount);
    const bool tailClear = a.rowCount % 32 == 0 || (a.flags[W - 1] >> (a.rowCount % 32)) == 0;
    if (!tailClear || prefix[W] != a.count) return dctInternalError;
  }
  const size_t D = a.rowLength;
  return dispatchAnyValue(a.dtype, [&]<typename T>() {
    using Acc = typename Value<T>::Acc;
    Acc* acc = static_cast<Acc*>(a.rows);
    const T* in = static_cast<const T*>(a.packed);
    ctx->pool.parallelFor(maskWords(a.rowCount), minWordsPerWorker(D), [&](size_t wb, size_t we, int) {
      forFlagged(a, prefix, wb, we, [&](size_t r, uint64_t at) {
        for (size_t j = 0; j < D; j++) acc[r * D + j] += Value<T>::load(in[at * D + j]);
      });
    });
  });
}

}  // namespace dct
