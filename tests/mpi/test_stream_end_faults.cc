// The end of a call's stream work (streamEnd) fails on one rank, as a
// device twin's can (a failed kernel surfaces there): the plans of DES and
// of the all-to-all must then fail on every rank with nothing committed,
// and the retry gives bit for bit the results and statistics of a clean
// run. A host twin whose n-th streamEnd fails stands in for the device
// twin (no GPU here; the device twins run the same algorithm code).
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/alltoall_plan.h"
#include "core/des_plan.h"
#include "des_util.h"
#include "fault_util.h"
#include "mpi_util.h"
#include "plan_run.h"

using namespace dcttest;

namespace {

constexpr int kSteps = 2;

// streamEnd calls left before the failing one on this rank; -1: none fails.
int endsLeft = -1;

dctResult_t failingStreamEnd(dct::KernelContext* ctx, void* stream) {
  if (endsLeft == 0) {
    endsLeft = -1;
    return dctInternalError;
  }
  if (endsLeft > 0) endsLeft--;
  return dct::cpuKernelOps().streamEnd(ctx, stream);
}

const dct::KernelOps& failingEndOps() {
  static const dct::KernelOps ops = [] {
    dct::KernelOps o = dct::cpuKernelOps();
    o.name = "cpu (failing stream end)";
    o.streamEnd = failingStreamEnd;
    return o;
  }();
  return ops;
}

using Run = PlanRun;

// DES: rank q owns (q + 2) % 3 rows of 6; `failAt` >= 0: the failing twin,
// its failAt-th streamEnd failing on `victim`.
Run desRun(dctComm_t comm, const dctConfig_t* cfg, int victim, int failAt) {
  int rank = 0, P = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  const size_t d = 6;
  std::vector<size_t> rows(P);
  size_t N = 0;
  for (int q = 0; q < P; q++) N += rows[q] = (q + 2) % 3;
  dctDesPlan_t plan = nullptr;
  REQUIRE(dctDesPlanCreate(comm, rows.data(), d, dctFloat32, cfg, &plan) == dctSuccess);
  if (failAt >= 0) {
    REQUIRE(dct::bindDesOps(plan, failingEndOps(), "test") == dctSuccess);
    endsLeft = rank == victim ? failAt : -1;
  }
  Run run;
  for (int step = 0; step < kSteps; step++) {
    const auto in = des::partials<dctFloat32>(rank, N, d, 40 + step, 0.5);
    const std::vector<float> grad(rows[rank] * d, 1.0f + step);
    std::vector<float> out(rows[rank] * d), back(N * d);
    retried(run, comm, [&] { return dctDesReduceScatter(plan, in.data(), out.data(), nullptr); });
    retried(run, comm, [&] { return dctDesReduceScatterBackward(plan, grad.data(), back.data(), nullptr); });
    run.outputs.push_back(out);
    run.outputs.push_back(back);
  }
  endsLeft = -1;
  REQUIRE(dctDesPlanGetStats(plan, &run.stats) == dctSuccess);
  dctDesPlanDestroy(plan);
  return run;
}

std::vector<float> normals(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist;
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// All-to-all: rank p sends (p + q) % 3 rows of 40 to rank q; chunks > 0:
// the pipelined forward.
Run alltoallRun(dctComm_t comm, dctRowSelection_t selection, int chunks, int victim, int failAt) {
  int rank = 0, P = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  const size_t d = 40;
  std::vector<size_t> send(P), recv(P);
  size_t sendRows = 0, recvRows = 0;
  for (int q = 0; q < P; q++) {
    sendRows += send[q] = (rank + q) % 3;
    recvRows += recv[q] = (q + rank) % 3;
  }
  dctConfig_t cfg = explicitConfig(Settings{});
  cfg.density = 0.1;
  cfg.rowSelection = selection;
  dctAlltoallPlan_t plan = nullptr;
  REQUIRE(dctAlltoallPlanCreate(comm, send.data(), recv.data(), d, dctFloat32, &cfg, &plan) == dctSuccess);
  if (chunks > 0) plan->chunks = chunks;
  if (failAt >= 0) {
    REQUIRE(dct::bindPlanOps(plan, failingEndOps(), "test") == dctSuccess);
    endsLeft = rank == victim ? failAt : -1;
  }
  Run run;
  for (int step = 0; step < kSteps; step++) {
    const auto in = normals(sendRows * d, 100 * rank + step), grad = normals(recvRows * d, 7 + rank);
    std::vector<float> out(recvRows * d), back(sendRows * d);
    retried(run, comm, [&] { return dctSparseAlltoall(plan, in.data(), out.data(), nullptr); });
    retried(run, comm, [&] { return dctSparseAlltoallBackward(plan, grad.data(), back.data(), nullptr); });
    run.outputs.push_back(out);
    run.outputs.push_back(back);
  }
  endsLeft = -1;
  REQUIRE(dctAlltoallPlanGetStats(plan, &run.stats) == dctSuccess);
  dctAlltoallPlanDestroy(plan);
  return run;
}

// Each call ends its stream once: 2 x kSteps calls, and the retry's.
constexpr int kEnds = 2 * kSteps;

}  // namespace

TEST_CASE("DES: a failed stream end on one rank fails every rank, commits nothing, and the retry is exact") {
  World w;
  dctConfig_t thinned = DCT_CONFIG_INITIALIZER;
  thinned.density = 0.5;
  thinned.rowSelection = dctRowThreshold;
  thinned.thresholdInterval = 2;
  thinned.thresholdMethod = dctThresholdExact;
  const dctConfig_t* const configs[] = {nullptr, &thinned};
  for (const dctConfig_t* cfg : configs) {
    const Run clean = desRun(w.comm, cfg, -1, -1);
    REQUIRE(clean.failedCalls == 0);
    for (int victim = 0; victim < w.size; victim++)
      for (int n = 0; n < kEnds; n++) {
        CAPTURE(cfg != nullptr);
        CAPTURE(victim);
        CAPTURE(n);
        const Run faulty = desRun(w.comm, cfg, victim, n);
        CHECK(faulty.failedCalls == 1);
        requireSame(clean, faulty);
      }
  }
}

TEST_CASE("all-to-all: a failed stream end on one rank fails every rank, commits nothing, and the retry is exact") {
  World w;
  const std::pair<dctRowSelection_t, int> cases[] = {{dctRowTopK, 0}, {dctRowThreshold, 0}, {dctRowTopK, 3}};
  for (const auto& [selection, chunks] : cases) {
    const Run clean = alltoallRun(w.comm, selection, chunks, -1, -1);
    REQUIRE(clean.failedCalls == 0);
    for (int victim = 0; victim < w.size; victim++)
      for (int n = 0; n < kEnds; n++) {
        CAPTURE(selection);
        CAPTURE(chunks);
        CAPTURE(victim);
        CAPTURE(n);
        const Run faulty = alltoallRun(w.comm, selection, chunks, victim, n);
        CHECK(faulty.failedCalls == 1);
        requireSame(clean, faulty);
      }
  }
}
