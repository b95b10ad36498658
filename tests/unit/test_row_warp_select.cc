// The CUDA twin's warp-per-row top-K (kernels/row_warp_select.h) run on the
// host, and its one-thread-per-row top-K of short rows
// (kernels/row_lane_select.h): 32 threads play a warp's lanes (a barrier per reduction or ballot),
// each holding columns 32 i + lane as the kernel does, against the CPU
// twin's rowSelect (masks, counts, non-finite) and kthLargest (every cut
// search), for every row length class the kernels dispatch, odd ones,
// NaN/Inf, ties and all-zero rows.
#include <doctest/doctest.h>

#include <barrier>
#include <cmath>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "base/half_types.h"
#include "kernels/kernels.h"
#include "kernels/row_keys.h"
#include "kernels/row_lane_select.h"
#include "kernels/row_select_scalar.h"
#include "kernels/row_thread_select.h"
#include "kernels/row_warp_select.h"

using namespace dct;

namespace {

// The warp's shared state: one slot per lane, two barrier phases per
// exchange (written, then read by all before the next write).
struct Warp {
  std::barrier<> sync{32};
  uint64_t slot[32];
  template <typename Op>
  uint64_t exchange(unsigned lane, uint64_t v, Op op) {
    slot[lane] = v;
    sync.arrive_and_wait();
    uint64_t r = slot[0];
    for (unsigned l = 1; l < 32; l++) r = op(r, slot[l], l);
    sync.arrive_and_wait();
    return r;
  }
};

struct HostLanes {
  Warp* warp;
  unsigned l;
  unsigned lane() const { return l; }
  uint32_t lanesBelow() const { return (1u << l) - 1u; }
  uint32_t ballot(bool p) {
    return static_cast<uint32_t>(
        warp->exchange(l, p, [](uint64_t r, uint64_t v, unsigned at) { return r | v << at; }));
  }
  uint32_t sum(uint32_t x) {
    return static_cast<uint32_t>(warp->exchange(l, x, [](uint64_t r, uint64_t v, unsigned) { return r + v; }));
  }
  template <typename U>
  U max(U x) {
    return static_cast<U>(warp->exchange(l, x, [](uint64_t r, uint64_t v, unsigned) { return v > r ? v : r; }));
  }
};

template <typename T>
using Shifted = std::conditional_t<sizeof(RowKey<T>) == 8, uint64_t, uint32_t>;

// Rows of D entries: normals with a few NaN/Inf (class 0), a few magnitudes
// with -0/+0 ties (1), mostly non-finite (2), all zeros of both signs (3).
template <typename T>
std::vector<T> warpTestRows(size_t R, size_t D, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  const double levels[] = {0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.0};
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  std::vector<T> v(R * D);
  for (size_t i = 0; i < v.size(); i++) {
    double x = normal(rng);
    switch ((i / D) % 4) {
      case 0: if (rng() % 50 == 0) x = rng() % 2 ? nan : -inf; break;
      case 1: x = levels[rng() % 7]; break;
      case 2: if (rng() % 3) x = rng() % 3 == 0 ? -nan : (rng() % 2 ? inf : -inf); break;
      default: x = rng() % 2 ? 0.0 : -0.0; break;
    }
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) v[i] = static_cast<T>(x);
    else v[i] = Value<T>::store(static_cast<float>(x));
  }
  return v;
}

dctDataType_t dtypeOf(float) { return dctFloat32; }
dctDataType_t dtypeOf(double) { return dctFloat64; }
dctDataType_t dtypeOf(Half) { return dctFloat16; }
dctDataType_t dtypeOf(BFloat16) { return dctBFloat16; }

// The CPU twin's rowSelect of the rows (top-K, 1 <= k < D): the reference.
struct CpuSelection {
  std::vector<uint32_t> mask, counts;
  size_t nonFinite;
};
template <typename T>
CpuSelection cpuSelect(const std::vector<T>& rows, size_t R, size_t D, size_t k) {
  CpuSelection s{std::vector<uint32_t>(R * maskWords(D)), std::vector<uint32_t>(R), 0};
  const KernelOps& ops = cpuKernelOps();
  KernelContext* ctx = nullptr;
  REQUIRE(ops.createContext(&ctx) == dctSuccess);
  RowSelectArgs a{rows.data(), R, D, dtypeOf(T{}), k, 0, s.mask.data(), s.counts.data()};
  REQUIRE(ops.rowSelect(ctx, &a, nullptr) == dctSuccess);
  ops.destroyContext(ctx);
  s.nonFinite = a.nonFinite;
  return s;
}

