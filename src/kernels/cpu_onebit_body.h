// Vector bodies of the CPU twin's 1-bit kernels over whole sign words (32
// elements each), bit for bit the scalar rules of onebit_math.h: the same
// IEEE operations on the same operands, lane by lane, and the halving tree
// with its first steps done on whole registers (t[i] + t[i + s] for s at
// least the register's width is one register add). No header guard on
// purpose: cpu_onebit_simd.h includes this file once per instruction set,
// inside a namespace of its own, with
//   DCT_ONEBIT_TARGET  the function attribute (empty, or target("avx2"))
//   DCT_ONEBIT_BYTES   the vector width in bytes (16: SSE2, 32: AVX2)
// Written with GCC vector extensions; the few operations they lack
// (movemask, fp32 -> fp64, streaming stores) come per instruction set.

template <typename A>
struct Lanes;
template <>
struct Lanes<float> {
  typedef float V __attribute__((vector_size(DCT_ONEBIT_BYTES)));
  typedef int32_t I;
  typedef I M __attribute__((vector_size(DCT_ONEBIT_BYTES)));
  static constexpr int L = DCT_ONEBIT_BYTES / 4;
};
template <>
struct Lanes<double> {
  typedef double V __attribute__((vector_size(DCT_ONEBIT_BYTES)));
  typedef int64_t I;
  typedef I M __attribute__((vector_size(DCT_ONEBIT_BYTES)));
  static constexpr int L = DCT_ONEBIT_BYTES / 8;
};
typedef Lanes<double>::V DV;
constexpr int kLD = Lanes<double>::L;

#if DCT_ONEBIT_BYTES == 32
DCT_ONEBIT_TARGET inline unsigned maskBits(Lanes<float>::M m) { return _mm256_movemask_ps((__m256)m); }
DCT_ONEBIT_TARGET inline unsigned maskBits(Lanes<double>::M m) { return _mm256_movemask_pd((__m256d)m); }
DCT_ONEBIT_TARGET inline void widen(Lanes<float>::V x, DV* lo, DV* hi) {
  *lo = (DV)_mm256_cvtps_pd(_mm256_castps256_ps128((__m256)x));
  *hi = (DV)_mm256_cvtps_pd(_mm256_extractf128_ps((__m256)x, 1));
}
// 16-byte streamed halves: the output may be 16- but not 32-byte aligned.
DCT_ONEBIT_TARGET inline void streamStore(float* p, Lanes<float>::V v) {
  _mm_stream_ps(p, _mm256_castps256_ps128((__m256)v));
  _mm_stream_ps(p + 4, _mm256_extractf128_ps((__m256)v, 1));
}
DCT_ONEBIT_TARGET inline void streamStore(double* p, Lanes<double>::V v) {
  _mm_stream_pd(p, _mm256_castpd256_pd128((__m256d)v));
  _mm_stream_pd(p + 2, _mm256_extractf128_pd((__m256d)v, 1));
}
#else
DCT_ONEBIT_TARGET inline unsigned maskBits(Lanes<float>::M m) { return _mm_movemask_ps((__m128)m); }
DCT_ONEBIT_TARGET inline unsigned maskBits(Lanes<double>::M m) { return _mm_movemask_pd((__m128d)m); }
DCT_ONEBIT_TARGET inline void widen(Lanes<float>::V x, DV* lo, DV* hi) {
  *lo = (DV)_mm_cvtps_pd((__m128)x);
  *hi = (DV)_mm_cvtps_pd(_mm_movehl_ps((__m128)x, (__m128)x));
}
DCT_ONEBIT_TARGET inline void streamStore(float* p, Lanes<float>::V v) { _mm_stream_ps(p, (__m128)v); }
DCT_ONEBIT_TARGET inline void streamStore(double* p, Lanes<double>::V v) { _mm_stream_pd(p, (__m128d)v); }
#endif

