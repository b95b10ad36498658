// Auto's tuner: the model's choice until measurements say otherwise, then
// the measured winner, with the loser re-measured now and then while close.
#include <doctest/doctest.h>

#include "core/auto_tuner.h"

using namespace dct;

namespace {

// Runs steps where the model always predicts (agModel, denseModel) and the
// machine really takes agReal / denseReal; returns how many steps used dense.
int runSteps(AutoTuner& t, int steps, double agModel, double denseModel, double agReal,
             double denseReal, uint64_t& step) {
  int dense = 0;
  double last = 0;
  for (int i = 0; i < steps; i++, step++) {
    // The previous step's time arrives with this step's counts.
    const AutoTuner::Decision d = t.plan(agModel, denseModel, step);
    t.commit(d, last, step);
    dense += d.algorithm() == dctAlgoDense;
    last = d.algorithm() == dctAlgoDense ? denseReal : agReal;
  }
  return dense;
}

}  // namespace

TEST_CASE("a model that is right is followed") {
  AutoTuner t;
  uint64_t step = 0;
  CHECK(runSteps(t, 1000, 10, 100, 12, 110, step) == 0);
}

TEST_CASE("a model that is wrong is corrected within a few steps") {
  AutoTuner t;
  uint64_t step = 0;
  // The model prefers allgather; the machine runs it 4x slower than dense.
  runSteps(t, 10, 50, 90, 400, 100, step);
  CHECK(t.scale(dctAlgoAllgather) == doctest::Approx(8.0));
  const int dense = runSteps(t, 1000, 50, 90, 400, 100, step);
  CHECK(dense == 1000);  // allgather is never close enough to re-measure
}

TEST_CASE("a close loser is re-measured, rarely") {
  AutoTuner t;
  uint64_t step = 0;
  runSteps(t, 20, 50, 90, 110, 100, step);  // dense wins by 10%
  const int dense = runSteps(t, 1000, 50, 90, 110, 100, step);
  CHECK(dense < 1000);
  CHECK(dense >= 1000 - 1000 / static_cast<int>(AutoTuner::kReprobeSteps) - 1);
}

TEST_CASE("the first, cold run of an algorithm is not learned") {
  AutoTuner t;
  t.commit(t.plan(10, 100, 0), 0, 0);
  t.commit(t.plan(10, 100, 1), 1e6, 1);  // cold: page faults, connection setup
  CHECK(t.scale(dctAlgoAllgather) == 1.0);
}

TEST_CASE("planning alone changes nothing: a failed step leaves the tuner as it was") {
  AutoTuner t;
  uint64_t step = 0;
  runSteps(t, 10, 50, 90, 400, 100, step);
  const double before = t.scale(dctAlgoAllgather);
  for (int i = 0; i < 5; i++) (void)t.plan(50, 90, step);  // planned, never committed
  CHECK(t.scale(dctAlgoAllgather) == before);
  CHECK(t.plan(50, 90, step).slot == t.plan(50, 90, step).slot);
}
