// CPU twin of the 1-bit compress kernel (onebit_kernels.h; the decode is
// cpu_onebit_decode.cc), one segment after another. Compress is two passes
// over x's sources, neither of which stores x: the signs and the
// fixed-order sum of squares; then, with the scale, the error (x formed
// again from the same reads). With keepX it is one pass that stores x
// (the next compression forms the error as it reads x back: pending). A server's x is its ranks' decoded mean plus
// its error, formed the same way in both passes, so the average is never
// written out. Whole sign words of a segment run in the vector bodies
// (cpu_onebit_simd.h: SSE2, or AVX2 where the CPU has it), words a segment
// shares with another (or with the vector's end) and builds without SSE2
// in the scalar rules of onebit_math.h. Built with -ffp-contract=off (src/CMakeLists.txt) so no
// square is fused into an add.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
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

// A server's decoded mean of element i over the ranks, as onebitMean
// (onebit_math.h) with the piece's scales in plus/minus.
template <typename T, typename A>
A meanAt(const OnebitSource<T, A>& s, size_t i) {
  const size_t w = i / 32;
  const unsigned b = static_cast<unsigned>(i % 32);
  A sum = (s.words[0][w] >> b) & 1u ? s.plus[0] : s.minus[0];
  for (int r = 1; r < s.ranks; r++) sum = sum + ((s.words[r][w] >> b) & 1u ? s.plus[r] : s.minus[r]);
  return sum / static_cast<A>(s.ranks);
}

template <int kMode, typename T, typename A>
A xAt(const OnebitSource<T, A>& s, size_t i) {
  const A e = onebitErrorIn(s.err, i, s.pending, s.pendingPlus);
  if constexpr (kMode == kFromMean) return meanAt(s, i) + e;
  else return onebitInput(kMode == kFromInput ? s.input : static_cast<const T*>(nullptr), e, i);
}

// Word w's elements in [lo, hi) by the scalar rules: their sign bits (the
// others clear) and *mask of them, the word's sum of squares (the others
// +0), and x to xOut when not null.
template <int kMode, typename T, typename A>
double wordScalar(const OnebitSource<T, A>& s, size_t lo, size_t hi, size_t w, uint32_t* sign, uint32_t* mask,
                  A* xOut) {
  double squares[32];
  uint32_t bits = 0, m = 0;
  for (size_t l = 0; l < 32; l++) {
    const size_t i = w * 32 + l;
    if (i < lo || i >= hi) {
      squares[l] = 0.0;
      continue;
    }
    const A x = xAt<kMode>(s, i);
    if (xOut) xOut[i] = x;
    bits |= onebitBit(x) << l;
    m |= 1u << l;
    squares[l] = onebitSquare(x);
  }
  *sign = bits;
  *mask = m;
  return onebitTree32(squares);
}

// Words [wb, we) of one chunk's slot, elements in segment [lo, hi): signs[k]
// gets word wb + k's bits of the segment (a word the segment shares keeps
// the others' bits), sums[k] its sum; x goes to xOut when not null
// (streamed with stream).
template <int kMode, typename T, typename A>
void signsAndSquares(const OnebitSource<T, A>& s, size_t n, size_t lo, size_t hi, size_t wb, size_t we,
                     uint32_t* signs, double* sums, A* xOut, bool stream) {
  for (size_t w = wb; w < we;) {
    if (w * 32 >= lo && w * 32 + 32 <= hi) {  // whole words of the segment
      const size_t full = std::min(we, hi / 32);
#if DCT_ONEBIT_SIMD
      if constexpr (kVector<T, A>) {
        if (cpuHasAvx2()) onebit_avx2::signsAndSquares<kMode>(s, w, full, signs + (w - wb), sums + (w - wb), xOut, stream);
        else onebit_sse2::signsAndSquares<kMode>(s, w, full, signs + (w - wb), sums + (w - wb), xOut, stream);
        w = full;
        continue;
      }
#endif
      uint32_t mask;
      for (; w < full; w++) sums[w - wb] = wordScalar<kMode>(s, lo, hi, w, signs + (w - wb), &mask, xOut);
      continue;
    }
    uint32_t bits, mask;
    sums[w - wb] = wordScalar<kMode>(s, lo, hi, w, &bits, &mask, xOut);
    if (hi == n && n % 32 && w == n / 32) mask |= ~0u << (n % 32);  // bits past the vector are clear
    signs[w - wb] = (signs[w - wb] & ~mask) | bits;
    w++;
  }
}

