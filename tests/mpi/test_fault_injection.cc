// Fault injection under mpirun: whatever transport operation fails, on one
// rank or on all, every rank returns an error (none hangs), nothing is
// committed, and retrying each failed call to completion gives exactly (bit
// for bit) the results, residual and statistics of a run without the fault.
// The same for allocation failures on one rank, and for messages split past
// MPI's int counts.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/compressor.h"
#include "kernels/kernels.h"
#include "fault_util.h"
#include "mpi_util.h"
#include "transport/comm.h"
#include "transport/fault_injection.h"
#include "transport/mpi_limits.h"

using namespace dcttest;

namespace {

constexpr size_t kCount = 1001;
constexpr int kSteps = 3;

struct Run {
  std::vector<std::vector<float>> outputs;  // per step
  std::vector<float> residual;
  std::vector<float> owner;  // global top-k: the owner residual
  dctStats_t stats{};
  uint64_t ops = 0;       // transport operations seen
  int failedCalls = 0;    // calls that returned an error (then retried)
};

// Rank- and step-dependent gradients; rank 1 (if any) sends only zeros.
std::vector<float> gradient(int rank, int step) {
  std::vector<float> g(kCount, 0.0f);
  if (rank == 1) return g;
  std::mt19937 rng(1000 * rank + step);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (float& x : g) x = dist(rng);
  return g;
}

// Runs kSteps steps, retrying every failed call; `arm` runs once, after
// the compressor exists, to set up the fault.
template <typename Arm>
Run runSteps(dctComm_t comm, const Settings& s, bool inPlace, Arm&& arm) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const ScopedChunking chunking(comm, s.chunkElems);
  REQUIRE(resetGatherSlots(comm));
  dctConfig_t cfg = explicitConfig(s);
  dctCompressor_t c = nullptr;
  REQUIRE(dctCompressorCreate(comm, kCount, dctFloat32, &cfg, &c) == dctSuccess);
  arm(c);
  Run run;
  const uint64_t opsBefore = dct::transportOps(comm);
  for (int step = 0; step < kSteps; step++) {
    const std::vector<float> g = gradient(rank, step);
    std::vector<float> send = g, out(kCount, 0.0f);
    for (int attempt = 0;; attempt++) {
      REQUIRE(attempt < 4);  // one armed fault: at most one retry per call
      if (inPlace) out = g;
      const dctResult_t res =
          dctSparseAllreduce(inPlace ? out.data() : send.data(), out.data(), kCount, dctFloat32, dctSum, c, comm, nullptr);
      REQUIRE(allRanksAgree(res == dctSuccess));  // every rank fails, or none
      if (res == dctSuccess) break;
      CHECK(std::strlen(dctGetLastError(comm)) > 0);
      if (!inPlace) REQUIRE(std::memcmp(send.data(), g.data(), kCount * sizeof(float)) == 0);  // sendbuf intact
      run.failedCalls++;
    }
    run.outputs.push_back(out);
  }
  run.ops = dct::transportOps(comm) - opsBefore;
  // The last step ran pipelined (hierarchical: where the leaders are several).
  const dctComm_t steps = comm->node ? comm->leaders : comm;
  if (s.chunkElems > 0 && steps && steps->size > 1) CHECK(c->chunkElems == static_cast<size_t>(s.chunkElems));
  REQUIRE(dctCompressorGetStats(c, &run.stats) == dctSuccess);  // settles a fixed-capacity state first
  const float* r = static_cast<const float*>(c->residual());
  run.residual.assign(r, r + kCount);
  size_t begin = 0, length = 0;
  REQUIRE(dctCompressorGetOwnerResidual(c, nullptr, &begin, &length, nullptr) == dctSuccess);
  run.owner.resize(length);
  REQUIRE(dctCompressorGetOwnerResidual(c, run.owner.data(), &begin, &length, nullptr) == dctSuccess);
  REQUIRE(dctCompressorGetStats(c, &run.stats) == dctSuccess);
  dctCompressorDestroy(c);
  return run;
}

void requireSame(const Run& a, const Run& b) {
  for (int step = 0; step < kSteps; step++)
    REQUIRE(std::memcmp(a.outputs[step].data(), b.outputs[step].data(), kCount * sizeof(float)) == 0);
  REQUIRE(std::memcmp(a.residual.data(), b.residual.data(), kCount * sizeof(float)) == 0);
  REQUIRE(a.owner == b.owner);
  CHECK(a.stats.step == b.stats.step);
  CHECK(a.stats.ownerKept == b.stats.ownerKept);
  CHECK(a.stats.ownerResidualMass == b.stats.ownerResidualMass);
  CHECK(a.stats.nnz == b.stats.nnz);
  CHECK(a.stats.threshold == b.stats.threshold);
  CHECK(a.stats.thresholdEstimates == b.stats.thresholdEstimates);
  CHECK(a.stats.algorithm == b.stats.algorithm);
  CHECK(a.stats.totalBytesSent == b.stats.totalBytesSent);
}

