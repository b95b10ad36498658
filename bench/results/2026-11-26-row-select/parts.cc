// Where the AVX2 top-K body spends its time, one thread, fp32 rows in L2
// (2^20 elements of kernel_perf's heavy-tailed values, K = 5%): the whole
// body, then its parts alone (column keys with the 8x8 transposes, the
// network, the per-row mask pass), in ns per element. The network alone
// reruns one group's columns, so it is timed from L1.
//   g++ -O2 -std=c++20 -Isrc -Iinclude -Ibuild-cpu/generated bench/results/2026-11-26-row-select/parts.cc \
//     -o /tmp/parts && /tmp/parts
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/row_topk_avx2.h"

using namespace dct;

namespace {

template <typename F>
double median(F&& f) {
  std::vector<double> t;
  for (int i = 0; i < 15; i++) {
    const auto start = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main() {
  if (!cpuHasAvx2()) return 1;
  const size_t n = size_t(1) << 20;
  std::vector<float> x(n);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (auto& v : x) v = normal(rng) * std::exp(normal(rng));
  alignas(32) static __m256i cols[kLaneColumns], best[Avx2Keys32::kMaxK];
  for (size_t d : {64, 256}) {
    const size_t R = n / d, k = static_cast<size_t>(std::ceil(0.05 * static_cast<double>(d) - 1e-9));
    std::vector<uint32_t> mask(R * maskWords(d)), counts(R);
    const float* p[8];
    const double all = median([&] { topKRowsAvx2(x.data(), R, d, k, mask.data(), counts.data()); });
    const double keys = median([&] {
      for (size_t g = 0; g < R; g += 8) {
        for (size_t l = 0; l < 8; l++) p[l] = x.data() + (g + l) * d;
        columnKeysAvx2<Avx2Keys32>(p, 0, d, cols, nullptr);
      }
    });
    const NetworkAvx2 network = NetworksAvx2<Avx2Keys32, std::make_index_sequence<Avx2Keys32::kMaxK>>::of[k - 1];
    const double net = median([&] {
      for (size_t g = 0; g < R; g += 8) network(cols, d, best);
    });
    AboveAvx2<Avx2Keys32> above{1000};
    const double marks = median([&] {
      for (size_t r = 0; r < R; r++) rowWordsAvx2(x.data() + r * d, d, mask.data() + r * maskWords(d), above);
    });
    auto ns = [&](double s) { return s * 1e9 / static_cast<double>(n); };
    std::printf("L %zu k %zu: body %.3f ns/element; column keys %.3f, network %.3f, mask pass %.3f\n", d, k, ns(all),
                ns(keys), ns(net), ns(marks));
  }
  return 0;
}
