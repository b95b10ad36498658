// After a fixed-capacity compressor's slots were agreed (its first step),
// a rank that passes something else to dctSparseAllreduce (no compressor,
// a fresh fixed-capacity compressor, a compressor in the ordinary mode)
// fails every rank; none hangs, nothing is committed, and the next step
// with the agreed compressor on every rank equals a run that never failed.
#include <doctest/doctest.h>
#include <mpi.h>

#include <vector>

#include "mpi_util.h"

using namespace dcttest;

namespace {

constexpr size_t kCount = 4099;

std::vector<float> gradient(int rank, int step) {
  std::vector<float> g(kCount);
  for (size_t i = 0; i < kCount; i++)
    g[i] = static_cast<float>(((i * 7919 + 31 * step + 1009 * rank) % 2003)) - 1001.0f;
  return g;
}

dctConfig_t fixedConfig(double capacity) {
  Settings s;
  s.density = 0.02;
  s.method = dctThresholdSampled;
  s.interval = 3;
  s.capacity = capacity;
  return explicitConfig(s);
}

enum Stray { kNoCompressor, kFreshFixed, kOrdinary };

// Steps 0..3 of a fixed-capacity compressor; at step 2 the last rank first
// passes `stray` instead (that call must fail everywhere), then the step runs.
std::vector<float> run(const World& w, int strayAt, Stray stray) {
  dctConfig_t cfg = fixedConfig(2.0);
  dctCompressor_t c = nullptr;
  REQUIRE(dctCompressorCreate(w.comm, kCount, dctFloat32, &cfg, &c) == dctSuccess);
  std::vector<float> out(kCount), all;
  for (int step = 0; step < 4; step++) {
    const auto g = gradient(w.rank, step);
    if (step == strayAt) {
      dctCompressor_t other = nullptr;
      dctConfig_t otherCfg = fixedConfig(stray == kOrdinary ? 0.0 : 2.0);
      if (stray != kNoCompressor && w.rank == w.size - 1)
        REQUIRE(dctCompressorCreate(w.comm, kCount, dctFloat32, &otherCfg, &other) == dctSuccess);
      dctCompressor_t passed = w.rank == w.size - 1 ? other : c;
      std::vector<float> spoiled(kCount, 7.0f);
      const dctResult_t res = dctSparseAllreduce(g.data(), spoiled.data(), kCount, dctFloat32, dctSum, passed, w.comm, nullptr);
      CHECK(res != dctSuccess);
      CHECK(allTrue(res != dctSuccess));
      dctStats_t stats{};
      REQUIRE(dctCompressorGetStats(c, &stats) == dctSuccess);
      CHECK(stats.step == uint64_t(step));  // nothing committed
      if (other) dctCompressorDestroy(other);
    }
    REQUIRE(dctSparseAllreduce(g.data(), out.data(), kCount, dctFloat32, dctSum, c, w.comm, nullptr) == dctSuccess);
    CHECK(identicalOnAllRanks(out.data(), out.size() * sizeof(float)));
    all.insert(all.end(), out.begin(), out.end());
  }
  std::vector<float> residual(kCount);
  REQUIRE(dctCompressorGetResidual(c, residual.data(), nullptr) == dctSuccess);
  all.insert(all.end(), residual.begin(), residual.end());
  dctCompressorDestroy(c);
  return all;
}

}  // namespace

TEST_CASE("fixed capacity: a rank passing another compressor after the agreement fails every rank, none hangs") {
  World w;
  if (w.size < 2) return;
  const auto clean = run(w, -1, kNoCompressor);
  for (Stray stray : {kNoCompressor, kFreshFixed, kOrdinary}) {
    CAPTURE(stray);
    CHECK(run(w, 2, stray) == clean);  // the retry is exact
  }
}
