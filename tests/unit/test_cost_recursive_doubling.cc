// The cost model's recursive doubling: its latency terms (floor(log2 P)
// rounds, two folds past a power of two), the uniform-random fill growth of
// each round's largest message, the dense switch at the break-even, and
// where it undercuts the allgather plan.
#include <doctest/doctest.h>

#include <vector>

#include "core/cost_model.h"

using namespace dct;

namespace {

// Latency alpha only (an infinitely fast link and merge).
double latencyOnly(int ranks, double alpha) {
  std::vector<uint64_t> nnz(ranks, 10);
  CostInputs in{ranks, 1000, 4, 4, nnz.data()};
  double wire = -1;
  const double us = recursiveDoublingCostUs(CostParams{alpha, 1e12, 1e12, 1e12, 1e12}, in, &wire);
  CHECK(wire == doctest::Approx(us));
  return us;
}

// The wire bytes alone: a link of one byte per microsecond, no latency.
double wireBytes(int ranks, uint64_t each) {
  std::vector<uint64_t> nnz(ranks, each);
  CostInputs in{ranks, 1000, 4, 4, nnz.data()};
  double wire = 0;
  recursiveDoublingCostUs(CostParams{0, 1e-3, 1e12, 1e12, 1e12}, in, &wire);
  return wire;
}

}  // namespace

TEST_CASE("recursive doubling: one latency per round, two more for the folds") {
  CHECK(latencyOnly(1, 10) == doctest::Approx(0));
  CHECK(latencyOnly(2, 10) == doctest::Approx(10));
  CHECK(latencyOnly(4, 10) == doctest::Approx(20));
  CHECK(latencyOnly(8, 10) == doctest::Approx(30));
  CHECK(latencyOnly(1024, 10) == doctest::Approx(100));
  CHECK(latencyOnly(3, 10) == doctest::Approx(30));  // 1 round + fold in + fold out
  CHECK(latencyOnly(5, 10) == doctest::Approx(40));
  CHECK(latencyOnly(7, 10) == doctest::Approx(40));
}

TEST_CASE("recursive doubling: each round moves the largest block's union, index + value bytes each") {
  // 1% each of 1000: round 0 10 entries, round 1 the union of two, 19.9.
  CHECK(wireBytes(2, 10) == doctest::Approx(80));
  CHECK(wireBytes(4, 10) == doctest::Approx(80 + 1000 * (1 - 0.99 * 0.99) * 8));
  // Three ranks: rank 2's message folds in, the core's round carries the
  // union of ranks 0 and 2, and the union of all folds out.
  CHECK(wireBytes(3, 10) ==
        doctest::Approx(80 + 1000 * (1 - 0.99 * 0.99) * 8 + 1000 * (1 - 0.99 * 0.99 * 0.99) * 8));
}

TEST_CASE("recursive doubling: a union past the break-even travels dense") {
  // 40% each: round 0 sparse (3200 bytes < 4000), round 1's union (64%) dense.
  CHECK(wireBytes(4, 400) == doctest::Approx(3200 + 4000));
  // Every rank dense from the start: the tensor's bytes every round.
  CHECK(wireBytes(8, 1000) == doctest::Approx(3 * 4000));
  // fp64 sums (12 bytes an entry): 64% stays sparse, under 8000 dense bytes.
  std::vector<uint64_t> nnz(4, 400);
  CostInputs in{4, 1000, 4, 4, nnz.data(), 8};
  double wire = 0;
  recursiveDoublingCostUs(CostParams{0, 1e-3, 1e12, 1e12, 1e12}, in, &wire);
  CHECK(wire == doctest::Approx(400 * 12 + 1000 * (1 - 0.6 * 0.6) * 12));
}

TEST_CASE("recursive doubling undercuts the allgather plan where latency dominates, not where bytes do") {
  const CostParams slowStart{30, 1.25, 2, 4};
  for (int ranks : {4, 64, 1024}) {
    CAPTURE(ranks);
    std::vector<uint64_t> few(ranks, 16);  // 16 entries of 16M each
    CostInputs small{ranks, size_t(1) << 24, 4, 4, few.data()};
    CHECK(recursiveDoublingCostUs(slowStart, small) < allgatherCostUs(slowStart, small));
  }
  // 4 ranks, 10% of 16M each on 1.25 GB/s: raw COO grows toward dense
  // while the allgather plan's packed messages stay small.
  std::vector<uint64_t> many(4, 1677722);
  CostInputs big{4, size_t(1) << 24, 4, 4, many.data()};
  CHECK(recursiveDoublingCostUs(slowStart, big) > allgatherCostUs(slowStart, big));
}
