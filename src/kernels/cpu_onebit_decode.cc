// CPU twin of the 1-bit decode (onebit_kernels.h: OnebitDecodeArgs): the
// vector as pieces (a segment within a chunk), each decoded with its own
// scale from its chunk's slot; whole sign words in the vector bodies
// (cpu_onebit_simd.h), the elements of words two pieces share one by one.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu_context.h"
#include "kernels/cpu_onebit_simd.h"
#include "kernels/cpu_select_simd.h"
#include "kernels/cpu_stream.h"
#include "kernels/onebit_kernels.h"
#include "kernels/onebit_math.h"

namespace dct {
namespace {

template <typename T>
struct Piece {
  size_t lo, hi;           // elements
  const uint32_t* words;   // its chunk's sign words (word 0 = the chunk's first)
  size_t firstWord;        // the chunk's first word in the vector
  T plus, minus;           // a set bit, a clear one
};

// Whole words [wb, we) of a piece: plus for a set bit, minus for a clear one.
template <bool kStream, typename T, typename A>
void decodeWordsOf(const Piece<T>& p, size_t wb, size_t we, T* out) {
  const uint32_t* words = p.words + (wb - p.firstWord);
#if DCT_ONEBIT_SIMD
  if constexpr ((std::is_same_v<A, float> || std::is_same_v<A, double>) && std::is_same_v<T, A>) {
    if (cpuHasAvx2()) onebit_avx2::decodeWords<kStream>(words, we - wb, p.plus, p.minus, out + 32 * wb);
    else onebit_sse2::decodeWords<kStream>(words, we - wb, p.plus, p.minus, out + 32 * wb);
    return;
  }
#endif
  for (size_t w = wb; w < we; w++, words++)
    for (size_t i = w * 32; i < w * 32 + 32; i++) out[i] = (*words >> (i % 32)) & 1u ? p.plus : p.minus;
}

// Elements [x0, x1) of a piece.
template <bool kStream, typename T, typename A>
void decodeElements(const Piece<T>& p, size_t x0, size_t x1, T* out) {
  auto one = [&](size_t i) { out[i] = (p.words[i / 32 - p.firstWord] >> (i % 32)) & 1u ? p.plus : p.minus; };
  const size_t fullB = (x0 + 31) / 32, fullE = std::max(fullB, x1 / 32), headEnd = std::min(x1, fullB * 32);
  for (size_t i = x0; i < headEnd; i++) one(i);
  if (fullE > fullB) decodeWordsOf<kStream, T, A>(p, fullB, fullE, out);
  for (size_t i = std::max(headEnd, fullE * 32); i < x1; i++) one(i);
}

}  // namespace

dctResult_t cpuOnebitDecode(KernelContext* kc, const OnebitDecodeArgs* args, void*) {
  CpuContext* ctx = cpuCtx(kc);
  const OnebitDecodeArgs& a = *args;
  if (a.chunkWords == 0 || a.scalesPerSlot < 1 || (a.segments && a.segmentCount < 1)) return dctInternalError;
  return dispatchAnyValue(a.dtype, [&]<typename T>() {
    using A = typename Value<T>::Acc;
    const OnebitSlotsOf<A> slots{static_cast<const unsigned char*>(a.slots), a.slotBytes, a.scalesPerSlot};
    const bool nanFactor = std::isnan(a.factor);
    const A factor = static_cast<A>(nanFactor ? 1.0 : a.factor);
    const size_t words = onebitWords(a.n), cw = a.chunkWords, cl = 32 * cw, chunks = (words + cw - 1) / cw;
    const int m = a.segments ? a.segmentCount : 1;
    std::vector<Piece<T>> pieces;
    for (size_t j = 0; j < chunks; j++) {
      const size_t cb = j * cl, ce = std::min(a.n, cb + cl);
      const int first = onebitSegmentAt(a.segments, m, cb);
      for (int s = first; s < m; s++) {
        const size_t lo = a.segments ? a.segments[s] : 0, hi = a.segments ? a.segments[s + 1] : a.n;
        if (lo >= ce) break;
        const A scale = slots.scale(j, static_cast<size_t>(s - first));
        const T plus = nanFactor ? Value<T>::store(onebitNaN<A>()) : Value<T>::store(scale * factor);
        const T minus = nanFactor ? Value<T>::store(onebitNaN<A>()) : Value<T>::store(-scale * factor);
        pieces.push_back({std::max(lo, cb), std::min(hi, ce), slots.words(j), j * cw, plus, minus});
      }
    }
    T* out = static_cast<T*>(a.out);
    const bool stream = a.n * sizeof(T) >= kStreamBytes && streamAligned(out);
    ctx->pool.parallelFor(words, kMinPerWorker / 32, [&](size_t b, size_t e, int) {
      const size_t x0 = b * 32, x1 = std::min(a.n, e * 32);
      auto at = std::upper_bound(pieces.begin(), pieces.end(), x0,
                                 [](size_t x, const Piece<T>& p) { return x < p.hi; });  // the first ending past x0
      for (; at != pieces.end() && at->lo < x1; ++at) {
        if (stream) decodeElements<true, T, A>(*at, std::max(x0, at->lo), std::min(x1, at->hi), out);
        else decodeElements<false, T, A>(*at, std::max(x0, at->lo), std::min(x1, at->hi), out);
      }
      if (stream) streamFence();
    });
  });
}

}  // namespace dct
