// The cost model: sparse wins when sparse, dense wins when dense, and the
// switch point sits near the byte break-even.
#include <doctest/doctest.h>

#include <vector>

#include "core/cost_model.h"

using namespace dct;

namespace {
dctAlgorithm_t choose(int ranks, size_t count, double density) {
  std::vector<uint64_t> nnz(ranks, static_cast<uint64_t>(density * count));
  CostInputs in{ranks, count, 4, 4, nnz.data()};
  return chooseAlgorithm(CostParams{5.0, 0.125, 2.0, 4.0}, in);
}
}  // namespace

TEST_CASE("allgather at low density, dense at high density") {
  for (int p : {2, 3, 4, 8}) {
    CAPTURE(p);
    CHECK(choose(p, 1 << 24, 0.001) == dctAlgoAllgather);
    CHECK(choose(p, 1 << 24, 0.01) == dctAlgoAllgather);
    CHECK(choose(p, 1 << 24, 0.9) == dctAlgoDense);
    CHECK(choose(p, 1 << 24, 1.0) == dctAlgoDense);
  }
}

TEST_CASE("costs grow with the bytes they move") {
  std::vector<uint64_t> small(4, 1000), large(4, 100000);
  CostParams p{5.0, 0.125, 2.0, 4.0};
  CostInputs a{4, 1 << 20, 4, 4, small.data()}, b{4, 1 << 20, 4, 4, large.data()};
  CHECK(allgatherCostUs(p, a) < allgatherCostUs(p, b));
  CHECK(denseCostUs(p, a) == denseCostUs(p, b));
  CostInputs c{4, 1 << 22, 4, 4, small.data()};
  CHECK(denseCostUs(p, a) < denseCostUs(p, c));
}

TEST_CASE("packed indices move the break-even up") {
  // Four ranks: ~4.5 bytes per packed entry break even with the ring's
  // 2(P-1)/P * 4 bytes per element near density 0.3, not 8-byte COO's 0.2.
  CHECK(choose(4, 1 << 24, 0.2) == dctAlgoAllgather);
  CHECK(choose(4, 1 << 24, 0.45) == dctAlgoDense);
}

TEST_CASE("one rank never pays for a dense exchange") {
  std::vector<uint64_t> nnz(1, 1 << 20);
  CostInputs in{1, 1 << 20, 4, 4, nnz.data()};
  CHECK(chooseAlgorithm(costParamsFromEnv(), in) == dctAlgoAllgather);
}