// Each row through the warp code with ITEMS items per lane (1 <= k < D).
template <typename T, int ITEMS>
void compareRows(const std::vector<T>& rows, size_t R, size_t D, size_t k) {
  using U = Shifted<T>;
  CAPTURE(D);
  CAPTURE(k);
  CAPTURE(ITEMS);
  CAPTURE(sizeof(T));
  const size_t W = maskWords(D);
  const CpuSelection cpu = cpuSelect(rows, R, D, k);
  std::vector<uint32_t> mask(R * W, 0xdeadbeefu), counts(R), nonFinite(R);
  std::vector<Kth<U>> byRounds(R), bySorted(R), byBits(R);
  Warp warp;
  std::vector<std::thread> lanes;
  for (unsigned l = 0; l < 32; l++)
    lanes.emplace_back([&, l] {
      HostLanes h{&warp, l};
      for (size_t r = 0; r < R; r++) {
        U s[ITEMS];
        for (int i = 0; i < ITEMS; i++) {
          const size_t j = size_t(i) * 32 + l;
          s[i] = j < D ? U(rowKey(rows[r * D + j])) + 1 : U(0);
        }
        const WarpCut<U> cut = warpRowCut(s, uint32_t(k), U(kInfKey<T>), h);
        const uint32_t kept = warpMarkTopK(s, cut, uint32_t(k), W, mask.data() + r * W, h);
        const Kth<U> rounds = kthByRounds(s, uint32_t(k), h), sorted = kthBySortedRounds(s, uint32_t(k), h);
        const Kth<U> bits = kthByBits(s, uint32_t(k), shiftedKeyBits(U(kInfKey<T>)), h);
        if (l == 0) {
          counts[r] = kept, nonFinite[r] = cut.nonFinite;
          byRounds[r] = rounds, bySorted[r] = sorted, byBits[r] = bits;
        }
      }
    });
  for (auto& t : lanes) t.join();

  size_t nfTotal = 0;
  std::vector<RowKey<T>> keys(D), scratch;
  for (size_t r = 0; r < R; r++) {
    CAPTURE(r);
    for (size_t j = 0; j < D; j++) keys[j] = rowKey(rows[r * D + j]);
    const RowKey<T> kth = kthLargest(keys.data(), D, k, scratch);
    uint32_t above = 0, ties = 0;
    for (size_t j = 0; j < D; j++) above += keys[j] > kth, ties += keys[j] == kth;
    for (const Kth<U>& found : {byRounds[r], bySorted[r], byBits[r]}) {
      CHECK(found.key == U(kth) + 1);
      CHECK(found.above == above);
      CHECK(found.ties == ties);
    }
    nfTotal += nonFinite[r];
  }
  CHECK(mask == cpu.mask);
  CHECK(counts == cpu.counts);
  CHECK(nfTotal == cpu.nonFinite);
}

// Each row through the one-thread-per-row code (D <= N <= 32, 1 <= k < D).
template <typename T, int N>
void compareLaneRows(const std::vector<T>& rows, size_t R, size_t D, size_t k) {
  using U = Shifted<T>;
  CAPTURE(D);
  CAPTURE(k);
  CAPTURE(N);
  CAPTURE(sizeof(T));
  const CpuSelection cpu = cpuSelect(rows, R, D, k);
  size_t nfTotal = 0;
  for (size_t r = 0; r < R; r++) {
    CAPTURE(r);
    U s[N];
    for (int j = 0; j < N; j++) s[j] = size_t(j) < D ? U(rowKey(rows[r * D + j])) + 1 : U(0);
    uint32_t kept = 0, nf = 0;
    CHECK(laneTopKWord(s, uint32_t(k), U(kInfKey<T>), &kept, &nf) == cpu.mask[r]);
    CHECK(kept == cpu.counts[r]);
    nfTotal += nf;
  }
  CHECK(nfTotal == cpu.nonFinite);
}

// Each row through the one-thread-per-row top-K of rows up to 256 entries
// (1 <= k <= KMAX, k < D).
template <typename T, int KMAX>
void compareThreadRows(const std::vector<T>& rows, size_t R, size_t D, size_t k) {
  using U = Shifted<T>;
  CAPTURE(D);
  CAPTURE(k);
  CAPTURE(KMAX);
  CAPTURE(sizeof(T));
  const size_t W = maskWords(D);
  const CpuSelection cpu = cpuSelect(rows, R, D, k);
  std::vector<uint32_t> mask(R * W, 0xdeadbeefu), counts(R);
  size_t nfTotal = 0;
  for (size_t r = 0; r < R; r++) {
    const auto key = [&](uint32_t j) { return U(rowKey(rows[r * D + j])) + 1; };
    uint32_t nf = 0;
    counts[r] = threadRowTopK<KMAX>(key, uint32_t(D), uint32_t(k), U(kInfKey<T>), mask.data() + r * W, &nf);
    nfTotal += nf;
  }
  CHECK(mask == cpu.mask);
  CHECK(counts == cpu.counts);
  CHECK(nfTotal == cpu.nonFinite);
}