// Every lane = e (one broadcast; a loop of lane stores is not always
// recognized as one).
template <typename V, typename E>
DCT_ONEBIT_TARGET inline V splat(E e) {
#if DCT_ONEBIT_BYTES == 32
  if constexpr (std::is_same_v<V, Lanes<float>::V>) return (V)_mm256_set1_ps(e);
  else if constexpr (std::is_same_v<V, Lanes<double>::V>) return (V)_mm256_set1_pd(e);
  else if constexpr (std::is_same_v<V, Lanes<float>::M>) return (V)_mm256_set1_epi32(static_cast<int32_t>(e));
  else return (V)_mm256_set1_epi64x(static_cast<int64_t>(e));
#else
  if constexpr (std::is_same_v<V, Lanes<float>::V>) return (V)_mm_set1_ps(e);
  else if constexpr (std::is_same_v<V, Lanes<double>::V>) return (V)_mm_set1_pd(e);
  else if constexpr (std::is_same_v<V, Lanes<float>::M>) return (V)_mm_set1_epi32(static_cast<int32_t>(e));
  else return (V)_mm_set1_epi64x(static_cast<int64_t>(e));
#endif
}

template <typename V, typename E>
DCT_ONEBIT_TARGET inline V loadu(const E* p) {
  V v;
  __builtin_memcpy(&v, p, sizeof(V));
  return v;
}

template <bool kStream, typename A, typename V>
DCT_ONEBIT_TARGET inline void store(A* p, V v) {
  if constexpr (kStream) streamStore(p, v);
  else __builtin_memcpy(p, &v, sizeof(V));
}

// The tensor's values widened exactly to A (one lane at a time for the
// half types).
template <typename T, typename A>
DCT_ONEBIT_TARGET inline typename Lanes<A>::V loadInput(const T* p) {
  using V = typename Lanes<A>::V;
  if constexpr (std::is_same_v<T, A>) {
    return loadu<V>(p);
  } else {
    V v;
    for (int l = 0; l < Lanes<A>::L; l++) v[l] = Value<T>::load(p[l]);
    return v;
  }
}

// Lane l of block b of a word stands for bit b * L + l.
template <typename A>
DCT_ONEBIT_TARGET inline typename Lanes<A>::M laneBits(int b) {
  typename Lanes<A>::M m;
  for (int l = 0; l < Lanes<A>::L; l++) m[l] = static_cast<typename Lanes<A>::I>(1) << l;  // a constant
  return m << (b * Lanes<A>::L);
}

// Block b (L lanes) of word w's error going in, as onebitErrorIn.
template <typename T, typename A>
DCT_ONEBIT_TARGET inline typename Lanes<A>::V errorIn(const OnebitSource<T, A>& s, size_t w, int b) {
  using V = typename Lanes<A>::V;
  const V e = loadu<V>(s.err + 32 * w + b * Lanes<A>::L);
  if (!s.pending) return e;
  return e - (e >= splat<V>(A(0)) ? splat<V>(s.pendingPlus) : splat<V>(s.pendingMinus));
}

// x of word w (elements 32w ..), block b (L lanes) in x[b], as
// onebitInput / onebitMean. The mean runs the ranks in the outer loop so
// the blocks' sums are independent chains.
template <int kMode, typename T, typename A>
DCT_ONEBIT_TARGET inline void wordX(const OnebitSource<T, A>& s, size_t w, typename Lanes<A>::V* x) {
  using V = typename Lanes<A>::V;
  using M = typename Lanes<A>::M;
  constexpr int L = Lanes<A>::L, B = 32 / L;
  if constexpr (kMode == kFromError) {
    for (int b = 0; b < B; b++) x[b] = errorIn(s, w, b);
  } else if constexpr (kMode == kFromInput) {
    const T* in = s.input + 32 * w;
    for (int b = 0; b < B; b++) x[b] = loadInput<T, A>(in + b * L) + errorIn(s, w, b);
  } else {
    const M zero = splat<M>(0);
    auto decoded = [&](int r, int b) DCT_ONEBIT_TARGET {
      const M word = splat<M>(static_cast<typename Lanes<A>::I>(s.words[r][w]));
      return (word & laneBits<A>(b)) != zero ? splat<V>(s.plus[r]) : splat<V>(s.minus[r]);
    };
    for (int b = 0; b < B; b++) x[b] = decoded(0, b);  // ranks >= 1
    for (int r = 1; r < s.ranks; r++)
      for (int b = 0; b < B; b++) x[b] = x[b] + decoded(r, b);
    const V ranks = splat<V>(static_cast<A>(s.ranks));
    for (int b = 0; b < B; b++) x[b] = x[b] / ranks + errorIn(s, w, b);
  }
}

