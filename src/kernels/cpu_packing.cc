// CPU twin of delta bit-packing (index_packing.h): pack an ascending index
// list, and scatter-add a message whose indices arrive packed. Groups are
// independent, so workers take contiguous runs of groups.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

#include "kernels/cpu_context.h"
#include "kernels/cpu_fixed_width.h"
#include "kernels/index_packing.h"

namespace dct {
namespace {

using packing::kPackGroup;
using packing::Layout;
using packing::Sections;

// Groups per worker below which threading costs more than it saves.
constexpr size_t kMinGroupsPerWorker = kMinPerWorker / kPackGroup / 4;

template <typename I>
dctResult_t packList(KernelContext* kc, PackArgs& a) {
  CpuContext* ctx = cpuCtx(kc);
  const I* idx = static_cast<const I*>(a.indices);
  const Layout l(a.nnz, sizeof(I));
  Sections<I> s(a.out, l);
  std::memset(a.out, 0, l.data);  // padding included: the bytes are deterministic
  ctx->pool.parallelFor(l.groups, kMinGroupsPerWorker, [&](size_t b, size_t e, int) {
    for (size_t g = b; g < e; g++) {
      const I* first = idx + g * kPackGroup;
      const size_t count = packing::groupSize(a.nnz, g);
      const int width = packing::groupWidth(first, count);
      s.bases[g] = static_cast<I>(first[0] - a.base);
      s.widths[g] = static_cast<uint8_t>(width);
      s.offsets[g + 1] = static_cast<uint32_t>(packing::groupWords(count, width));
    }
  });
  for (size_t g = 0; g < l.groups; g++) s.offsets[g + 1] += s.offsets[g];
  ctx->pool.parallelFor(l.groups, kMinGroupsPerWorker, [&](size_t b, size_t e, int) {
    for (size_t g = b; g < e; g++)
      packing::packGroup(idx + g * kPackGroup, packing::groupSize(a.nnz, g), s.widths[g], s.data + s.offsets[g]);
  });
  a.bytes = l.bytes(s.offsets[l.groups]);
  return dctSuccess;
}

template <typename I>
bool validList(CpuContext* ctx, const void* list, size_t packedBytes, size_t nnz, uint64_t n) {
  const Layout l(nnz, sizeof(I));
  if (nnz == 0) return true;
  if (!packing::validSize(l, packedBytes)) return false;
  Sections<I> s(const_cast<void*>(list), l);
  const size_t words = (packedBytes - l.data) / 8;
  std::atomic<size_t> malformed{0};
  ctx->pool.parallelFor(l.groups, kMinGroupsPerWorker, [&](size_t b, size_t e, int) {
    size_t bad = 0;
    for (size_t g = b; g < e; g++) bad += !packing::validGroupFast<I>(s, g, l.groups, nnz, n, words);
    if (bad) malformed.fetch_add(bad, std::memory_order_relaxed);
  });
  return malformed.load() == 0;
}

template <typename T, typename V, typename I>
dctResult_t scatterPacked(KernelContext* kc, const ScatterArgs& a) {
  CpuContext* ctx = cpuCtx(kc);
  if (a.nnz == 0) return dctSuccess;
  // The whole list is checked before anything is written, with the rule the
  // CUDA twin uses, so a malformed message fails the same way on every rank
  // and twin instead of being half added.
  if (!validList<I>(ctx, a.indices, a.packedBytes, a.nnz, a.n)) return dctInternalError;
  const Layout l(a.nnz, sizeof(I));
  Sections<I> s(const_cast<void*>(a.indices), l);
  T* dense = static_cast<T*>(a.dense);
  const V* values = static_cast<const V*>(a.values);
  // Valid groups cover disjoint ascending index ranges: workers never share
  // a target. Each group is decoded whole first, then scattered in a tight
  // loop: the random dense accesses then overlap as in plain scatter-add
  // (decoding inside that loop measured 3-5x slower).
  ctx->pool.parallelFor(l.groups, kMinGroupsPerWorker, [&](size_t b, size_t e, int) {
    I local[kPackGroup];
    for (size_t g = b; g < e; g++) {
      const size_t count = packing::groupSize(a.nnz, g);
      packing::unpackGroup<I>(s, g, a.nnz, a.n, local);
      const V* val = values + g * kPackGroup;
      for (size_t j = 0; j < count; j++) addInto(dense[local[j]], val[j]);
    }
  });
  return dctSuccess;
}

}  // namespace

dctResult_t cpuPackIndices(KernelContext* kc, PackArgs* args, void*) {
  CpuContext* ctx = cpuCtx(kc);
  PackArgs& a = *args;
  a.bytes = 0;
  if (a.nnz == 0) return dctSuccess;
  if (!packing::fitsOffsets(a.nnz, a.indexBytes)) return dctNotSupported;
  return a.indexBytes == 8 ? packList<uint64_t>(ctx, a) : packList<uint32_t>(ctx, a);
}

bool cpuValidPackedList(KernelContext* kc, const void* list, size_t packedBytes, size_t nnz, int indexBytes,
                        uint64_t n) {
  CpuContext* ctx = cpuCtx(kc);
  return indexBytes == 8 ? validList<uint64_t>(ctx, list, packedBytes, nnz, n)
                         : validList<uint32_t>(ctx, list, packedBytes, nnz, n);
}

template <typename I>
void lowerBoundsOf(const BoundsArgs& a) {
  const I* idx = static_cast<const I*>(a.indices);
  // Compared as uint64: keys past the index type's range lie above every entry.
  for (size_t j = 0; j < a.count; j++)
    a.positions[j] = static_cast<uint64_t>(
        std::lower_bound(idx, idx + a.nnz, a.keys[j], [](I x, uint64_t key) { return x < key; }) - idx);
}

dctResult_t cpuLowerBounds(KernelContext*, const BoundsArgs* args, void*) {
  if (args->indexBytes == 8) lowerBoundsOf<uint64_t>(*args);
  else lowerBoundsOf<uint32_t>(*args);
  return dctSuccess;
}

dctResult_t cpuScatterAddPacked(KernelContext* kc, const ScatterArgs* args, void*) {
  CpuContext* ctx = cpuCtx(kc);
  const ScatterArgs& a = *args;
  dctResult_t res = dctSuccess;
  dctResult_t dispatched = dispatchScatter(a, [&]<typename T, typename V, typename I>() {
    res = scatterPacked<T, V, I>(ctx, a);
  });
  return dispatched != dctSuccess ? dispatched : res;
}

}  // namespace dct
