// CPU twin of denseCoo: a dense array's nonzeros as COO (split's dense
// ranges when the sparse-input allreduce returns the COO alone). The select
// would read the array, write what it leaves behind into a second one and
// compact through per-worker scratch before copying out: about four times
// the bytes. Here entries are compacted branch-free into a block in cache
// and copied straight to their place. With several workers the array is cut
// in chunks and a read-only pass counts each chunk's entries first, so that
// every chunk knows where its entries go.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu_context.h"

namespace dct {
namespace {

constexpr size_t kBlock = 2048;
constexpr size_t kMaxChunks = 64;

// x as the scale op leaves it, and the select's rule for keeping it.
template <typename T>
struct Keep {
  T factor, tau;
  bool scaled;
  T value(T x) const { return scaled ? x * factor : x; }
  bool operator()(T x) const { return !(std::fabs(x) < tau); }  // NaN too
};

template <typename T>
size_t countKept(const T* in, size_t begin, size_t end, const Keep<T>& keep) {
  size_t m = 0;
  for (size_t i = begin; i < end; i++) m += keep(keep.value(in[i]));
  return m;
}

// [begin, end)'s entries written from index `at` on, at most up to `limit`:
// false (what fit written) where they do not fit.
template <typename T, typename I>
bool writeKept(const T* in, size_t begin, size_t end, const Keep<T>& keep, uint64_t base, I* outIdx, T* outVal,
               size_t& at, size_t limit) {
  I idx[kBlock];
  T val[kBlock];
  for (size_t b = begin; b < end; b += kBlock) {
    const size_t e = std::min(b + kBlock, end);
    size_t m = 0;
    for (size_t i = b; i < e; i++) {  // written whatever the test says, kept by advancing
      const T x = keep.value(in[i]);
      idx[m] = static_cast<I>(base + i);
      val[m] = x;
      m += keep(x);
    }
    if (m > limit - at) return false;
    std::memcpy(outIdx + at, idx, m * sizeof(I));
    std::memcpy(outVal + at, val, m * sizeof(T));
    at += m;
  }
  return true;
}

template <typename T, typename I>
dctResult_t denseCoo(CpuContext* ctx, DenseCooArgs& a) {
  const T* in = static_cast<const T*>(a.in);
  I* outIdx = static_cast<I*>(a.outIndices);
  T* outVal = static_cast<T*>(a.outValues);
  const Keep<T> keep{static_cast<T>(a.factor), static_cast<T>(a.tau), a.factor != 1.0};
  const size_t n = a.n, workers = static_cast<size_t>(ctx->pool.size());
  const size_t chunks = workers < 2 ? 1 : std::clamp<size_t>(n / kMinPerWorker, 1, std::min(kMaxChunks, 4 * workers));
  if (chunks == 1) {  // one pass
    size_t at = 0;
    if (!writeKept(in, 0, n, keep, a.indexBase, outIdx, outVal, at, a.capacity)) return dctInvalidArgument;
    a.nnz = at;
    return dctSuccess;
  }
  auto lo = [&](size_t c) { return n / chunks * c + std::min(c, n % chunks); };
  size_t starts[kMaxChunks + 1] = {};
  ctx->pool.parallelFor(chunks, 1, [&](size_t b, size_t e, int) {
    for (size_t c = b; c < e; c++) starts[c + 1] = countKept(in, lo(c), lo(c + 1), keep);
  });
  for (size_t c = 0; c < chunks; c++) starts[c + 1] += starts[c];
  if (starts[chunks] > a.capacity) return dctInvalidArgument;
  ctx->pool.parallelFor(chunks, 1, [&](size_t b, size_t e, int) {
    for (size_t c = b; c < e; c++) {
      size_t at = starts[c];
      (void)writeKept(in, lo(c), lo(c + 1), keep, a.indexBase, outIdx, outVal, at, starts[c + 1]);  // counted: fits
    }
  });
  a.nnz = starts[chunks];
  return dctSuccess;
}

}  // namespace

dctResult_t cpuDenseCoo(KernelContext* kc, DenseCooArgs* args, void*) {
  CpuContext* ctx = cpuCtx(kc);
  DenseCooArgs& a = *args;
  a.nnz = 0;
  const bool wide = a.indexBytes == 8;
  if (a.indexBytes != 4 && !wide) return dctInvalidArgument;
  if (a.dtype == dctFloat32) return wide ? denseCoo<float, uint64_t>(ctx, a) : denseCoo<float, uint32_t>(ctx, a);
  if (a.dtype == dctFloat64) return wide ? denseCoo<double, uint64_t>(ctx, a) : denseCoo<double, uint32_t>(ctx, a);
  return dctNotSupported;  // sums in an accumulation type
}

}  // namespace dct
