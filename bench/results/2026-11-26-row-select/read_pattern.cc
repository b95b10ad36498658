// Reading rows the way the row-select lanes do, one core: 64 MiB of fp32 in
// groups of 8 rows, a block of 8 columns of each row in turn, against a
// plain sequential read; without prefetch, and with each block prefetching
// its share of the group ahead in address order into L1 (T0) or L2 (T1).
// Evidence for the prefetch in src/kernels/row_lanes.h.
//   g++ -O2 -std=c++20 read_pattern.cc -o /tmp/read_pattern && /tmp/read_pattern
#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

float* mapFloats(size_t n) {
  const size_t huge = size_t(1) << 21, bytes = (n * 4 + huge - 1) / huge * huge;
  char* raw = static_cast<char*>(mmap(nullptr, bytes + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (raw == MAP_FAILED) return nullptr;
  char* p = raw + (huge - reinterpret_cast<uintptr_t>(raw) % huge) % huge;
  madvise(p, bytes, MADV_HUGEPAGE);
  return reinterpret_cast<float*>(p);
}

template <typename F>
double median(F&& f) {
  std::vector<double> t;
  for (int i = 0; i < 9; i++) {
    const auto a = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

__attribute__((target("avx2"), noinline)) int sequential(const float* p, size_t n) {
  __m256i a = _mm256_setzero_si256(), b = a;
  for (size_t i = 0; i < n; i += 16) {
    a = _mm256_add_epi32(a, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)));
    b = _mm256_add_epi32(b, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 8)));
  }
  return _mm256_extract_epi32(_mm256_add_epi32(a, b), 0);
}

// hint: 0 none, 1 T0, 2 T1; `ahead` groups.
__attribute__((target("avx2"), noinline)) int lanes(const float* p, size_t n, size_t d, int hint, size_t ahead) {
  __m256i a = _mm256_setzero_si256();
  for (size_t g = 0; g < n; g += 8 * d) {
    const char* next = reinterpret_cast<const char*>(p + g + ahead * 8 * d);
    for (size_t j = 0; j < d; j += 8) {
      for (size_t at = 0; at < 256; at += 64) {  // this block's 256 bytes of the group ahead
        if (hint == 1) _mm_prefetch(next + j / 8 * 256 + at, _MM_HINT_T0);
        if (hint == 2) _mm_prefetch(next + j / 8 * 256 + at, _MM_HINT_T1);
      }
      for (size_t l = 0; l < 8; l++)
        a = _mm256_add_epi32(a, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + g + l * d + j)));
    }
  }
  return _mm256_extract_epi32(a, 0);
}

}  // namespace

int main() {
  const size_t n = size_t(1) << 24;
  float* p = mapFloats(n);
  if (!p) return 1;
  for (size_t i = 0; i < n; i++) p[i] = static_cast<float>(i);
  volatile int sink = 0;
  auto gbs = [&](double s) { return static_cast<double>(n) * 4 / s / 1e9; };
  std::printf("sequential read: %.1f GB/s\n", gbs(median([&] { sink = sink + sequential(p, n); })));
  std::printf("%6s %8s %8s %8s\n", "D", "none", "T0", "T1");
  for (size_t d : {64, 128, 256, 512, 1024}) {
    const size_t ahead = std::max<size_t>(1, 8192 / (8 * d * 4));  // about 8 KiB, as the library
    std::printf("%6zu", d);
    for (int hint = 0; hint < 3; hint++)
      std::printf(" %8.1f", gbs(median([&] { sink = sink + lanes(p, n, d, hint, ahead); })));
    std::printf("  GB/s\n");
  }
  return 0;
}
