// CPU twin of the 1-bit kernels (onebit_kernels.h). Compress is two passes
// over x's sources, neither of which stores x: the signs and the
// fixed-order sum of squares; then, with the scale, the error (x formed
// again from the same reads). With keepX it is one pass that stores x
// (the next compression forms the error as it reads x back: pending). A server's x is its ranks' decoded mean plus
// its error, formed the same way in both passes, so the average is never
// written out. Whole sign words run in the vector bodies
// (cpu_onebit_simd.h: SSE2, or AVX2 where the CPU has it), the last
// partial word and builds without SSE2 in the scalar rules of
// onebit_math.h. Built with -ffp-contract=off (src/CMakeLists.txt) so no
// square is fused into an add.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu_context.h"
#include "kernels/cpu_onebit_simd.h"
#include "kernels/cpu_select_simd.h"
#include "kernels/cpu_stream.h"
#include "kernels/onebit_kernels.h"
#include "kernels/onebit_math.h"
#include "kernels/select_args.h"

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

// Vector bodies for whole words, where this build and type have them.
template <typename T, typename A>
constexpr bool kVector = DCT_ONEBIT_SIMD && (std::is_same_v<A, float> || std::is_same_v<A, double>);

template <int kMode, typename T, typename A>
A xAt(const OnebitSource<T, A>& s, size_t i) {
  const A e = onebitErrorIn(s.err, i, s.pending, s.pendingPlus);
  if constexpr (kMode == kFromMean) return onebitMean(s.slots, s.ranks, i) + e;
  else return onebitInput(kMode == kFromInput ? s.input : static_cast<const T*>(nullptr), e, i);
}

// Word w of n elements by the scalar rules: its sign word and sum of
// squares, and x to xOut when not null.
template <int kMode, typename T, typename A>
double wordScalar(const OnebitSource<T, A>& s, size_t n, size_t w, uint32_t* sign, A* xOut) {
  double squares[32];
  uint32_t bits = 0;
  const size_t base = w * 32, m = std::min<size_t>(n - base, 32);
  for (size_t l = 0; l < m; l++) {
    const A x = xAt<kMode>(s, base + l);
    if (xOut) xOut[base + l] = x;
    bits |= onebitBit(x) << l;
    squares[l] = onebitSquare(x);
  }
  for (size_t l = m; l < 32; l++) squares[l] = 0.0;
  *sign = bits;
  return onebitTree32(squares);
}

// Words [wb, we) of one chunk: signs[k] gets word wb + k, sums[k] its sum;
// x goes to xOut when not null (streamed with stream).
template <int kMode, typename T, typename A>
void signsAndSquares(const OnebitSource<T, A>& s, size_t n, size_t wb, size_t we, uint32_t* signs, double* sums,
                     A* xOut, bool stream) {
  size_t w = wb;
#if DCT_ONEBIT_SIMD
  if constexpr (kVector<T, A>) {
    const size_t full = std::min(we, n / 32);
    if (w < full) {
      if (cpuHasAvx2()) onebit_avx2::signsAndSquares<kMode>(s, w, full, signs, sums, xOut, stream);
      else onebit_sse2::signsAndSquares<kMode>(s, w, full, signs, sums, xOut, stream);
      w = full;
    }
  }
#endif
  for (; w < we; w++) sums[w - wb] = wordScalar<kMode>(s, n, w, signs + (w - wb), xOut);
}

