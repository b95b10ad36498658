// Split's plain range form (split_plain.h).
#include "algo/split_plain.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "algo/coo_merge.h"
#include "core/compressor.h"

namespace dct {

size_t plainFormBytes(uint64_t nnz, int indexBytes, size_t sumBytes) {
  return alignedIndexBytes(nnz, indexBytes) + nnz * sumBytes;
}

void compactPlainForm(void* coo, size_t valuesAt, uint64_t nnz, int indexBytes, size_t sumBytes) {
  char* bytes = static_cast<char*>(coo);
  const size_t at = alignedIndexBytes(nnz, indexBytes);
  if (at != valuesAt) std::memmove(bytes + at, bytes + valuesAt, nnz * sumBytes);
}

bool writePlainRange(const void* form, uint64_t nnz, uint64_t length, int indexBytes, dctDataType_t acc,
                     void* range) {
  return coo::withTypes(indexBytes, acc, [&](auto i, auto v) {
    using I = decltype(i);
    using V = decltype(v);
    const I* idx = static_cast<const I*>(form);
    const V* val = reinterpret_cast<const V*>(static_cast<const char*>(form) + alignedIndexBytes(nnz, indexBytes));
    if (!coo::validIndices(idx, nnz, 0, length)) return false;
    if (range == nullptr) return true;
    V* dense = static_cast<V*>(range);
    std::fill(dense, dense + length, V(0));
    coo::addSparse(dense, idx, val, nnz, false);
    return true;
  });
}

bool listPlainRange(const void* form, uint64_t nnz, uint64_t length, uint64_t base, int indexBytes,
                    dctDataType_t acc, double factor, double tau, void* outIndices, void* outValues, size_t& kept) {
  kept = 0;
  return coo::withTypes(indexBytes, acc, [&](auto i, auto v) {
    using I = decltype(i);
    using V = decltype(v);
    const I* idx = static_cast<const I*>(form);
    const V* val = reinterpret_cast<const V*>(static_cast<const char*>(form) + alignedIndexBytes(nnz, indexBytes));
    I* outIdx = static_cast<I*>(outIndices);
    V* outVal = static_cast<V*>(outValues);
    const V f = static_cast<V>(factor), t = static_cast<V>(tau);
    // Checked as it goes: one bad index fails the range, and the counts of
    // what was written are dropped. An index at or past `length` or not
    // above its predecessor is caught by `next`, the least index allowed.
    uint64_t next = 0;
    bool ok = true;
    size_t n = 0;
    for (uint64_t j = 0; j < nnz; j++) {
      const uint64_t at = idx[j];
      ok &= at >= next && at < length;
      next = at + 1;
      V x = V(0) + val[j];
      if (factor != 1.0) x *= f;
      outIdx[n] = static_cast<I>(base + at);  // n <= j: inside the caller's room for nnz entries
      outVal[n] = x;
      n += !(std::fabs(x) < t);  // NaN stays
    }
    if (!ok) return false;
    kept = n;
    return true;
  });
}

}  // namespace dct