// Words [wb, we), all inside the vector: the error of every element (x
// itself for a NaN scale).
template <int kMode, bool kStream, typename T, typename A>
void errors(const OnebitSource<T, A>& s, size_t wb, size_t we, A scale, bool nanScale, A* out) {
  size_t w = wb;
#if DCT_ONEBIT_SIMD
  if constexpr (kVector<T, A>) {
    if (cpuHasAvx2()) onebit_avx2::errorsOf<kMode, kStream>(s, w, we, scale, nanScale, out);
    else onebit_sse2::errorsOf<kMode, kStream>(s, w, we, scale, nanScale, out);
    w = we;
  }
#endif
  for (size_t i = w * 32; i < we * 32; i++) {
    const A x = xAt<kMode>(s, i);
    out[i] = nanScale ? x : onebitError(x, scale);
  }
}

// Levels 2 and up over the level-1 partials [lo, hi) of the whole vector's
// tree (stored from p[0]; the others +0), in place: entry g of a level is
// read only by group g/32 of it, so writing g after reading group g's
// inputs is safe in g order. A lone entry is the sum: the levels above it
// add only +0.
double reduceLevels(double* p, size_t lo, size_t hi) {
  while (hi - lo > 1) {
    const size_t nlo = lo / 32, nhi = (hi - 1) / 32 + 1;
    for (size_t g = nlo; g < nhi; g++) {
      double t[32];
      for (size_t k = 0; k < 32; k++) {
        const size_t at = g * 32 + k;
        t[k] = at >= lo && at < hi ? p[at - lo] : 0.0;
      }
      p[g - nlo] = onebitTree32(t);
    }
    lo = nlo;
    hi = nhi;
  }
  return hi > lo ? p[0] : 0.0;
}

// Streamed stores for outputs past kStreamBytes whose words start 16-byte
// aligned (every 32-element word then does).
bool streams(const void* out, size_t bytes) { return bytes >= kStreamBytes && streamAligned(out); }

// Pass one over segment [lo, hi) (not empty): its signs into the slots and
// its sum of squares; with keepX, x into errorOut.
template <int kMode, typename T, typename A>
double segmentSquares(CpuContext* ctx, OnebitCompressArgs& a, const OnebitSource<T, A>& src, size_t lo, size_t hi) {
  unsigned char* slots = static_cast<unsigned char*>(a.slots);
  const size_t wf = lo / 32, we = onebitWords(hi), gf = wf / 32, ge = (we + 31) / 32, cw = a.chunkWords;
  const size_t wordsAt = a.scalesPerSlot * sizeof(A);
  A* xOut = a.keepX ? static_cast<A*>(a.errorOut) : nullptr;
  const bool stream = xOut && streams(xOut, a.n * sizeof(A));
  ctx->pool.parallelFor(ge - gf, kMinGroupsPerWorker, [&](size_t b, size_t e, int) {
    for (size_t g = gf + b; g < gf + e; g++) {
      double sums[32] = {};
      const size_t wb = std::max(wf, g * 32), wEnd = std::min(we, g * 32 + 32);
      for (size_t w = wb, q = wb / cw; w < wEnd; q++) {  // runs within one chunk's slot
        const size_t run = std::min(wEnd, (q + 1) * cw);
        uint32_t* signs = reinterpret_cast<uint32_t*>(slots + q * a.slotBytes + wordsAt) + (w - q * cw);
        signsAndSquares<kMode>(src, a.n, lo, hi, w, run, signs, sums + (w - g * 32), xOut, stream);
        w = run;
      }
      a.scratch[g - gf] = onebitTree32(sums);
    }
    if (stream) streamFence();  // before the pool hands x on
  });
  return reduceLevels(a.scratch, gf, ge);
}

// Pass two over segment [lo, hi): the error, x formed again; the whole
// words in the pool, the shared ones' elements here.
template <int kMode, typename T, typename A>
void segmentErrors(CpuContext* ctx, const OnebitCompressArgs& a, const OnebitSource<T, A>& src, size_t lo, size_t hi,
                   double scaleValue) {
  A* errOut = static_cast<A*>(a.errorOut);
  const A scale = static_cast<A>(scaleValue);
  const bool nanScale = std::isnan(scaleValue), stream = streams(errOut, a.n * sizeof(A));
  const size_t fullB = (lo + 31) / 32, fullE = std::max(fullB, hi / 32);
  const size_t headEnd = std::min(hi, fullB * 32);
  auto one = [&](size_t i) {
    const A x = xAt<kMode>(src, i);
    errOut[i] = nanScale ? x : onebitError(x, scale);
  };
  for (size_t i = lo; i < headEnd; i++) one(i);
  ctx->pool.parallelFor(fullE - fullB, kMinPerWorker / 32, [&](size_t b, size_t e, int) {
    if (stream) {
      errors<kMode, true>(src, fullB + b, fullB + e, scale, nanScale, errOut);
      streamFence();  // before the pool hands the error on
    } else {
      errors<kMode, false>(src, fullB + b, fullB + e, scale, nanScale, errOut);
    }
  });
  for (size_t i = std::max(headEnd, fullE * 32); i < hi; i++) one(i);
}

