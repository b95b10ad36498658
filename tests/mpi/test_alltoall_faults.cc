// Fault injection for the DCT-MP all-to-all under mpirun: whatever transport
// operation of a forward or backward fails, on one rank or on all, every
// rank returns an error (none hangs), the plan keeps its committed masks,
// and retrying each failed call gives bit for bit the rows, gradients and
// statistics of a run without the fault. The same for allocation failures
// on one rank, and for blocks split past MPI's int counts.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/alltoall_plan.h"
#include "fault_util.h"
#include "mpi_util.h"
#include "plan_run.h"
#include "transport/fault_injection.h"
#include "transport/mpi_limits.h"

using namespace dcttest;

namespace {

constexpr size_t kRowLength = 40;
constexpr int kSteps = 2;

using Run = PlanRun;

// Rank p sends (p + q) % 3 rows to rank q: uneven, some empty.
std::vector<size_t> rowsTo(int p, int P) {
  std::vector<size_t> rows(P);
  for (int q = 0; q < P; q++) rows[q] = (p + q) % 3;
  return rows;
}

std::vector<float> data(size_t n, uint64_t seed) {
  std::mt19937 rng(static_cast<unsigned>(seed));
  std::normal_distribution<float> dist;
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// chunks > 0: the forward pipelined in that many chunks (alltoall_pipeline.cc).
template <typename Arm>
Run runSteps(dctComm_t comm, dctRowSelection_t selection, Arm&& arm, int chunks = 0) {
  int rank = 0, P = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  std::vector<size_t> send = rowsTo(rank, P), recv(P);
  for (int q = 0; q < P; q++) recv[q] = rowsTo(q, P)[rank];
  size_t sendRows = 0, recvRows = 0;
  for (int q = 0; q < P; q++) sendRows += send[q], recvRows += recv[q];
  dctConfig_t cfg = explicitConfig(Settings{});
  cfg.density = 0.1;
  cfg.rowSelection = selection;
  dctAlltoallPlan_t plan = nullptr;
  REQUIRE(dctAlltoallPlanCreate(comm, send.data(), recv.data(), kRowLength, dctFloat32, &cfg, &plan) == dctSuccess);
  if (chunks > 0) plan->chunks = chunks;
  arm(plan);
  Run run;
  const uint64_t opsBefore = dct::transportOps(comm);
  for (int step = 0; step < kSteps; step++) {
    const auto in = data(sendRows * kRowLength, 100 * rank + step), grad = data(recvRows * kRowLength, 7 + rank);
    std::vector<float> out(recvRows * kRowLength), back(sendRows * kRowLength);
    retried(run, comm, [&] { return dctSparseAlltoall(plan, in.data(), out.data(), nullptr); });
    retried(run, comm, [&] { return dctSparseAlltoallBackward(plan, grad.data(), back.data(), nullptr); });
    run.outputs.push_back(out);
    run.outputs.push_back(back);
  }
  run.ops = dct::transportOps(comm) - opsBefore;
  REQUIRE(dctAlltoallPlanGetStats(plan, &run.stats) == dctSuccess);
  dctAlltoallPlanDestroy(plan);
  return run;
}

}  // namespace

TEST_CASE("a transport fault in a forward or backward fails every rank and a retry is exact") {
  World w;
  REQUIRE(dct::installFaultSeam(w.comm) == dctSuccess);
  const std::pair<dctRowSelection_t, int> cases[] = {{dctRowTopK, 0}, {dctRowThreshold, 0}, {dctRowTopK, 3}};
  for (const auto& [selection, chunks] : cases) {  // chunks 3: the pipelined forward's ialltoallv too
    const Run clean = runSteps(w.comm, selection, [](dctAlltoallPlan_t) {}, chunks);
    REQUIRE(clean.failedCalls == 0);
    for (uint64_t n = 0; n < clean.ops; n++)
      for (int victim = -1; victim < w.size; victim++) {
        CAPTURE(selection);
        CAPTURE(chunks);
        CAPTURE(n);
        CAPTURE(victim);
        const Run faulty =
            runSteps(w.comm, selection, [&](dctAlltoallPlan_t) { dct::armFault(w.comm, n, victim); }, chunks);
        CHECK(faulty.failedCalls == 1);
        requireSame(clean, faulty);
      }
  }
}

TEST_CASE("an allocation failure on one rank fails every rank and a retry is exact") {
  World w;
  const std::pair<dctRowSelection_t, int> cases[] = {{dctRowTopK, 0}, {dctRowThreshold, 0}, {dctRowTopK, 3}};
  for (const auto& [selection, chunks] : cases) {
    const Run clean = runSteps(w.comm, selection, [](dctAlltoallPlan_t) {}, chunks);
    for (int victim = 0; victim < w.size; victim++)
      for (int n = 0; n < 12; n++) {
        CAPTURE(selection);
        CAPTURE(chunks);
        CAPTURE(victim);
        CAPTURE(n);
        const Run faulty = runSteps(w.comm, selection, [&](dctAlltoallPlan_t p) {
          REQUIRE(dct::bindPlanOps(p, failingOps(), "test") == dctSuccess);
          allocationsLeft = w.rank == victim ? n : -1;
        }, chunks);
        allocationsLeft = -1;
        requireSame(clean, faulty);
      }
  }
}

TEST_CASE("blocks past MPI's int counts are split, not refused, with identical results") {
  World w;
  const Run whole = runSteps(w.comm, dctRowThreshold, [](dctAlltoallPlan_t) {});
  dct::setMpiCountLimitForTesting(97);
  const Run split = runSteps(w.comm, dctRowThreshold, [](dctAlltoallPlan_t) {});
  dct::setMpiCountLimitForTesting(0);
  requireSame(whole, split);
}
