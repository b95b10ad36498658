// CPU twin of the 1-bit kernels (onebit_kernels.h): compress (two passes:
// x, signs and the fixed-order sum of squares; then the error update with
// the scale), the server's average, and the final decode. Built with
// -ffp-contract=off (src/CMakeLists.txt) so no square is fused into an add.
#include <cmath>

#include "kernels/cpu_context.h"
#include "kernels/onebit_kernels.h"
#include "kernels/onebit_math.h"

namespace dct {
namespace {

constexpr size_t kGroup = 1024;  // elements per level-1 partial (32 words)
constexpr size_t kMinGroupsPerWorker = kMinPerWorker / kGroup;

// Calls fn.template operator()<T, A>() for the tensor type T and its
// accumulation type A.
template <typename Fn>
dctResult_t dispatchOnebit(dctDataType_t dtype, Fn&& fn) {
  return dispatchAnyValue(dtype, [&]<typename T>() { fn.template operator()<T, typename Value<T>::Acc>(); });
}

// Group g: x, error (= x for now), sign words and the group's partial.
template <typename T, typename A>
double compressGroup(const T* in, const A* errIn, A* errOut, uint32_t* signs, size_t n, size_t g) {
  const size_t words = onebitWords(n);
  double wordSums[32];
  for (size_t k = 0; k < 32; k++) {
    const size_t w = g * 32 + k;
    wordSums[k] = 0.0;
    if (w >= words) continue;
    double squares[32];
    uint32_t bits = 0;
    const size_t base = w * 32, m = n - base < 32 ? n - base : 32;
    for (size_t l = 0; l < m; l++) {
      const A x = onebitInput(in, errIn, base + l);
      errOut[base + l] = x;
      bits |= onebitBit(x) << l;
      squares[l] = onebitSquare(x);
    }
    for (size_t l = m; l < 32; l++) squares[l] = 0.0;
    signs[w] = bits;
    wordSums[k] = onebitTree32(squares);
  }
  return onebitTree32(wordSums);
}

// Levels 2 and up, in place: entry g of a level is read only by group g/32
// of it, so writing g after reading group g's inputs is safe in g order.
double reduceLevels(double* partials, size_t count) {
  while (count > 1) {
    const size_t groups = (count + 31) / 32;
    for (size_t g = 0; g < groups; g++) {
      double t[32];
      for (size_t k = 0; k < 32; k++) t[k] = g * 32 + k < count ? partials[g * 32 + k] : 0.0;
      partials[g] = onebitTree32(t);
    }
    count = groups;
  }
  return count ? partials[0] : 0.0;
}

}  // namespace

dctResult_t cpuOnebitCompress(KernelContext* kc, OnebitCompressArgs* args, void*) {
  CpuContext* ctx = cpuCtx(kc);
  OnebitCompressArgs& a = *args;
  return dispatchOnebit(a.dtype, [&]<typename T, typename A>() {
    const T* in = static_cast<const T*>(a.input);
    const A* errIn = static_cast<const A*>(a.errorIn);
    A* errOut = static_cast<A*>(a.errorOut);
    const size_t groups = (onebitWords(a.n) + 31) / 32;
    ctx->pool.parallelFor(groups, kMinGroupsPerWorker, [&](size_t b, size_t e, int) {
      for (size_t g = b; g < e; g++) a.scratch[g] = compressGroup(in, errIn, errOut, a.signs, a.n, g);
    });
    a.sumOfSquares = reduceLevels(a.scratch, groups);
    a.scaleValue = onebitScale(a.sumOfSquares, a.n, Value<A>::type);
    const A scale = static_cast<A>(a.scaleValue);
    *static_cast<A*>(a.scale) = scale;
    if (std::isnan(a.scaleValue)) return;  // the step outputs NaN and commits nothing
    ctx->pool.parallelFor(a.n, kMinPerWorker, [&](size_t b, size_t e, int) {
      for (size_t i = b; i < e; i++) errOut[i] = onebitError(errOut[i], scale);
    });
  });
}

dctResult_t cpuOnebitAverage(KernelContext* kc, const OnebitAverageArgs* args, void*) {
  CpuContext* ctx = cpuCtx(kc);
  const OnebitAverageArgs& a = *args;
  if (a.ranks < 1) return dctInternalError;
  return dispatchOnebit(a.dtype, [&]<typename T, typename A>() {
    const A* scales = static_cast<const A*>(a.scales);
    const A* errIn = static_cast<const A*>(a.errorIn);
    A* out = static_cast<A*>(a.out);
    ctx->pool.parallelFor(a.n, kMinPerWorker, [&](size_t b, size_t e, int) {
      for (size_t i = b; i < e; i++) out[i] = onebitMean(a.signs, a.strideWords, scales, a.ranks, i) + errIn[i];
    });
  });
}

dctResult_t cpuOnebitDecode(KernelContext* kc, const OnebitDecodeArgs* args, void*) {
  CpuContext* ctx = cpuCtx(kc);
  const OnebitDecodeArgs& a = *args;
  if (a.chunkLength == 0 || a.chunkLength % 32 != 0) return dctInternalError;
  return dispatchOnebit(a.dtype, [&]<typename T, typename A>() {
    const A* scales = static_cast<const A*>(a.scales);
    const bool nanFactor = std::isnan(a.factor);
    const A factor = static_cast<A>(nanFactor ? 1.0 : a.factor);
    T* out = static_cast<T*>(a.out);
    ctx->pool.parallelFor(a.n, kMinPerWorker, [&](size_t b, size_t e, int) {
      for (size_t i = b; i < e; i++)
        out[i] = onebitDecoded<T>(a.signs, scales, a.chunkLength, i, factor, nanFactor);
    });
  });
}

}  // namespace dct
