// CPU twin of the DCT-MP row kernels (kernels.h, "DCT-MP rows"): entry
// offsets and the wire form of rows in both directions (values in the wire
// type, row_args.h); the selection is cpu_row_select.cc. Rows are
// independent, so workers split them freely and the result does not depend
// on the split.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu_context.h"
#include "kernels/row_keys.h"
#include "kernels/row_wire.h"

namespace dct {
namespace {

// Rows per worker chunk: below this, threads cost more than they save.
size_t minRowsPerWorker(size_t rowLength) { return std::max<size_t>(1, kMinPerWorker / 4 / std::max<size_t>(1, rowLength)); }

// fn(j) for every kept column j of a row's mask, ascending.
template <typename Fn>
void forEachKept(const uint32_t* words, size_t d, Fn&& fn) {
  for (size_t w = 0; w < maskWords(d); w++)
    for (uint32_t bits = words[w]; bits; bits &= bits - 1) fn(w * 32 + std::countr_zero(bits));
}

// A value between a row's type and its wire type; its own type moves the
// bits unchanged.
template <typename To, typename From>
To wireValue(From x) {
  if constexpr (std::is_same_v<To, From>) return x;
  else return convertValue<To>(x);
}

// Decodes row r's wire mask into mask words; false if malformed.
bool decodeRow(const RowWireArgs& a, size_t r, uint32_t* words) {
  const size_t d = a.rowLength, count = a.offsets[r + 1] - a.offsets[r], at = a.offsets[r] - a.base;
  std::fill(words, words + maskWords(d), 0u);
  if (a.maskFormat == 0) {
    const uint8_t* bytes = static_cast<const uint8_t*>(a.wireMask) + r * bitmapBytes(d);
    size_t bits = 0;
    for (size_t b = 0; b < bitmapBytes(d); b++) {
      words[b / 4] |= static_cast<uint32_t>(bytes[b]) << (8 * (b % 4));
      bits += std::popcount(bytes[b]);
    }
    const bool tailClear = d % 8 == 0 || (bytes[d / 8] >> (d % 8)) == 0;
    return tailClear && bits == count;
  }
  uint64_t previous = 0;
  for (size_t m = 0; m < count; m++) {
    const uint64_t j = readWidth(a.wireMask, at + m, a.maskFormat);
    if (j >= d || (m > 0 && j <= previous)) return false;
    words[j / 32] |= 1u << (j % 32);
    previous = j;
  }
  return true;
}

}  // namespace

dctResult_t cpuRowOffsets(KernelContext*, RowOffsetsArgs* args, void*) {
  RowOffsetsArgs& a = *args;
  uint64_t sum = 0;
  for (size_t r = 0; r < a.rowCount; r++) {
    a.offsets[r] = sum;
    sum += a.counts ? readWidth(a.counts, r, a.countBytes) : a.fixedCount;
  }
  a.offsets[a.rowCount] = sum;
  a.total = sum;
  return dctSuccess;
}

dctResult_t cpuRowPack(KernelContext* kc, const RowWireArgs* args, void*) {
  CpuContext* ctx = cpuCtx(kc);
  const RowWireArgs& a = *args;
  const size_t d = a.rowLength;
  return dispatchNarrowing(a.dtype, a.valueT(), [&]<typename T, typename W>() {
    const T* rows = static_cast<const T*>(a.rows);
    W* values = static_cast<W*>(a.values);
    ctx->pool.parallelFor(a.rowCount, minRowsPerWorker(d), [&](size_t b, size_t e, int) {
      for (size_t r = b; r < e; r++) {
        const size_t at = a.offsets[r] - a.base;
        if (a.wireCounts) writeWidth(a.wireCounts, r, a.countBytes, static_cast<uint32_t>(a.offsets[r + 1] - a.offsets[r]));
        if (a.mask == nullptr) {
          if constexpr (std::is_same_v<T, W>) std::memcpy(values + at, rows + r * d, d * sizeof(T));
          else std::transform(rows + r * d, rows + (r + 1) * d, values + at, wireValue<W, T>);
          continue;
        }
        const uint32_t* words = a.mask + r * maskWords(d);
        if (a.maskFormat == 0)
          std::memcpy(static_cast<uint8_t*>(a.wireMask) + r * bitmapBytes(d), words, bitmapBytes(d));
        size_t m = 0;
        forEachKept(words, d, [&](size_t j) {
          if (a.maskFormat > 0) writeWidth(a.wireMask, at + m, a.maskFormat, static_cast<uint32_t>(j));
          values[at + m++] = wireValue<W>(rows[r * d + j]);
        });
      }
    });
  });
}

dctResult_t cpuRowUnpack(KernelContext* kc, const RowWireArgs* args, void*) {
  CpuContext* ctx = cpuCtx(kc);
  const RowWireArgs& a = *args;
  const size_t d = a.rowLength;
  if (a.maskFormat >= 0) {  // decode and validate every row before writing any
    std::vector<char> bad(ctx->pool.size(), 0);
    ctx->pool.parallelFor(a.rowCount, minRowsPerWorker(d), [&](size_t b, size_t e, int w) {
      for (size_t r = b; r < e; r++)
        if (!decodeRow(a, r, a.mask + r * maskWords(d))) bad[w] = 1;
    });
    if (std::find(bad.begin(), bad.end(), 1) != bad.end()) return dctInternalError;
  }
  return dispatchNarrowing(a.dtype, a.valueT(), [&]<typename T, typename W>() {
    T* rows = static_cast<T*>(a.rows);
    const W* values = static_cast<const W*>(a.values);
    ctx->pool.parallelFor(a.rowCount, minRowsPerWorker(d), [&](size_t b, size_t e, int) {
      for (size_t r = b; r < e; r++) {
        const size_t at = a.offsets[r] - a.base;
        T* row = rows + r * d;
        if (a.mask == nullptr) {
          if constexpr (std::is_same_v<T, W>) std::memcpy(row, values + at, d * sizeof(T));
          else std::transform(values + at, values + at + d, row, wireValue<T, W>);
          continue;
        }
        const uint32_t* words = a.mask + r * maskWords(d);
        std::fill(row, row + d, T{});  // +0 in every type
        size_t m = 0;
        forEachKept(words, d, [&](size_t j) { row[j] = wireValue<T>(values[at + m++]); });
      }
    });
  });
}

}  // namespace dct
