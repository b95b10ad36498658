// The fused select's inner loop on its own, one core: SSE2 vs AVX2, plain vs
// streamed (non-temporal) stores of the new residual, against an in-place
// accumulate (the same 12 bytes per element). Buffers as the CPU twin maps
// them (2 MiB aligned, huge pages). Evidence for src/kernels/cpu_select_simd.h;
// the library's own loops are tested against the reference in test_select.
//   g++ -O2 -std=c++20 select_bodies.cc -o select_bodies && ./select_bodies
#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace {

constexpr size_t kN = size_t(1) << 24, kBlock = 2048;

float* mapFloats(size_t n) {
  const size_t huge = size_t(1) << 21, bytes = (n * 4 + huge - 1) / huge * huge;
  char* raw = static_cast<char*>(mmap(nullptr, bytes + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (raw == MAP_FAILED) return nullptr;
  char* p = raw + (huge - reinterpret_cast<uintptr_t>(raw) % huge) % huge;
  madvise(p, bytes, MADV_HUGEPAGE);
  return reinterpret_cast<float*>(p);
}

size_t emit(unsigned mask, size_t base, const float* lanes, uint32_t* idx, float* val, size_t m) {
  for (; mask; mask &= mask - 1, m++) {
    idx[m] = static_cast<uint32_t>(base + __builtin_ctz(mask));
    val[m] = lanes[__builtin_ctz(mask)];
  }
  return m;
}

template <bool kStream>
size_t sse2(const float* g, const float* in, float* r, size_t b, size_t e, float tau, uint32_t* idx, float* val) {
  const __m128 abs = _mm_castsi128_ps(_mm_set1_epi32(0x7fffffff)), t = _mm_set1_ps(tau);
  size_t m = 0;
  for (size_t i = b; i < e; i += 8) {
    const __m128 a0 = _mm_add_ps(_mm_loadu_ps(in + i), _mm_loadu_ps(g + i));
    const __m128 a1 = _mm_add_ps(_mm_loadu_ps(in + i + 4), _mm_loadu_ps(g + i + 4));
    const __m128 t0 = _mm_cmpnlt_ps(_mm_and_ps(a0, abs), t), t1 = _mm_cmpnlt_ps(_mm_and_ps(a1, abs), t);
    if constexpr (kStream) {
      _mm_stream_ps(r + i, _mm_andnot_ps(t0, a0));
      _mm_stream_ps(r + i + 4, _mm_andnot_ps(t1, a1));
    } else {
      _mm_storeu_ps(r + i, _mm_andnot_ps(t0, a0));
      _mm_storeu_ps(r + i + 4, _mm_andnot_ps(t1, a1));
    }
    if (const unsigned mask = _mm_movemask_ps(t0) | (_mm_movemask_ps(t1) << 4)) {
      alignas(16) float lanes[8];
      _mm_store_ps(lanes, a0);
      _mm_store_ps(lanes + 4, a1);
      m = emit(mask, i, lanes, idx, val, m);
    }
  }
  return m;
}

template <bool kStream>
__attribute__((target("avx2"))) size_t avx2(const float* g, const float* in, float* r, size_t b, size_t e, float tau,
                                            uint32_t* idx, float* val) {
  const __m256 abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)), t = _mm256_set1_ps(tau);
  size_t m = 0;
  for (size_t i = b; i < e; i += 16) {
    const __m256 a0 = _mm256_add_ps(_mm256_loadu_ps(in + i), _mm256_loadu_ps(g + i));
    const __m256 a1 = _mm256_add_ps(_mm256_loadu_ps(in + i + 8), _mm256_loadu_ps(g + i + 8));
    const __m256 t0 = _mm256_cmp_ps(_mm256_and_ps(a0, abs), t, _CMP_NLT_UQ);
    const __m256 t1 = _mm256_cmp_ps(_mm256_and_ps(a1, abs), t, _CMP_NLT_UQ);
    if constexpr (kStream) {
      _mm256_stream_ps(r + i, _mm256_andnot_ps(t0, a0));
      _mm256_stream_ps(r + i + 8, _mm256_andnot_ps(t1, a1));
    } else {
      _mm256_storeu_ps(r + i, _mm256_andnot_ps(t0, a0));
      _mm256_storeu_ps(r + i + 8, _mm256_andnot_ps(t1, a1));
    }
    if (const unsigned mask = _mm256_movemask_ps(t0) | (_mm256_movemask_ps(t1) << 8)) {
      alignas(32) float lanes[16];
      _mm256_store_ps(lanes, a0);
      _mm256_store_ps(lanes + 8, a1);
      m = emit(mask, i, lanes, idx, val, m);
    }
  }
  return m;
}

__attribute__((target("avx2"))) size_t accumulate(const float* g, const float*, float* r, size_t b, size_t e, float,
                                                  uint32_t*, float*) {
  for (size_t i = b; i < e; i += 8) _mm256_storeu_ps(r + i, _mm256_add_ps(_mm256_loadu_ps(r + i), _mm256_loadu_ps(g + i)));
  return 0;
}

}  // namespace

int main() {
  float *grad = mapFloats(kN), *old = mapFloats(kN), *out = mapFloats(kN);
  if (!grad || !old || !out) return 1;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (size_t i = 0; i < kN; i++) grad[i] = normal(rng), old[i] = 0.1f * normal(rng);
  std::vector<float> mag(kN);
  for (size_t i = 0; i < kN; i++) mag[i] = std::fabs(grad[i] + old[i]);
  std::nth_element(mag.begin(), mag.begin() + kN / 100, mag.end(), std::greater<float>());
  const float tau = mag[kN / 100];  // density 1%
  using Body = size_t (*)(const float*, const float*, float*, size_t, size_t, float, uint32_t*, float*);
  const struct { const char* name; Body body; bool inPlace; } runs[] = {
      {"sse2", sse2<false>, false}, {"sse2-streamed", sse2<true>, false}, {"avx2", avx2<false>, false},
      {"avx2-streamed", avx2<true>, false}, {"accumulate (in place)", accumulate, true}};
  std::vector<uint32_t> idx(kBlock), outIdx(kN / 20);
  std::vector<float> val(kBlock), outVal(kN / 20);
  std::printf("# 2^24 fp32, density 1%%, one core; median of 9 runs (interleaved)\n");
  std::vector<std::vector<double>> ms(std::size(runs));
  for (int rep = 0; rep < 9; rep++)
    for (size_t k = 0; k < std::size(runs); k++) {
      std::memcpy(out, old, kN * 4);
      const float* in = runs[k].inPlace ? out : old;
      const auto t0 = std::chrono::steady_clock::now();
      size_t total = 0;
      for (size_t b = 0; b < kN; b += kBlock) {
        const size_t m = runs[k].body(grad, in, out, b, b + kBlock, tau, idx.data(), val.data());
        std::memcpy(outIdx.data() + total, idx.data(), m * 4);
        std::memcpy(outVal.data() + total, val.data(), m * 4);
        total += m;
      }
      _mm_sfence();
      ms[k].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  for (size_t k = 0; k < std::size(runs); k++) {
    std::sort(ms[k].begin(), ms[k].end());
    std::printf("%-22s %6.2f ms  (min %.2f, max %.2f)  %5.1f GB/s at 12 B/element\n", runs[k].name, ms[k][4],
                ms[k][0], ms[k][8], 12.0 * kN / ms[k][4] / 1e6);
  }
}
