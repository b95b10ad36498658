// Auto's tuner: the model's choice until measurements say otherwise, then
// the measured winner, with the loser re-measured now and then while close.
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "core/auto_tuner.h"

using namespace dct;

namespace {

// Costs of the three algorithms, in the tuner's slot order.
struct Costs {
  double allgather, dense, split;
  double of(dctAlgorithm_t a) const { return a == dctAlgoDense ? dense : a == dctAlgoSplit ? split : allgather; }
};
constexpr double kFar = 1e9;  // a split cost far from the others: never planned nor re-measured
// Steps one close loser may take in 1000: a cold run and a streak of fresh
// samples each time it is due.
constexpr int kReprobesPer1000 = (AutoTuner::kStreak + 1) * (1000 / static_cast<int>(AutoTuner::kRemeasureSteps) + 1);

// Runs steps where the model always predicts `model` ({us, wireUs} per
// algorithm) and the machine really takes `real`, of which `local` on the
// rank's own work; returns how many steps used `count`.
int runLinkSteps(AutoTuner& t, int steps, const AutoTuner::Modelled (&model)[3], Costs real, Costs local,
                 uint64_t& step, dctAlgorithm_t count) {
  int used = 0;
  double last = 0, lastLocal = 0;
  for (int i = 0; i < steps; i++, step++) {
    // The previous step's time arrives with this step's counts.
    const AutoTuner::Decision d = t.plan(model[0], model[1], model[2], step);
    t.commit(d, last, step, lastLocal);
    used += d.algorithm() == count;
    last = real.of(d.algorithm());
    lastLocal = local.of(d.algorithm());
  }
  return used;
}

// Steps with whole-step models where the n-th run of an algorithm, at step
// i, really takes real(algorithm, i, n, cold): cold for the first run after
// a switch of algorithm (and the very first step).
struct NoisyRun {
  AutoTuner t;
  uint64_t step = 0;
  double last = 0;  // the previous step's time, learned with the next step
  int runs[AutoTuner::kPlans] = {};
  int previous = -1;  // the previous step's slot
  // Runs `steps` steps; returns how many used `count`.
  template <class Real>
  int run(int steps, Costs model, Real real, dctAlgorithm_t count) {
    int used = 0;
    for (int i = 0; i < steps; i++, step++) {
      const AutoTuner::Decision d = t.plan({model.allgather}, {model.dense}, {model.split}, step);
      t.commit(d, last, step);
      used += d.algorithm() == count;
      last = real(d.algorithm(), step, runs[d.slot]++, d.slot != previous);
      previous = d.slot;
    }
    return used;
  }
};

// The same with whole-step models and no local times (no link scale learned).
int runSteps(AutoTuner& t, int steps, Costs model, Costs real, uint64_t& step, dctAlgorithm_t count) {
  const AutoTuner::Modelled whole[3] = {{model.allgather}, {model.dense}, {model.split}};
  return runLinkSteps(t, steps, whole, real, Costs{0, 0, 0}, step, count);
}

// The two-algorithm runs of the tests below (split far away).
int runSteps(AutoTuner& t, int steps, double agModel, double denseModel, double agReal, double denseReal,
             uint64_t& step) {
  return runSteps(t, steps, Costs{agModel, denseModel, kFar}, Costs{agReal, denseReal, kFar}, step, dctAlgoDense);
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
  CHECK(dense >= 1000 - kReprobesPer1000);
}

TEST_CASE("the first, cold run of an algorithm is not learned") {
  AutoTuner t;
  t.commit(t.plan({10}, {100}, {kFar}, 0), 0, 0);
  t.commit(t.plan({10}, {100}, {kFar}, 1), 1e6, 1);  // cold: page faults, connection setup
  CHECK(t.scale(dctAlgoAllgather) == 1.0);
  // Nor does the tuner's first step bound what its algorithm can cost.
  CHECK(t.plan({10}, {100}, {kFar}, 2).algorithm() == dctAlgoAllgather);
}

TEST_CASE("an algorithm whose cold run prices it out stops exploring and is not re-measured") {
  // 16 MiB, 30% on 4 ranks sharing 2 cores, as traced: dense modelled at
  // 5.8 ms takes 17; allgather and split, modelled at 24-25 ms (close to
  // dense's measured cost), take 70 ms warm and 380 cold.
  NoisyRun r;
  int sparse = 0;
  auto real = [&](dctAlgorithm_t a, uint64_t, int, bool cold) {
    if (a == dctAlgoDense) return cold ? 30000.0 : 17000.0;
    sparse++;
    return cold ? 380000.0 : 70000.0;
  };
  r.run(1000, Costs{24000, 5800, 25000}, real, dctAlgoDense);
  // Each: its cold run and the step already planned when its time arrives.
  CHECK(sparse == 4);
}

TEST_CASE("planning alone changes nothing: a failed step leaves the tuner as it was") {
  AutoTuner t;
  uint64_t step = 0;
  runSteps(t, 10, 50, 90, 400, 100, step);
  const double before = t.scale(dctAlgoAllgather);
  for (int i = 0; i < 5; i++) (void)t.plan({50}, {90}, {70}, step);  // planned, never committed
  CHECK(t.scale(dctAlgoAllgather) == before);
  CHECK(t.plan({50}, {90}, {70}, step).slot == t.plan({50}, {90}, {70}, step).slot);
}

TEST_CASE("split is planned when the model prefers it, and corrected like the others") {
  AutoTuner t;
  uint64_t step = 0;
  // Right model: split always, the others far behind.
  CHECK(runSteps(t, 200, Costs{100, 120, 40}, Costs{110, 130, 45}, step, dctAlgoSplit) == 200);
  // Wrong model for split: it really takes 10x; allgather takes over.
  AutoTuner u;
  step = 0;
  runSteps(u, 10, Costs{60, 200, 40}, Costs{60, 200, 400}, step, dctAlgoSplit);
  CHECK(u.scale(dctAlgoSplit) == doctest::Approx(10.0));
  CHECK(runSteps(u, 1000, Costs{60, 200, 40}, Costs{60, 200, 400}, step, dctAlgoAllgather) == 1000);
}

TEST_CASE("two close losers are each re-measured, rarely") {
  AutoTuner t;
  uint64_t step = 0;
  const Costs model{50, 55, 52}, real{100, 110, 104};  // all within the band
  runSteps(t, 30, model, real, step, dctAlgoAllgather);
  const int allgather = runSteps(t, 1000, model, real, step, dctAlgoAllgather);
  CHECK(allgather < 1000);
  CHECK(allgather >= 1000 - 2 * kReprobesPer1000);
  CHECK(t.scale(dctAlgoDense) == doctest::Approx(2.0));
  CHECK(t.scale(dctAlgoSplit) == doctest::Approx(2.0));
}

TEST_CASE("an unmeasured algorithm's wire is costed at the pace the measured steps saw on the links") {
  // 4 MiB at 1%, 4 ranks on 1 Gbit/s links (model numbers of cost_table): the
  // model's 10 Gbit/s default puts dense (5.85 ms) near the sparse steps it
  // thinks take 0.25-0.62 ms; they take 5-8 ms, mostly waiting on the links,
  // and dense really takes 55 ms: it must not be probed.
  const AutoTuner::Modelled slow[3] = {{250, 90}, {5850, 5030}, {620, 340}};
  AutoTuner t;
  uint64_t step = 0;
  CHECK(runLinkSteps(t, 300, slow, Costs{5000, 55000, 7700}, Costs{1500, 100, 2000}, step, dctAlgoDense) == 0);
  CHECK(t.linkScale() > 10);
  // 64 MiB at 10%, 2 ranks on shared memory (measured: allgather 47 ms of
  // which 44 ms local, dense 25 ms): the sparse steps are slow in compute the
  // model misses, not on the links, so dense still looks worth a probe, is
  // measured, and wins.
  const AutoTuner::Modelled fast[3] = {{14419, 6200}, {62086, 53687}, {28987, 9000}};
  AutoTuner u;
  step = 0;
  runLinkSteps(u, 20, fast, Costs{47000, 25000, 80000}, Costs{44000, 100, 75000}, step, dctAlgoDense);
  CHECK(runLinkSteps(u, 100, fast, Costs{47000, 25000, 80000}, Costs{44000, 100, 75000}, step, dctAlgoDense) >= 98);
}

TEST_CASE("one slow warm step does not lock the faster algorithm out") {
  // Allgather really takes 100 and split 120, but allgather's first warm run
  // (error feedback's transient, say) takes 200: one sample used to price it
  // at 200 until its next re-measurement 100 steps later.
  NoisyRun r;
  auto real = [](dctAlgorithm_t a, uint64_t, int n, bool) {
    return a == dctAlgoSplit ? 120.0 : a == dctAlgoDense ? 1e6 : n == 1 ? 200.0 : 100.0;
  };
  r.run(12, Costs{50, 500, 55}, real, dctAlgoAllgather);
  CHECK(r.t.scale(dctAlgoAllgather) == doctest::Approx(2.0));
  CHECK(r.run(80, Costs{50, 500, 55}, real, dctAlgoAllgather) == 80);
}

TEST_CASE("two slow winner steps in three do not hand the steps to a slower loser") {
  // 64 MiB, 1%, 4 ranks on 1 Gbit/s links, as traced: allgather's steps take
  // 37 ms, split's 75; then two of allgather's steps take 105 and 90 (noise).
  // Its median tripled, and split ran every step at twice its time until
  // allgather's re-measurement.
  NoisyRun r;
  auto real = [](dctAlgorithm_t a, uint64_t step, int, bool cold) {
    if (a == dctAlgoDense) return 1e6;
    if (a == dctAlgoSplit) return cold ? 90.0 : 75.0;
    return step == 40 ? 105.0 : step == 41 ? 90.0 : cold ? 60.0 : 37.0;
  };
  r.run(40, Costs{35, 800, 44}, real, dctAlgoAllgather);
  CHECK(r.run(60, Costs{35, 800, 44}, real, dctAlgoAllgather) == 60);
}

TEST_CASE("near a tie, the winner's luckiest step does not keep a loser 15% cheaper out") {
  // Allgather's steps take 170-230 us, dense's 150-190 (roughly 2 ranks at 1
  // MiB, 1%, on shared memory), but allgather's first warm runs got lucky
  // (140) and it won the exploration. Priced at its best sample against
  // dense's median, it kept the steps until dense's re-measurement.
  NoisyRun r;
  auto real = [](dctAlgorithm_t a, uint64_t, int n, bool cold) {
    static constexpr double ag[3] = {170, 230, 200}, dense[3] = {150, 190, 170};
    if (a == dctAlgoSplit) return 1e6;
    const double warm = a == dctAlgoDense ? dense[n % 3] : n < 3 ? 140.0 : ag[n % 3];
    return warm + (cold ? 50.0 : 0.0);
  };
  r.run(15, Costs{100, 150, 5e5}, real, dctAlgoDense);
  // Until the lucky runs are a minority of allgather's window (a few steps).
  CHECK(r.run(70, Costs{100, 150, 5e5}, real, dctAlgoDense) >= 60);
}

TEST_CASE("a close loser measured in a slow phase wins back at its re-measurement") {
  // Allgather takes 160 for the first 20 steps (a slow start), then 100;
  // split takes 120 throughout. Allgather's re-measurement replaces its
  // samples, so its median follows at once.
  NoisyRun r;
  auto real = [](dctAlgorithm_t a, uint64_t step, int, bool) {
    return a == dctAlgoSplit ? 120.0 : a == dctAlgoDense ? 1e6 : step < 20 ? 160.0 : 100.0;
  };
  CHECK(r.run(100, Costs{50, 500, 55}, real, dctAlgoSplit) >= 90);
  r.run(12, Costs{50, 500, 55}, real, dctAlgoSplit);
  CHECK(r.t.scale(dctAlgoAllgather) == doctest::Approx(2.0));
  CHECK(r.run(80, Costs{50, 500, 55}, real, dctAlgoAllgather) == 80);
}

TEST_CASE("an algorithm's samples are taken in a row, and a clearly slower one stops early") {
  AutoTuner t;
  uint64_t step = 0;
  std::vector<dctAlgorithm_t> order;
  double last = 0;
  for (int i = 0; i < 20; i++, step++) {
    // Split's model is close to allgather's measured cost; it really takes 4x.
    const AutoTuner::Decision d = t.plan({50}, {500}, {110}, step);
    t.commit(d, last, step);
    order.push_back(d.algorithm());
    last = d.algorithm() == dctAlgoSplit ? 440 : 100;
  }
  // Allgather's first streak: one cold run and kStreak warm ones; then
  // split's: its cold run, one warm run that prices it out and one already
  // under way; then allgather from then on.
  const int first = AutoTuner::kStreak + 1;
  for (int i = 0; i < first; i++) CHECK(order[i] == dctAlgoAllgather);
  for (int i = first; i < first + 3; i++) CHECK(order[i] == dctAlgoSplit);
  CHECK(std::count(order.begin(), order.end(), dctAlgoSplit) == 3);
}

TEST_CASE("two algorithms a few percent apart do not trade places when a switch costs more than it saves") {
  // 64 KiB on 4 ranks sharing 2 cores, as traced: allgather's warm steps
  // take 190-230 us, dense's 185-225; the first step after a switch costs
  // ~170 us more (a tau estimate after dense, no chunk history). Cold steps
  // used to enter the windows, and the two traded places every streak.
  NoisyRun r;
  uint64_t noise = 12345;
  int switches = 0;
  auto real = [&](dctAlgorithm_t a, uint64_t, int, bool cold) {
    noise = noise * 6364136223846793005ull + 1442695040888963407ull;
    const double jitter = static_cast<double>(noise >> 58);  // 0..63: 1 us steps
    const double warm = (a == dctAlgoDense ? 185.0 : a == dctAlgoAllgather ? 190.0 : 2000.0) + 40.0 * jitter / 63;
    switches += cold;
    return cold ? warm + 170.0 : warm;
  };
  r.run(30, Costs{6, 32, 27}, real, dctAlgoDense);
  switches = 0;
  r.run(1000, Costs{6, 32, 27}, real, dctAlgoDense);
  // Only re-measurements switch: one away and one back per close loser due.
  CHECK(switches <= 2 * (1000 / static_cast<int>(AutoTuner::kRemeasureSteps) + 1));
}

TEST_CASE("a loser that became cheaper keeps the steps from its re-measurement on, however dear its switch") {
  // Allgather takes 140 for the first 50 steps, then 80; dense 100; every
  // switch costs 500 more. Its switch never repays within kPaybackSteps, but
  // its re-measurement is a switch already paid: it stays.
  NoisyRun r;
  auto real = [&](dctAlgorithm_t a, uint64_t step, int, bool cold) {
    const double warm = a == dctAlgoDense ? 100.0 : a == dctAlgoAllgather ? (step < 50 ? 140.0 : 80.0) : 1e6;
    return warm + (cold ? 500.0 : 0.0);
  };
  CHECK(r.run(100, Costs{50, 50, 5e5}, real, dctAlgoDense) >= 80);
  r.run(100, Costs{50, 50, 5e5}, real, dctAlgoDense);
  // Dense's own re-measurement (a cold run and a streak) is all it gets.
  CHECK(r.run(100, Costs{50, 50, 5e5}, real, dctAlgoAllgather) >= 100 - (AutoTuner::kStreak + 1));
}

TEST_CASE("samples that agree are an algorithm's cost: no further streak for a best sample that got lucky") {
  // Allgather's warm steps take 95 and 125 (within kDisagree of each other),
  // dense 100. Allgather's best sample beats dense, its median does not.
  NoisyRun r;
  int warm = 0;
  auto real = [&](dctAlgorithm_t a, uint64_t, int, bool cold) {
    if (a == dctAlgoDense) return 100.0;
    if (a == dctAlgoSplit) return 1e6;
    return cold ? 400.0 : (warm++ % 2 ? 125.0 : 95.0);
  };
  // Its first streak and, explored first, the one re-measurement after the
  // start-up (whose step back, planned on a lucky window, may keep it once).
  CHECK(r.run(30, Costs{50, 50, 5e5}, real, dctAlgoAllgather) <= 2 * (AutoTuner::kStreak + 1) + 1);
  CHECK(r.run(60, Costs{50, 50, 5e5}, real, dctAlgoAllgather) == 0);  // none until it is due again
}

TEST_CASE("the first algorithm explored, slow in the tensor's start-up, is re-measured once the others are") {
  // 2 ranks, 64 MiB, 1%, as traced: allgather, explored first, took 32-33 ms
  // a step in the tensor's first steps and 12-16 after; dense takes 24. It
  // lost the exploration and dense ran until allgather's re-measurement.
  NoisyRun r;
  auto real = [](dctAlgorithm_t a, uint64_t step, int, bool cold) {
    if (a == dctAlgoSplit) return 1e6;
    if (a == dctAlgoDense) return cold ? 33.0 : 24.0;
    return step < 4 ? (cold ? 90.0 : 32.0) : (cold ? 20.0 : 13.0);
  };
  r.run(12, Costs{10, 12, kFar}, real, dctAlgoAllgather);
  CHECK(r.run(80, Costs{10, 12, kFar}, real, dctAlgoAllgather) == 80);
}

TEST_CASE("an algorithm left out is never planned, explored nor re-measured, however cheap its model") {
  AutoTuner t;
  AutoTuner::Modelled model[3] = {{100, 0}, {120, 0}, {10, 0}};
  model[2].available = false;
  const Costs real{100, 120, 10}, local{0, 0, 0};
  uint64_t step = 0;
  CHECK(runLinkSteps(t, 1000, model, real, local, step, dctAlgoSplit) == 0);
  CHECK(runLinkSteps(t, 1000, model, real, local, step, dctAlgoAllgather) > 1000 - kReprobesPer1000);
}

TEST_CASE("global top-k is planned only when available, and wins when it is cheapest") {
  for (bool available : {false, true}) {
    CAPTURE(available);
    AutoTuner t;
    const AutoTuner::Modelled global{20, 0, available};
    int used = 0;
    double last = 0;
    for (uint64_t step = 0; step < 300; step++) {
      const AutoTuner::Decision d = t.plan({100}, {300}, {60}, step, global);
      t.commit(d, last, step);
      used += d.algorithm() == dctAlgoGlobalTopk;
      last = d.algorithm() == dctAlgoGlobalTopk ? 20 : d.algorithm() == dctAlgoSplit ? 60 : 100;
    }
    if (available) CHECK(used > 250);
    else CHECK(used == 0);
  }
}
