// CPU twin of the threshold estimators, for every value type: the k-th
// largest |x| of a deterministic PRNG sample (default) or of all of x
// (exact), x optionally an accumulator read as residual + grad (never
// written), both by nth_element over magnitude keys (row_keys.h: the bits of
// |x|, NaN ranked as +Inf; fp16/bf16 rank by their 16-bit keys); or
// MSTopK bisection (bisect): one statistics pass and at most maxPasses
// counting passes over x, each split over the thread pool.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <type_traits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "kernels/cpu_context.h"
#include "kernels/sampling.h"
#include "kernels/threshold_bisect.h"

namespace dct {
namespace {

// at(i): the value at position i (x[i], or x[i] + y[i] with an addend).
// No scratch: *res = dctOutOfMemory.
template <typename T, typename At>
double estimate(CpuContext* ctx, const ThresholdArgs& a, At at, dctResult_t* res) {
  using K = KeyOf<T>;
  const size_t m = a.method == dctThresholdExact ? a.n : thresholdSampleSize(a.n, a.density);
  if ((*res = ctx->thresholdScratch.reserve(m * sizeof(K))) != dctSuccess) return 0;
  K* keys = ctx->thresholdScratch.as<K>();
  if (m == a.n) {
    ctx->pool.parallelFor(m, kMinPerWorker, [&](size_t b, size_t e, int) {
      for (size_t i = b; i < e; i++) keys[i] = rowKey(at(i));
    });
  } else {
    uint64_t state = a.seed;
    for (size_t i = 0; i < m; i++) keys[i] = rowKey(at(samplePosition(splitmix64(state), a.n)));
  }
  const size_t k = thresholdK(m, a.density);
  std::nth_element(keys, keys + (k - 1), keys + m, std::greater<K>());
  return keyValue<T>(keys[k - 1]);
}

// The bisect passes work on the bits of |x| as a signed integer of T's
// width (the sign bit cleared, so signed order is magnitude order and the
// x86-64 baseline, SSE2, vectorizes the compares, which it cannot for
// unsigned 32/64-bit ones). NaN and +-Inf are the values >= kInfKey.
template <typename T> struct SignedKeyOf;
template <> struct SignedKeyOf<float> { using type = int32_t; };
template <> struct SignedKeyOf<double> { using type = int64_t; };
template <> struct SignedKeyOf<Half> { using type = int16_t; };
template <> struct SignedKeyOf<BFloat16> { using type = int16_t; };
template <typename T> using SignedKey = typename SignedKeyOf<T>::type;

template <typename T>
inline SignedKey<T> signedMagnitude(T x) {
  KeyOf<T> bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return static_cast<SignedKey<T>>(bits & static_cast<KeyOf<T>>(~(KeyOf<T>(1) << (8 * sizeof(T) - 1))));
}

// The value of a finite magnitude key, exactly (keyValue, branch-free).
template <typename T>
inline double finiteMagnitude(SignedKey<T> key) {
  if constexpr (sizeof(T) == 8) {
    double v;
    std::memcpy(&v, &key, sizeof(v));
    return v;
  } else if constexpr (sizeof(T) == 4) {
    return static_cast<double>(bitsFloat(static_cast<uint32_t>(key)));
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return static_cast<double>(bitsFloat(static_cast<uint32_t>(key) << 16));
  } else {  // fp16: normal (rebias 15 -> 127) or subnormal (key * 2^-24), picked by bit masks
    const uint32_t k = static_cast<uint32_t>(key), subnormal = 0u - static_cast<uint32_t>(k < 0x400u);
    const uint32_t normalBits = (k << 13) + (112u << 23);
    const uint32_t subnormalBits = floatBits(static_cast<float>(static_cast<int32_t>(k)) * 5.9604644775390625e-8f);
    return static_cast<double>(bitsFloat((subnormalBits & subnormal) | (normalBits & ~subnormal)));
  }
}

// One worker's statistics, kept per lane of the fixed-order sum so the
// loops over lanes carry no dependence from one element to the next.
template <typename T>
struct LaneStats {
  using S = SignedKey<T>;
  static constexpr S kInf = static_cast<S>(kInfKey<T>);
  static constexpr size_t kFlushChunks = 4096;  // lane counts stay far below 2^32
  S max[kSumLanes], min[kSumLanes];
  uint32_t nonFinite[kSumLanes], nonzero[kSumLanes];
  MagnitudeStats total;