std::vector<Settings> scenarios() {
  Settings allgather;                  // explicit allgather, exact tau every step
  Settings dense = allgather;
  dense.algorithm = dctAlgoDense;
  Settings autoSampled = allgather;    // auto's bookkeeping, sampled tau on a schedule
  autoSampled.algorithm = dctAlgoAuto;
  autoSampled.method = dctThresholdSampled;
  autoSampled.interval = 2;
  Settings warmup = allgather;         // a dense warm-up step, then compression
  warmup.warmup = 1;
  Settings pipelined = allgather;      // chunks of 300 from the second step: tau estimated up front...
  pipelined.chunkElems = 300;
  Settings pipelinedFromGrad = pipelined;  // ...or selected from grad + residual
  pipelinedFromGrad.interval = 1000;
  Settings split = allgather;          // pieces, sizes, votes, ranges: every op of both phases
  split.algorithm = dctAlgoSplit;
  Settings global = split;             // the same ops; the owner residual is state too
  global.algorithm = dctAlgoGlobalTopk;
  global.density = 0.05;
  Settings fixed = autoSampled;        // fixed slots: the first step agrees, the rest allgather and vote
  fixed.capacity = 1.5;
  Settings fixedWarmup = fixed;        // a dense warm-up step, then the slots
  fixedWarmup.warmup = 1;
  Settings fixedGlobal = fixed;        // fixed pieces: alltoall, owner select, allgather, vote
  fixedGlobal.algorithm = dctAlgoGlobalTopk;
  fixedGlobal.density = 0.05;
  return {allgather, dense,      autoSampled, warmup,     pipelined,  pipelinedFromGrad,
          split,     global,     fixed,       fixedWarmup, fixedGlobal};
}

}  // namespace