// The halving tree of 32 fp64 values held in 32 / kLD registers.
DCT_ONEBIT_TARGET inline double tree32(DV* d) {
  for (int k = 16 / kLD; k >= 1; k /= 2)
    for (int i = 0; i < k; i++) d[i] = d[i] + d[i + k];
  double t[kLD];
  __builtin_memcpy(t, &d[0], sizeof(t));
  for (int s = kLD / 2; s > 0; s /= 2)
    for (int i = 0; i < s; i++) t[i] = t[i] + t[i + s];
  return t[0];
}

// Words [wb, we): sign word w to signs[w - wb], its sum of squares to
// sums[w - wb], and x itself to xOut (when not null; streamed with stream).
template <int kMode, typename T, typename A>
DCT_ONEBIT_TARGET void signsAndSquares(const OnebitSource<T, A>& s, size_t wb, size_t we, uint32_t* signs,
                                       double* sums, A* xOut, bool stream) {
  using V = typename Lanes<A>::V;
  constexpr int L = Lanes<A>::L, kPerBlock = L / kLD;
  for (size_t w = wb; w < we; w++) {
    V xs[32 / L];
    wordX<kMode>(s, w, xs);
    if (xOut)
      for (int b = 0; b < 32 / L; b++) {
        if (stream) store<true>(xOut + 32 * w + b * L, xs[b]);
        else store<false>(xOut + 32 * w + b * L, xs[b]);
      }
    DV d[32 / kLD];
    uint32_t bits = 0;
    for (int b = 0; b < 32 / L; b++) {
      const V x = xs[b];
      bits |= maskBits(x >= splat<V>(A(0))) << (b * L);
      if constexpr (kPerBlock == 2) {
        DV lo, hi;
        widen(x, &lo, &hi);
        d[2 * b] = lo * lo;
        d[2 * b + 1] = hi * hi;
      } else {
        d[b] = x * x;
      }
    }
    signs[w - wb] = bits;
    sums[w - wb] = tree32(d);
  }
}

// Words [wb, we): out = x - (x >= 0 ? scale : -scale), or x itself for a
// NaN scale (never committed).
template <int kMode, bool kStream, typename T, typename A>
DCT_ONEBIT_TARGET void errorsOf(const OnebitSource<T, A>& s, size_t wb, size_t we, A scale, bool nanScale, A* out) {
  using V = typename Lanes<A>::V;
  constexpr int L = Lanes<A>::L;
  const V plus = splat<V>(scale), minus = splat<V>(-scale), zero = splat<V>(A(0));
  for (size_t w = wb; w < we; w++) {
    V xs[32 / L];
    wordX<kMode>(s, w, xs);
    for (int b = 0; b < 32 / L; b++) {
      const V x = xs[b];
      store<kStream>(out + 32 * w + b * L, nanScale ? x : x - (x >= zero ? plus : minus));
    }
  }
}

// words[0, count) decoded into out[0, 32 * count): plus for a set bit,
// minus for a clear one.
template <bool kStream, typename A>
DCT_ONEBIT_TARGET void decodeWords(const uint32_t* words, size_t count, A plus, A minus, A* out) {
  using V = typename Lanes<A>::V;
  using M = typename Lanes<A>::M;
  constexpr int L = Lanes<A>::L;
  const V p = splat<V>(plus), m = splat<V>(minus);
  for (size_t w = 0; w < count; w++) {
    const M word = splat<M>(static_cast<typename Lanes<A>::I>(words[w]));
    for (int b = 0; b < 32 / L; b++)
      store<kStream>(out + 32 * w + b * L, (word & laneBits<A>(b)) != splat<M>(0) ? p : m);
  }
}