// The ITEMS the kernels pick for D (rows of D <= 32 take a thread each
// there, but the warp code is tested on them too), and 32 on a row mostly
// past D (ballots of empty tiles).
template <typename T>
void compareBoth(size_t R, size_t D, size_t k, uint64_t seed) {
  const auto rows = warpTestRows<T>(R, D, seed);
  if (D <= 32) compareRows<T, 1>(rows, R, D, k);
  else if (D <= 64) compareRows<T, 2>(rows, R, D, k);
  else if (D <= 128) compareRows<T, 4>(rows, R, D, k);
  else if (D <= 256) compareRows<T, 8>(rows, R, D, k);
  else if (D <= 512) compareRows<T, 16>(rows, R, D, k);
  if (D > 512 || D == 33) compareRows<T, 32>(rows, R, D, k);
}

}  // namespace

TEST_CASE("The warp-per-row top-K on host lanes matches the CPU twin bit for bit") {
  uint64_t seed = 77;
  for (size_t D : {2, 3, 31, 32, 33, 64, 65, 256, 257, 1000, 1024}) {
    const size_t k5 = static_cast<size_t>(std::ceil(0.05 * static_cast<double>(D)));
    for (size_t k : {size_t(1), size_t(2), k5, D / 2, D - 1}) {
      if (k < 1 || k >= D) continue;
      compareBoth<float>(8, D, k, seed++);
      compareBoth<double>(4, D, k, seed++);
      compareBoth<Half>(4, D, k, seed++);
      compareBoth<BFloat16>(4, D, k, seed++);
    }
  }
}

TEST_CASE("The one-thread-per-row top-K of short rows matches the CPU twin bit for bit") {
  uint64_t seed = 991;
  for (size_t D = 2; D <= 32; D++)
    for (size_t k = 1; k < D; k++) {
      const auto f = warpTestRows<float>(16, D, seed++);
      const auto d = warpTestRows<double>(8, D, seed++);
      const auto h = warpTestRows<Half>(8, D, seed++);
      const auto b = warpTestRows<BFloat16>(8, D, seed++);
      // The N the kernel picks for D, and 32.
      if (D <= 4) compareLaneRows<float, 4>(f, 16, D, k), compareLaneRows<Half, 4>(h, 8, D, k);
      else if (D <= 8) compareLaneRows<float, 8>(f, 16, D, k), compareLaneRows<double, 8>(d, 8, D, k);
      else if (D <= 16) compareLaneRows<float, 16>(f, 16, D, k), compareLaneRows<BFloat16, 16>(b, 8, D, k);
      compareLaneRows<float, 32>(f, 16, D, k);
      compareLaneRows<double, 32>(d, 8, D, k);
      compareLaneRows<Half, 32>(h, 8, D, k);
      compareLaneRows<BFloat16, 32>(b, 8, D, k);
    }
}

TEST_CASE("The one-thread-per-row top-K of rows up to 256 entries matches the CPU twin bit for bit") {
  uint64_t seed = 4242;
  for (size_t D : {33, 47, 64, 65, 100, 128, 129, 200, 255, 256})
    for (size_t k : {1, 2, 3, 4, 5, 8, 9, 13, 16}) {
      const auto f = warpTestRows<float>(24, D, seed++);
      const auto d = warpTestRows<double>(8, D, seed++);
      const auto h = warpTestRows<Half>(8, D, seed++);
      const auto b = warpTestRows<BFloat16>(8, D, seed++);
      // The KMAX the kernel picks for k, and 16.
      if (k <= 4) compareThreadRows<float, 4>(f, 24, D, k);
      else if (k <= 8) compareThreadRows<float, 8>(f, 24, D, k);
      compareThreadRows<float, 16>(f, 24, D, k);
      compareThreadRows<double, 16>(d, 8, D, k);
      compareThreadRows<Half, 16>(h, 8, D, k);
      compareThreadRows<BFloat16, 16>(b, 8, D, k);
    }
}