// Every transport op of `scenarios` on comm w, failed on each rank and on all.
// Split's exchange pinned to pairwise, every rank running the same ops
// (recursive halving's folded ranks run fewer: test_split_halving.cc
// injects its faults rank by rank).
static void everyTransportFault(World& w, const std::vector<Settings>& scenarios) {
  for (dctComm_t c : {w.comm, w.comm->node, w.comm->leaders})
    if (c) c->settings.splitExchange = dct::kSplitExchangePairwise;
  REQUIRE(dct::installFaultSeam(w.comm) == dctSuccess);
  for (const Settings& s : scenarios)
    for (bool inPlace : {false, true}) {
      const Run clean = runSteps(w.comm, s, inPlace, [](dctCompressor_t) {});
      REQUIRE(clean.failedCalls == 0);
      // Hierarchical ranks run different op counts: every op of the busiest.
      uint64_t ops = clean.ops;
      MPI_Allreduce(MPI_IN_PLACE, &ops, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
      // On every rank at once too: on a hierarchical comm op n is then a
      // different op on each rank, several independent faults in one step.
      const bool flat = w.comm->node == nullptr;
      for (uint64_t n = 0; n < ops; n++)
        for (int victim = -1; victim < w.size; victim++) {
          CAPTURE(s.algorithm);
          CAPTURE(s.warmup);
          CAPTURE(inPlace);
          CAPTURE(n);
          CAPTURE(victim);
          // Armed after the compressor exists: op n counts from the first call.
          const Run faulty = runSteps(w.comm, s, inPlace, [&](dctCompressor_t) { dct::armFault(w.comm, n, victim); });
          // A fault that fired failed one call; a rank with fewer ops than
          // n (hierarchical) never saw its fault.
          int fired = dct::faultArmed(w.comm) ? 0 : (victim < 0 || victim == w.rank);
          dct::disarmFault(w.comm);
          MPI_Allreduce(MPI_IN_PLACE, &fired, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
          // Independent faults on a hierarchical comm may fail several calls.
          if (flat || victim >= 0) CHECK(faulty.failedCalls == fired);
          else CHECK(faulty.failedCalls >= fired);
          if (flat) CHECK(fired == 1);
          requireSame(clean, faulty);
        }
    }
}

TEST_CASE("a transport fault at any operation, on any rank or all, fails every rank and a retry is exact") {
  World w;
  everyTransportFault(w, scenarios());
}

// Nodes of two ranks: the node reduce, broadcast, summary and the vote over
// every rank join the leaders' step.
TEST_CASE("hierarchical: a transport fault at any operation fails every rank and a retry is exact") {
  World w(2);
  const std::vector<Settings> all = scenarios();
  everyTransportFault(w, {all[0], all[1], all[4], all[6], all[7]});  // allgather, dense, pipelined, split, global
}

// Every allocation of the first nine on each rank fails once.
static void everyAllocationFailure(World& w, const std::vector<Settings>& scenarios) {
  for (const Settings& s : scenarios)
    for (bool inPlace : {false, true}) {
      const Run clean = runSteps(w.comm, s, inPlace, [](dctCompressor_t) {});
      for (int victim = 0; victim < w.size; victim++)
        for (int n = 0; n < 9; n++) {  // the split plan reserves up to 8 buffers
          CAPTURE(s.algorithm);
          CAPTURE(inPlace);
          CAPTURE(victim);
          CAPTURE(n);
          const Run faulty = runSteps(w.comm, s, inPlace, [&](dctCompressor_t c) {
            REQUIRE(dct::bindOps(c, failingOps(), "test") == dctSuccess);
            allocationsLeft = w.rank == victim ? n : -1;
          });
          allocationsLeft = -1;
          requireSame(clean, faulty);
        }
    }
}

TEST_CASE("an allocation failure on one rank fails every rank and a retry is exact") {
  World w;
  everyAllocationFailure(w, scenarios());
}

TEST_CASE("hierarchical: an allocation failure on one rank fails every rank and a retry is exact") {
  World w(2);
  const std::vector<Settings> all = scenarios();
  everyAllocationFailure(w, {all[0], all[4]});
}

TEST_CASE("messages past MPI's int counts are split, not refused, with identical results") {
  World w;
  Settings s;
  s.density = 0.3;  // large messages relative to the lowered limit
  const Run whole = runSteps(w.comm, s, false, [](dctCompressor_t) {});
  Settings splitAlgo = s;
  splitAlgo.algorithm = dctAlgoSplit;  // the alltoallv of pieces and the allgatherv of ranges
  const Run splitWhole = runSteps(w.comm, splitAlgo, false, [](dctCompressor_t) {});
  dct::setMpiCountLimitForTesting(97);  // odd piece size: every split path runs
  const Run split = runSteps(w.comm, s, false, [](dctCompressor_t) {});
  const Run splitSplit = runSteps(w.comm, splitAlgo, false, [](dctCompressor_t) {});
  s.algorithm = dctAlgoDense;
  const Run denseSplit = runSteps(w.comm, s, false, [](dctCompressor_t) {});
  dct::setMpiCountLimitForTesting(0);
  const Run denseWhole = runSteps(w.comm, s, false, [](dctCompressor_t) {});
  {
    INFO("allgather plan, whole and split messages");
    requireSame(whole, split);
  }
  {
    INFO("split plan, whole and split messages");
    requireSame(splitWhole, splitSplit);
  }
  {
    INFO("dense plan, whole and split messages");
    requireSame(denseWhole, denseSplit);
  }
  for (int step = 0; step < kSteps; step++)  // split's sums are allgather's, bit for bit
    REQUIRE(std::memcmp(whole.outputs[step].data(), splitWhole.outputs[step].data(), kCount * sizeof(float)) == 0);
}

TEST_CASE("a pipelined attempt redone after a runaway keeps the skipped chunks' slot history") {
  World w;
  if (w.size < 2) return;  // no pipeline on one rank
  constexpr size_t n = 4000;
  Settings s;
  s.density = 0.05;
  s.interval = 1000;
  s.chunkElems = 1000;
  const ScopedChunking chunking(w.comm, s.chunkElems);
  dctConfig_t cfg = explicitConfig(s);
  dctCompressor_t c = nullptr;
  REQUIRE(dctCompressorCreate(w.comm, n, dctFloat32, &cfg, &c) == dctSuccess);
  std::vector<float> out(n);
  for (int step = 0; step < 3; step++) {
    std::mt19937 rng(100 * w.rank + step);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> g(n);
    for (float& x : g) x = dist(rng);
    // Step 2: chunk 0 jumps 100x, so the selection runs away in the first
    // chunk and every later chunk is skipped.
    if (step == 2)
      for (size_t i = 0; i < 1000; i++) g[i] *= 100.0f;
    REQUIRE(dctSparseAllreduce(g.data(), out.data(), n, dctFloat32, dctSum, c, w.comm, nullptr) == dctSuccess);
  }
  REQUIRE(c->chunkElems == 1000);
  REQUIRE(c->chunkNeeds.size() == 4 * static_cast<size_t>(w.size));
  for (uint64_t need : c->chunkNeeds) CHECK(need > 0);  // a skipped chunk is not "needs nothing"
  dctCompressorDestroy(c);
}
