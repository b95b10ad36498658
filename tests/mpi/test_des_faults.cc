// Fault injection for the DES reduce-scatter under mpirun: whatever
// transport operation of a forward or backward fails, on one rank or on
// all, every rank returns an error (none hangs), and retrying each failed
// call gives bit for bit the sums, gradients and statistics of a run without
// the fault; a forward that fails leaves the previous forward's row flags
// in effect for the backward. The same for allocation failures on one rank,
// and for a thinned plan (threshold rows: tau, entry masks and counts).
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstring>
#include <vector>

#include "core/des_plan.h"
#include "des_util.h"
#include "fault_util.h"
#include "mpi_util.h"
#include "plan_run.h"
#include "transport/fault_injection.h"

using namespace dcttest;
using namespace dcttest::des;

namespace {

constexpr size_t kRowLength = 6;
constexpr int kSteps = 2;

using Run = PlanRun;

// Rank q owns (q + 2) % 3 rows: uneven, some empty.
std::vector<size_t> split(int P) {
  std::vector<size_t> rows(P);
  for (int q = 0; q < P; q++) rows[q] = (q + 2) % 3;
  return rows;
}

struct Setup {
  std::vector<size_t> rows;
  size_t N = 0, mine = 0;
  Setup(int rank, int P) : rows(split(P)) {
    for (size_t r : rows) N += r;
    mine = rows[rank];
  }
};

// Thinned rows: K = 3 of 6 by a tau estimated in the first step.
dctConfig_t thinned() {
  dctConfig_t cfg = DCT_CONFIG_INITIALIZER;
  cfg.density = 0.5;
  cfg.rowSelection = dctRowThreshold;
  cfg.thresholdInterval = 2;
  cfg.thresholdMethod = dctThresholdExact;
  return cfg;
}

template <typename Arm>
Run runSteps(dctComm_t comm, Arm&& arm, const dctConfig_t* cfg = nullptr) {
  int rank = 0, P = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  const Setup s(rank, P);
  dctDesPlan_t plan = nullptr;
  REQUIRE(dctDesPlanCreate(comm, s.rows.data(), kRowLength, dctFloat32, cfg, &plan) == dctSuccess);
  arm(plan);
  Run run;
  const uint64_t opsBefore = dct::transportOps(comm);
  for (int step = 0; step < kSteps; step++) {
    const auto in = partials<dctFloat32>(rank, s.N, kRowLength, 40 + step, 0.5);
    const std::vector<float> grad(s.mine * kRowLength, 1.0f + step);
    std::vector<float> out(s.mine * kRowLength), back(s.N * kRowLength);
    retried(run, comm, [&] { return dctDesReduceScatter(plan, in.data(), out.data(), nullptr); });
    retried(run, comm, [&] { return dctDesReduceScatterBackward(plan, grad.data(), back.data(), nullptr); });
    run.outputs.push_back(out);
    run.outputs.push_back(back);
  }
  run.ops = dct::transportOps(comm) - opsBefore;
  REQUIRE(dctDesPlanGetStats(plan, &run.stats) == dctSuccess);
  dctDesPlanDestroy(plan);
  return run;
}

}  // namespace

TEST_CASE("a transport fault in a forward or backward fails every rank and a retry is exact") {
  World w;
  REQUIRE(dct::installFaultSeam(w.comm) == dctSuccess);
  const Run clean = runSteps(w.comm, [](dctDesPlan_t) {});
  REQUIRE(clean.failedCalls == 0);
  REQUIRE(clean.ops > 0);
  for (uint64_t n = 0; n < clean.ops; n++)
    for (int victim = -1; victim < w.size; victim++) {
      CAPTURE(n);
      CAPTURE(victim);
      const Run faulty = runSteps(w.comm, [&](dctDesPlan_t) { dct::armFault(w.comm, n, victim); });
      CHECK(faulty.failedCalls == 1);
      requireSame(clean, faulty);
    }
}