// Segment s's scale into its entry of every slot its chunks' pieces take
// (onebit_kernels.h); the last segment's also into the slots of empty chunks.
template <typename A>
void placeScale(const OnebitCompressArgs& a, int s, int m, size_t lo, size_t hi, A scale) {
  unsigned char* slots = static_cast<unsigned char*>(a.slots);
  const size_t cl = a.chunkWords * 32;
  for (size_t q = lo / cl; q < static_cast<size_t>(a.slotCount) && q * cl < hi; q++) {
    const int first = onebitSegmentAt(a.segments, m, q * cl);
    std::memcpy(slots + q * a.slotBytes + static_cast<size_t>(s - first) * sizeof(A), &scale, sizeof(A));
  }
  if (s == m - 1)
    for (size_t q = (a.n + cl - 1) / cl; q < static_cast<size_t>(a.slotCount); q++)
      std::memcpy(slots + q * a.slotBytes, &scale, sizeof(A));
}

// Calls fn.template operator()<kMode>(source) with a's source of x (its
// pending scale and, for a mean, the ranks' scales set per segment by the
// caller).
template <typename T, typename A, typename Fn>
void withSource(const OnebitCompressArgs& a, Fn&& fn) {
  OnebitSource<T, A> src{static_cast<const T*>(a.input), static_cast<const A*>(a.errorIn), a.pending, A(0), A(0), {}, 0,
                         nullptr, nullptr, nullptr};
  if (a.mean.ranks == 0) {
    if (a.input) fn.template operator()<kFromInput>(src);
    else fn.template operator()<kFromError>(src);
    return;
  }
  src.slots = OnebitSlotsOf<A>{static_cast<const unsigned char*>(a.mean.slots), a.mean.slotBytes, a.scalesPerSlot};
  src.ranks = a.mean.ranks;
  std::vector<const uint32_t*> words(src.ranks);
  for (int r = 0; r < src.ranks; r++) words[r] = src.slots.words(r);
  src.words = words.data();
  fn.template operator()<kFromMean>(src);
}

// The segments are well formed (a caller's bug otherwise).
bool validSegments(const OnebitCompressArgs& a) {
  if (a.segments == nullptr) return a.scalesPerSlot >= 1;
  const int m = a.segmentCount;
  if (m < 1 || a.segments[0] != 0 || a.segments[m] != a.n || a.scalesPerSlot < 1 || a.scaleValues == nullptr ||
      (a.pending && a.pendingScales == nullptr))
    return false;
  for (int s = 0; s < m; s++)
    if (a.segments[s] >= a.segments[s + 1]) return false;
  return true;
}

}  // namespace

dctResult_t cpuOnebitCompress(KernelContext* kc, OnebitCompressArgs* args, void*) {
  CpuContext* ctx = cpuCtx(kc);
  OnebitCompressArgs& a = *args;
  if (a.chunkWords == 0 || (a.mean.ranks > 0 && a.input) || !validSegments(a)) return dctInternalError;
  return dispatchOnebit(a.dtype, [&]<typename T, typename A>() {
    withSource<T, A>(a, [&]<int kMode>(const OnebitSource<T, A>& from) {
      const int m = a.segments ? a.segmentCount : 1;
      OnebitSource<T, A> src = from;
      std::vector<A> plus(src.ranks), minus(src.ranks);
      src.plus = plus.data();
      src.minus = minus.data();
      double total = 0.0, largest = 0.0;
      bool nan = false;
      for (int s = 0; s < m; s++) {
        const size_t lo = a.segments ? a.segments[s] : 0, hi = a.segments ? a.segments[s + 1] : a.n;
        const A p = static_cast<A>(a.segments ? (a.pending ? a.pendingScales[s] : 0.0) : a.pendingScale);
        src.pendingPlus = p;
        src.pendingMinus = -p;
        for (int r = 0; r < src.ranks; r++) {  // the mean: each rank's scale of this piece
          plus[r] = src.slots.scale(r, s);
          minus[r] = -plus[r];
        }
        const double sum = lo < hi ? segmentSquares<kMode>(ctx, a, src, lo, hi) : 0.0;
        const double scale = onebitScale(sum, hi - lo, Value<A>::type);
        placeScale<A>(a, s, m, lo, hi, static_cast<A>(scale));
        if (!a.keepX && lo < hi) segmentErrors<kMode>(ctx, a, src, lo, hi, scale);
        if (a.segments) a.scaleValues[s] = scale;
        total += sum;
        nan = nan || std::isnan(scale);
        largest = std::max(largest, scale);
      }
      a.sumOfSquares = total;
      a.scaleValue = nan ? std::numeric_limits<double>::quiet_NaN() : largest;
    });
  });
}

}  // namespace dct