  LaneStats() {
    for (size_t l = 0; l < kSumLanes; l++) max[l] = 0, min[l] = kInf, nonFinite[l] = nonzero[l] = 0;
  }
  void flush() {
    for (size_t l = 0; l < kSumLanes; l++) {
      total.nonFinite += nonFinite[l];
      total.nonzero += nonzero[l];
      nonFinite[l] = nonzero[l] = 0;
    }
  }
  MagnitudeStats finish() {
    flush();
    S mx = 0, mn = kInf;
    for (size_t l = 0; l < kSumLanes; l++) mx = std::max(mx, max[l]), mn = std::min(mn, min[l]);
    total.maxKey = static_cast<uint64_t>(mx);
    if (mn != kInf) total.minKey = static_cast<uint64_t>(mn);
    return total;
  }

  // Chunk c of x (n values): its statistics, and its fixed-order sum
  // (threshold_bisect.h's chunkSum of the finite |x|, non-finite as +0).
  double chunk(const T* x, size_t n, size_t c) {
    double sum[kSumLanes] = {};
    for (size_t j = 0; j < kSumPerLane; j++) {
      const size_t row = c * kSumChunk + j * kSumLanes;
      if (row >= n) break;
      const T* xs = x + row;
      const size_t count = std::min(kSumLanes, n - row);
      // No control flow, so the loop vectorizes. Non-finite keys are masked
      // to +0 (adds nothing, never max or min) by an AND: a select there would
      // be sunk below the conversion to double, which may trap, and stop it.
      for (size_t l = 0; l < count; l++) {
        const S key = signedMagnitude(xs[l]);
        const S finite = static_cast<S>(key & static_cast<S>(-static_cast<S>(key < kInf)));
        sum[l] += finiteMagnitude<T>(finite);
        max[l] = std::max(max[l], finite);
        min[l] = std::min(min[l], finite != 0 ? finite : kInf);
        nonFinite[l] += key >= kInf;
        nonzero[l] += finite != 0;
      }
    }
    if ((c + 1) % kFlushChunks == 0) flush();
    for (size_t s = kSumLanes / 2; s > 0; s /= 2)
      for (size_t l = 0; l < s; l++) sum[l] += sum[l + s];
    return sum[0];
  }
};

template <typename T>
MagnitudeStats magnitudeStats(CpuContext* ctx, const T* x, size_t n, dctResult_t* res) {
  const size_t chunks = sumChunks(n), grain = kMinPerWorker / kSumChunk;
  if ((*res = ctx->thresholdScratch.reserve(chunks * sizeof(double))) != dctSuccess) return {};
  double* partials = ctx->thresholdScratch.as<double>();
  MagnitudeStats stats[kMaxWorkers];
  ctx->pool.parallelFor(chunks, grain, [&](size_t b, size_t e, int w) {
    LaneStats<T> lanes;
    for (size_t c = b; c < e; c++) partials[c] = lanes.chunk(x, n, c);
    stats[w] = lanes.finish();
  });
  MagnitudeStats all;
  for (int w = 0, workers = ctx->pool.workersFor(chunks, grain); w < workers; w++) {
    all.nonFinite += stats[w].nonFinite;
    all.nonzero += stats[w].nonzero;
    all.maxKey = std::max(all.maxKey, stats[w].maxKey);
    all.minKey = std::min(all.minKey, stats[w].minKey);
  }
  all.sum = foldSums(partials, chunks);
  return all;
}

// Entries of x[begin, end) (fewer than 2^32) whose signed magnitude is >= key.
template <typename T>
inline uint64_t countBlock(const T* x, size_t begin, size_t end, SignedKey<T> key) {
  size_t i = begin;
  uint64_t c = 0;
#if defined(__SSE2__)
  if constexpr (sizeof(T) == 8) {  // SSE2 has no 64-bit integer compare: compare the values
    double tau;                    // (the key's value; not-less-than also takes NaN)
    std::memcpy(&tau, &key, sizeof(tau));
    const __m128d vtau = _mm_set1_pd(tau), absMask = _mm_castsi128_pd(_mm_set1_epi64x(0x7fffffffffffffffll));
    __m128i lanes = _mm_setzero_si128();
    const double* d = reinterpret_cast<const double*>(x);
    for (; i + 2 <= end; i += 2)
      lanes = _mm_sub_epi64(lanes, _mm_castpd_si128(_mm_cmpnlt_pd(_mm_and_pd(_mm_loadu_pd(d + i), absMask), vtau)));
    uint64_t both[2];
    _mm_storeu_si128(reinterpret_cast<__m128i*>(both), lanes);
    c = both[0] + both[1];
  }
#endif
  uint32_t block = 0;
  for (; i < end; i++) block += signedMagnitude(x[i]) >= key;
  return c + block;
}

// Entries whose magnitude key is >= key: !(|x| < tau) for tau = the key's
// value, NaN and +-Inf included (their keys exceed every finite one).
template <typename T>
uint64_t countAtLeast(CpuContext* ctx, const T* x, size_t n, KeyOf<T> key) {
  using S = SignedKey<T>;
  constexpr size_t kBlock = size_t(1) << 16;  // 32-bit counts per block: vector lanes of one width
  const S threshold = static_cast<S>(key);
  uint64_t counts[kMaxWorkers];
  ctx->pool.parallelFor(n, kMinPerWorker, [&](size_t b, size_t e, int w) {
    uint64_t c = 0;
    for (size_t i = b; i < e; i += kBlock) {
      const size_t end = std::min(e, i + kBlock);
      c += countBlock(x, i, end, threshold);
    }
    counts[w] = c;
  });
  uint64_t total = 0;
  for (int w = 0, workers = ctx->pool.workersFor(n, kMinPerWorker); w < workers; w++) total += counts[w];
  return total;
}

template <typename T>
double bisect(CpuContext* ctx, ThresholdArgs& a, dctResult_t* res) {
  const T* x = static_cast<const T*>(a.data);
  const MagnitudeStats s = magnitudeStats(ctx, x, a.n, res);
  if (*res != dctSuccess) return 0;
  const int budget = a.maxPasses > 0 ? a.maxPasses : kBisectMaxPasses;
  const BisectResult r = bisectThreshold<T>(s, a.n, a.density, budget,
                                            [&](KeyOf<T> key) { return countAtLeast(ctx, x, a.n, key); });
  a.passes = r.passes;
  return r.tau;
}

}  // namespace

dctResult_t cpuThreshold(KernelContext* kc, ThresholdArgs* args, double* tau, void*) {
  CpuContext* ctx = cpuCtx(kc);
  args->passes = 0;
  if (args->n == 0) {
    *tau = std::numeric_limits<double>::infinity();
    return dctSuccess;
  }
  double t = 0;
  dctResult_t res = dctSuccess, scratch = dctSuccess;
  if (args->addend == nullptr) {
    res = dispatchAnyValue(args->dtype, [&]<typename T>() {
      const T* x = static_cast<const T*>(args->data);
      t = args->method == dctThresholdBisect ? bisect<T>(ctx, *args, &scratch)
                                             : estimate<T>(ctx, *args, [x](size_t i) { return x[i]; }, &scratch);
    });
  } else if (args->method == dctThresholdBisect || (args->dtype != dctFloat32 && args->dtype != dctFloat64)) {
    return dctInvalidArgument;
  } else {
    dctResult_t inner = dctSuccess;
    res = dispatchTypes(args->dtype, 4, [&]<typename T, typename>() {
      inner = dispatchAnyValue(args->addendT(), [&]<typename B>() {
        const T* x = static_cast<const T*>(args->data);
        const B* y = static_cast<const B*>(args->addend);
        t = estimate<T>(ctx, *args, [x, y](size_t i) { return x[i] + static_cast<T>(Value<B>::load(y[i])); },
                        &scratch);
      });
    });
    if (res == dctSuccess) res = inner;
  }
  // tau must stay positive, or exact zeros would be "selected" and sent.
  double smallest = args->dtype == dctFloat64 ? std::numeric_limits<double>::denorm_min()
                                              : std::numeric_limits<float>::denorm_min();
  *tau = t > smallest ? t : smallest;
  return res != dctSuccess ? res : scratch;
}

}  // namespace dct