TEST_CASE("thinned rows: a transport or allocation fault fails every rank and a retry is exact") {
  World w;
  REQUIRE(dct::installFaultSeam(w.comm) == dctSuccess);
  const dctConfig_t cfg = thinned();
  const Run clean = runSteps(w.comm, [](dctDesPlan_t) {}, &cfg);
  REQUIRE(clean.failedCalls == 0);
  REQUIRE(clean.ops > 0);
  CHECK(clean.stats.maskFormat == 0);  // a 1-byte bitmap beats 3 index bytes
  for (uint64_t n = 0; n < clean.ops; n++)
    for (int victim = -1; victim < w.size; victim++) {
      CAPTURE(n);
      CAPTURE(victim);
      const Run faulty = runSteps(w.comm, [&](dctDesPlan_t) { dct::armFault(w.comm, n, victim); }, &cfg);
      CHECK(faulty.failedCalls == 1);
      requireSame(clean, faulty);
    }
  for (int victim = 0; victim < w.size; victim++)
    for (int n = 0; n < 16; n++) {
      CAPTURE(victim);
      CAPTURE(n);
      const Run faulty = runSteps(
          w.comm,
          [&](dctDesPlan_t p) {
            REQUIRE(dct::bindDesOps(p, failingOps(), "test") == dctSuccess);
            allocationsLeft = w.rank == victim ? n : -1;
          },
          &cfg);
      allocationsLeft = -1;
      requireSame(clean, faulty);
    }
}

TEST_CASE("an allocation failure on one rank fails every rank and a retry is exact") {
  World w;
  const Run clean = runSteps(w.comm, [](dctDesPlan_t) {});
  for (int victim = 0; victim < w.size; victim++)
    for (int n = 0; n < 10; n++) {
      CAPTURE(victim);
      CAPTURE(n);
      const Run faulty = runSteps(w.comm, [&](dctDesPlan_t p) {
        REQUIRE(dct::bindDesOps(p, failingOps(), "test") == dctSuccess);
        allocationsLeft = w.rank == victim ? n : -1;
      });
      allocationsLeft = -1;
      requireSame(clean, faulty);
    }
}

TEST_CASE("a failed forward keeps the previous forward's row flags for the backward") {
  World w;
  REQUIRE(dct::installFaultSeam(w.comm) == dctSuccess);
  const Setup s(w.rank, w.size);
  const size_t d = kRowLength;
  // The first forward flags every row; the second would flag none.
  const auto first = partials<dctFloat32>(w.rank, s.N, d, 1, 0.0), second = partials<dctFloat32>(w.rank, s.N, d, 2, 1.0);
  const std::vector<float> grad(s.mine * d, 3.0f);
  std::vector<float> want(s.N * d, 0.0f);
  for (size_t g = 0; g < s.N; g++)
    if (!zeroRow(first.data() + g * d, d)) std::fill(want.begin() + g * d, want.begin() + (g + 1) * d, 3.0f);
  dctDesPlan_t plan = nullptr;
  REQUIRE(dctDesPlanCreate(w.comm, s.rows.data(), d, dctFloat32, nullptr, &plan) == dctSuccess);
  std::vector<float> out(s.mine * d), back(s.N * d);
  uint64_t opsOfForward = 0;
  {
    const uint64_t before = dct::transportOps(w.comm);
    REQUIRE(dctDesReduceScatter(plan, first.data(), out.data(), nullptr) == dctSuccess);
    opsOfForward = dct::transportOps(w.comm) - before;
  }
  for (uint64_t n = 0; n < opsOfForward; n++) {
    CAPTURE(n);
    dct::armFault(w.comm, n, w.size - 1);
    const dctResult_t res = dctDesReduceScatter(plan, second.data(), out.data(), nullptr);
    dct::disarmFault(w.comm);
    CHECK(res != dctSuccess);
    REQUIRE(allRanksAgree(res == dctSuccess));
  }
  REQUIRE(dctDesReduceScatterBackward(plan, grad.data(), back.data(), nullptr) == dctSuccess);
  CHECK(back == want);
  dctAlltoallStats_t st;
  REQUIRE(dctDesPlanGetStats(plan, &st) == dctSuccess);
  CHECK(st.forwardSteps == 1);
  dctDesPlanDestroy(plan);
}
