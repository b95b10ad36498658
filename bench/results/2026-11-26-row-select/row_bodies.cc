// The CPU twin's row-select bodies side by side, one thread: ns per element
// of the plain, SSE2 and AVX2 bodies (cpuRowSelectWith) per dtype, row
// length and k (k = 0: the threshold 3.0, about 10% kept), on rows in memory
// (64 MiB of fp32, 2 MiB aligned, huge pages as kernel_perf maps them) and
// in L2. Evidence for the bodies' kMaxK; the bodies are tested against the
// references in tests/unit/test_rows.cc. From the repository root, after
// building build-cpu:
//   g++ -O2 -std=c++20 -Isrc -Iinclude -Ibuild-cpu/generated \
//     bench/results/2026-11-26-row-select/row_bodies.cc build-cpu/src/libdct_internal.a \
//     $(pkg-config --libs hwloc) -lmpi -lpthread -o /tmp/row_bodies
//   DCT_NUM_THREADS=1 /tmp/row_bodies
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "base/half_types.h"
#include "base/mapped_memory.h"
#include "kernels/cpu_row_select.h"
#include "kernels/kernels.h"

using namespace dct;

namespace {

const char* kBodies[] = {"plain", "sse2", "avx2"};

template <typename T>
void fill(T* rows, size_t n) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (size_t i = 0; i < n; i++) {
    const float x = normal(rng) * std::exp(normal(rng));  // kernel_perf's heavy tails
    if constexpr (std::is_same_v<T, Half>) rows[i] = Value<Half>::store(x);
    else rows[i] = static_cast<T>(x);
  }
}

template <typename T>
void table(const char* type, dctDataType_t dtype, size_t n, KernelContext* ctx) {
  T* rows = static_cast<T*>(mapMemory(n * sizeof(T), size_t(1) << 21, true));
  fill(rows, n);
  for (size_t d : {64, 256, 1024}) {
    const size_t R = n / d;
    std::vector<uint32_t> mask(R * maskWords(d)), counts(R);
    for (size_t k : {0, 1, 4, 8, 13, 16, 24, 32, 33, 48, 64, 65}) {
      if (k >= d) continue;
      std::printf("%-5s %9zu %5zu %3zu", type, n, d, k);
      for (int body = 0; body < 3; body++) {
        RowSelectArgs a{rows, R, d, dtype, k, 3.0, mask.data(), counts.data()};
        std::vector<double> t;
        for (int rep = 0; rep < 7; rep++) {
          const auto start = std::chrono::steady_clock::now();
          if (cpuRowSelectWith(ctx, &a, static_cast<RowBody>(body)) != dctSuccess) break;
          t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        }
        if (t.empty()) {
          std::printf(" %8s", "-");
          continue;
        }
        std::sort(t.begin(), t.end());
        std::printf(" %8.3f", t[t.size() / 2] * 1e9 / static_cast<double>(R * d));
      }
      std::printf("\n");
    }
  }
  unmapMemory(rows, n * sizeof(T));
}

}  // namespace

int main() {
  KernelContext* ctx = nullptr;
  if (cpuKernelOps().createContext(&ctx) != dctSuccess) return 1;
  std::printf("# ns per element, median of 7; bodies: %s %s %s (- where this CPU lacks it)\n", kBodies[0], kBodies[1],
              kBodies[2]);
  std::printf("%-5s %9s %5s %3s %8s %8s %8s\n", "type", "n", "D", "k", "plain", "sse2", "avx2");
  for (size_t n : {size_t(1) << 24, size_t(1) << 18}) table<float>("fp32", dctFloat32, n, ctx);
  table<double>("fp64", dctFloat64, size_t(1) << 23, ctx);
  table<Half>("fp16", dctFloat16, size_t(1) << 25, ctx);
  cpuKernelOps().destroyContext(ctx);
  return 0;
}