// Words [wb, we): the error of every element (x itself for a NaN scale).
template <int kMode, bool kStream, typename T, typename A>
void errors(const OnebitSource<T, A>& s, size_t n, size_t wb, size_t we, A scale, bool nanScale, A* out) {
  size_t w = wb;
#if DCT_ONEBIT_SIMD
  if constexpr (kVector<T, A>) {
    const size_t full = std::min(we, n / 32);
    if (w < full) {
      if (cpuHasAvx2()) onebit_avx2::errorsOf<kMode, kStream>(s, w, full, scale, nanScale, out);
      else onebit_sse2::errorsOf<kMode, kStream>(s, w, full, scale, nanScale, out);
      w = full;
    }
  }
#endif
  for (size_t i = w * 32; i < std::min(n, we * 32); i++) {
    const A x = xAt<kMode>(s, i);
    out[i] = nanScale ? x : onebitError(x, scale);
  }
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

// Streamed stores for outputs past kStreamBytes whose words start 16-byte
// aligned (every 32-element word then does).
bool streams(const void* out, size_t bytes) { return bytes >= kStreamBytes && streamAligned(out); }

// Pass one: the signs into the slots, the sum of squares, the scale; with
// keepX, x into errorOut.
template <int kMode, typename T, typename A>
void signsAndScale(CpuContext* ctx, OnebitCompressArgs& a, const OnebitSource<T, A>& src) {
  unsigned char* slots = static_cast<unsigned char*>(a.slots);
  const size_t words = onebitWords(a.n), groups = (words + 31) / 32, cw = a.chunkWords;
  A* xOut = a.keepX ? static_cast<A*>(a.errorOut) : nullptr;
  const bool stream = xOut && streams(xOut, a.n * sizeof(A));
  ctx->pool.parallelFor(groups, kMinGroupsPerWorker, [&](size_t b, size_t e, int) {
    for (size_t g = b; g < e; g++) {
      double sums[32] = {};
      const size_t wb = g * 32, we = std::min(words, wb + 32);
      for (size_t w = wb, q = wb / cw; w < we; q++) {  // runs within one chunk's slot
        const size_t run = std::min(we, (q + 1) * cw);
        uint32_t* signs = reinterpret_cast<uint32_t*>(slots + q * a.slotBytes + sizeof(A)) + (w - q * cw);
        signsAndSquares<kMode>(src, a.n, w, run, signs, sums + (w - wb), xOut, stream);
        w = run;
      }
      a.scratch[g] = onebitTree32(sums);
    }
    if (stream) streamFence();  // before the pool hands x on
  });
  a.sumOfSquares = reduceLevels(a.scratch, groups);
  a.scaleValue = onebitScale(a.sumOfSquares, a.n, Value<A>::type);
  const A scale = static_cast<A>(a.scaleValue);
  for (int q = 0; q < a.slotCount; q++) std::memcpy(slots + q * a.slotBytes, &scale, sizeof(A));
}

// Pass two over sign words [wb, we): the error, x formed again.
template <int kMode, typename T, typename A>
void errorWords(CpuContext* ctx, const OnebitCompressArgs& a, const OnebitSource<T, A>& src, size_t wb, size_t we) {
  A* errOut = static_cast<A*>(a.errorOut);
  const A scale = static_cast<A>(a.scaleValue);
  const bool nanScale = std::isnan(a.scaleValue), stream = streams(errOut, a.n * sizeof(A));
  ctx->pool.parallelFor(we - wb, kMinPerWorker / 32, [&](size_t b, size_t e, int) {
    if (stream) {
      errors<kMode, true>(src, a.n, wb + b, wb + e, scale, nanScale, errOut);
      streamFence();  // before the pool hands the error on
    } else {
      errors<kMode, false>(src, a.n, wb + b, wb + e, scale, nanScale, errOut);
    }
  });
}

// Calls fn.template operator()<kMode>(source) with a's source of x.
template <typename T, typename A, typename Fn>
void withSource(const OnebitCompressArgs& a, Fn&& fn) {
  const A p = static_cast<A>(a.pendingScale);
  OnebitSource<T, A> src{static_cast<const T*>(a.input), static_cast<const A*>(a.errorIn), a.pending, p, -p, {}, 0,
                         nullptr, nullptr, nullptr};
  if (a.mean.ranks == 0) {
    if (a.input) fn.template operator()<kFromInput>(src);
    else fn.template operator()<kFromError>(src);
    return;
  }
  src.slots = OnebitSlotsOf<A>{static_cast<const unsigned char*>(a.mean.slots), a.mean.slotBytes};
  src.ranks = a.mean.ranks;
  std::vector<const uint32_t*> words(src.ranks);
  std::vector<A> plus(src.ranks), minus(src.ranks);
  for (int r = 0; r < src.ranks; r++) {
    words[r] = src.slots.words(r);
    plus[r] = src.slots.scale(r);
    minus[r] = -plus[r];
  }
  src.words = words.data();
  src.plus = plus.data();
  src.minus = minus.data();
  fn.template operator()<kFromMean>(src);
}

// Words [wb, we) of chunk j's slot decoded: plus for a set bit, minus for a clear one.
template <bool kStream, typename T, typename A>
void decodeRun(const uint32_t* words, size_t n, size_t wb, size_t we, T plus, T minus, T* out) {
  size_t w = wb;
#if DCT_ONEBIT_SIMD
  if constexpr (kVector<T, A> && std::is_same_v<T, A>) {
    const size_t full = std::min(we, n / 32);
    if (w < full) {
      if (cpuHasAvx2()) onebit_avx2::decodeWords<kStream>(words, full - w, plus, minus, out + 32 * w);
      else onebit_sse2::decodeWords<kStream>(words, full - w, plus, minus, out + 32 * w);
      words += full - w;
      w = full;
    }
  }
#endif
  for (; w < we; w++, words++)
    for (size_t i = w * 32; i < std::min(n, w * 32 + 32); i++) out[i] = (*words >> (i % 32)) & 1u ? plus : minus;
}

}  // namespace

