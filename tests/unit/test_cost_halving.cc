// The cost model's recursive halving for the split plans (SplitExchange):
// its latency terms (log2 p2 rounds, two folds past a power of two) against
// the pairwise exchange's P - 1, the fill growth of each round's message
// (uniform positions, raw COO, dense past the break-even), the second
// phase's allgatherv priced as Open MPI runs it, and the target:
// global top-k by halving >= 10x dense at 1024 ranks, 1%, 64 MiB, 1.25 GB/s,
// 30 us.
#include <doctest/doctest.h>

#include <vector>

#include "core/cost_model.h"

using namespace dct;

namespace {

constexpr double kFast = 1e12;

// The reduce-scatter's latency alone (an infinitely fast link and merge).
double scatterLatency(int ranks, SplitExchange x, double alpha) {
  std::vector<uint64_t> nnz(ranks, 10);
  CostInputs in{ranks, 1000, 4, 4, nnz.data(), 4};
  double wire = -1;
  const double us = splitScatterUs(CostParams{alpha, kFast, kFast, kFast, kFast}, in, x, &wire);
  CHECK(wire == doctest::Approx(us));
  return us;
}

// The halving's wire bytes alone: one byte per microsecond, no latency.
double halvingBytes(int ranks, size_t count, uint64_t each) {
  std::vector<uint64_t> nnz(ranks, each);
  CostInputs in{ranks, count, 4, 4, nnz.data(), 4};
  double wire = 0;
  splitScatterUs(CostParams{0, 1e-3, kFast, kFast, kFast}, in, SplitExchange::Halving, &wire);
  return wire;
}

}  // namespace

TEST_CASE("halving: one latency per round and two for the folds; pairwise: P - 1 and the sizes' alltoall") {
  const SplitExchange h = SplitExchange::Halving, pw = SplitExchange::Pairwise;
  CHECK(scatterLatency(1, h, 10) == doctest::Approx(0));
  CHECK(scatterLatency(2, h, 10) == doctest::Approx(10));
  CHECK(scatterLatency(4, h, 10) == doctest::Approx(20));
  CHECK(scatterLatency(3, h, 10) == doctest::Approx(30));   // 1 round + fold in + fold out
  CHECK(scatterLatency(5, h, 10) == doctest::Approx(40));   // 2 rounds + 2 folds
  CHECK(scatterLatency(1024, h, 10) == doctest::Approx(100));
  // Pairwise: P - 1 messages, then the sizes' alltoall and its vote (log2 P each).
  CHECK(scatterLatency(8, pw, 10) == doctest::Approx(10 * (7 + 2 * 3)));
  CHECK(scatterLatency(1024, pw, 10) == doctest::Approx(10 * (1023 + 2 * 10)));
}

TEST_CASE("halving: each round carries the half window's union, a header per range") {
  // 2 ranks: one round of half the tensor, k / 2 entries of 8 bytes, one range.
  CHECK(halvingBytes(2, 1000, 10) == doctest::Approx(10 / 2.0 * 8 + 8));
  // 4 ranks: round one as above over two ranges; round two a quarter of the
  // tensor holding the union of two ranks' entries (1 - 0.99^2 of it).
  const double second = 250 * (1 - 0.99 * 0.99) * 8 + 8;
  CHECK(halvingBytes(4, 1000, 10) == doctest::Approx(500 * 0.01 * 8 + 16 + second));
  // Three rounds of about k / 2 entries each (the window halves as the
  // ranks merged into it double), a little less as their entries overlap.
  const double one = halvingBytes(2, 100000, 5000), eight = halvingBytes(8, 100000, 5000);
  CHECK(eight > 2.5 * one);
  CHECK(eight < 3 * one);
}

TEST_CASE("halving: a window past the break-even travels dense") {
  // Every rank dense: each round's message is its half window's values.
  CHECK(halvingBytes(2, 1000, 1000) == doctest::Approx(500 * 4 + 8));
  CHECK(halvingBytes(4, 1000, 1000) == doctest::Approx((500 * 4 + 16) + (250 * 4 + 8)));
  // At the break-even and past it alike.
  CHECK(halvingBytes(2, 1000, 600) == doctest::Approx(halvingBytes(2, 1000, 1000)));
}

TEST_CASE("the ranges' allgatherv: Bruck's log2 P rounds for small blocks, the ring's P - 1 for large") {
  // Latency only: split's whole step at 1024 ranks. Pairwise scatter
  // (1023 + 20) plus the ranges (10 Bruck rounds + 20 for their sizes).
  std::vector<uint64_t> small(1024, 10), large(1024, 1000000);
  const CostParams latency{1, kFast, kFast, kFast, kFast};
  CostInputs a{1024, 1 << 20, 4, 4, small.data(), 4}, b{1024, 1 << 30, 4, 4, large.data(), 4};
  CHECK(splitCostUs(latency, a) == doctest::Approx(1043 + 30));
  CHECK(splitCostUs(latency, b) == doctest::Approx(1043 + 1023 + 20));
  CHECK(globalTopkCostUs(latency, a, nullptr, SplitExchange::Halving) == doctest::Approx(10 + 30));
}

TEST_CASE("the issue's target: global top-k by halving >= 10x dense at 1024 ranks on 30 us links") {
  const size_t count = size_t(16) << 20;  // 64 MiB of fp32
  std::vector<uint64_t> nnz(1024, count / 100);
  const CostInputs in{1024, count, 4, 4, nnz.data(), 4};
  CostOverrides set;
  set.alphaUs = 30;
  set.linkGBps = 1.25;
  const CostParams p = costParams(set);
  const double dense = denseCostUs(p, in);
  const double halving = globalTopkCostUs(p, in, nullptr, SplitExchange::Halving);
  const double pairwise = globalTopkCostUs(p, in, nullptr, SplitExchange::Pairwise);
  CHECK(dense / halving >= 10);
  CHECK(halving < pairwise);
  CHECK(cheaperSplitExchange(p, in) == SplitExchange::Halving);
  // Both plans share the second phase: the exchange is priced alike.
  CHECK(pairwise - halving == doctest::Approx(splitScatterUs(p, in, SplitExchange::Pairwise) -
                                              splitScatterUs(p, in, SplitExchange::Halving)));
  CHECK(splitCostUs(p, in, nullptr, SplitExchange::Halving) < splitCostUs(p, in));
}

TEST_CASE("few ranks on 1 Gbit/s: pairwise's packed pieces win at 1%, halving's rounds at 0.1%") {
  CostOverrides set;
  set.alphaUs = 30;
  set.linkGBps = 0.125;
  const CostParams p = costParams(set);
  const size_t count = size_t(16) << 20;
  for (int ranks : {4, 8}) {
    CAPTURE(ranks);
    std::vector<uint64_t> one(ranks, count / 100), tenth(ranks, count / 1000);
    CHECK(cheaperSplitExchange(p, CostInputs{ranks, count, 4, 4, one.data(), 4}) == SplitExchange::Pairwise);
    CHECK(cheaperSplitExchange(p, CostInputs{ranks, count, 4, 4, tenth.data(), 4}) == SplitExchange::Halving);
  }
  std::vector<uint64_t> one(1, 10);
  CHECK(cheaperSplitExchange(p, CostInputs{1, 1000, 4, 4, one.data(), 4}) == SplitExchange::Pairwise);
}