dctResult_t cpuOnebitCompress(KernelContext* kc, OnebitCompressArgs* args, void*) {
  CpuContext* ctx = cpuCtx(kc);
  OnebitCompressArgs& a = *args;
  if (a.chunkWords == 0 || (a.mean.ranks > 0 && a.input)) return dctInternalError;
  return dispatchOnebit(a.dtype, [&]<typename T, typename A>() {
    withSource<T, A>(a, [&]<int kMode>(const OnebitSource<T, A>& src) {
      signsAndScale<kMode>(ctx, a, src);
      if (!a.keepX) errorWords<kMode>(ctx, a, src, 0, onebitWords(a.n));
    });
  });
}

dctResult_t cpuOnebitDecode(KernelContext* kc, const OnebitDecodeArgs* args, void*) {
  CpuContext* ctx = cpuCtx(kc);
  const OnebitDecodeArgs& a = *args;
  if (a.chunkWords == 0) return dctInternalError;
  return dispatchOnebit(a.dtype, [&]<typename T, typename A>() {
    const OnebitSlotsOf<A> slots{static_cast<const unsigned char*>(a.slots), a.slotBytes};
    const bool nanFactor = std::isnan(a.factor);
    const A factor = static_cast<A>(nanFactor ? 1.0 : a.factor);
    const size_t words = onebitWords(a.n), cw = a.chunkWords, chunks = (words + cw - 1) / cw;
    std::vector<T> plus(chunks), minus(chunks);
    for (size_t j = 0; j < chunks; j++) {
      plus[j] = nanFactor ? Value<T>::store(onebitNaN<A>()) : Value<T>::store(slots.scale(j) * factor);
      minus[j] = nanFactor ? Value<T>::store(onebitNaN<A>()) : Value<T>::store(-slots.scale(j) * factor);
    }
    T* out = static_cast<T*>(a.out);
    const bool stream = streams(out, a.n * sizeof(T));
    ctx->pool.parallelFor(words, kMinPerWorker / 32, [&](size_t b, size_t e, int) {
      for (size_t w = b, j = b / cw; w < e; j++) {  // runs within one chunk's slot
        const size_t run = std::min(e, (j + 1) * cw);
        const uint32_t* in = slots.words(j) + (w - j * cw);
        if (stream) decodeRun<true, T, A>(in, a.n, w, run, plus[j], minus[j], out);
        else decodeRun<false, T, A>(in, a.n, w, run, plus[j], minus[j], out);
        w = run;
      }
      if (stream) streamFence();
    });
  });
}

}  // namespace dct
