// Fault injection into the 1-bit allreduce under mpirun: whatever transport
// operation fails (prepare, header allgather, votes, the worker slots'
// alltoallv, the server slots' allgather: each scale travels with its
// signs), on one rank or on all, every rank
// returns an error, nothing is committed, and retrying each failed call
// gives bit for bit the outputs, worker and server errors and statistics of
// a run without the fault. The same for allocation failures on one rank.
#include <cstring>
#include <vector>

#include "fault_util.h"
#include "onebit_util.h"
#include "transport/fault_injection.h"

using namespace dcttest;

namespace {

constexpr int kSteps = 3;

struct Scenario {
  size_t n;
  int warmup;
};

struct Run {
  std::vector<std::vector<float>> outputs;
  std::vector<float> worker, server;
  dctStats_t stats{};
  uint64_t ops = 0;
  int failedCalls = 0;
};

template <typename Arm>
Run runSteps(dctComm_t comm, const Scenario& sc, bool inPlace, Arm&& arm) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  dctConfig_t cfg = onebitConfig(sc.warmup);
  dctCompressor_t c = nullptr;
  REQUIRE(dctCompressorCreate(comm, sc.n, dctFloat32, &cfg, &c) == dctSuccess);
  arm(c);
  Run run;
  const uint64_t opsBefore = dct::transportOps(comm);
  for (int step = 0; step < kSteps; step++) {
    const std::vector<float> g = onebitInput<float>(sc.n, rank, step, 77);
    std::vector<float> send = g, out(sc.n, 0.0f);
    for (int attempt = 0;; attempt++) {
      REQUIRE(attempt < 4);  // one armed fault: at most one retry per call
      if (inPlace) out = g;
      const dctResult_t res = dctSparseAllreduce(inPlace ? out.data() : send.data(), out.data(), sc.n, dctFloat32,
                                                 dctSum, c, comm, nullptr);
      REQUIRE(allRanksAgree(res == dctSuccess));  // every rank fails, or none
      if (res == dctSuccess) break;
      CHECK(std::strlen(dctGetLastError(comm)) > 0);
      REQUIRE(sameBytes(inPlace ? out : send, g));  // sendbuf intact, in place too
      run.failedCalls++;
    }
    run.outputs.push_back(out);
  }
  run.ops = dct::transportOps(comm) - opsBefore;
  run.worker = workerError<float>(c);
  run.server = serverError<float>(c, dct::OnebitChunks(sc.n, size).length(rank));
  REQUIRE(dctCompressorGetStats(c, &run.stats) == dctSuccess);
  dctCompressorDestroy(c);
  return run;
}

void requireSame(const Run& a, const Run& b) {
  for (int step = 0; step < kSteps; step++) REQUIRE(sameBytes(a.outputs[step], b.outputs[step]));
  REQUIRE(sameBytes(a.worker, b.worker));
  REQUIRE(sameBytes(a.server, b.server));
  CHECK(a.stats.step == b.stats.step);
  CHECK(a.stats.threshold == b.stats.threshold);
  CHECK(a.stats.algorithm == b.stats.algorithm);
  CHECK(a.stats.totalBytesSent == b.stats.totalBytesSent);
  CHECK(a.stats.totalBytesReceived == b.stats.totalBytesReceived);
}

// 1001: every chunk busy; 40: empty chunks at 3 and 4 ranks; a warm-up step.
const std::vector<Scenario> kScenarios = {{1001, 0}, {40, 0}, {333, 1}};

}  // namespace

TEST_CASE("a transport fault at any operation, on any rank or all, fails every rank and a retry is exact") {
  World w;
  REQUIRE(dct::installFaultSeam(w.comm) == dctSuccess);
  for (const Scenario& sc : kScenarios)
    for (bool inPlace : {false, true}) {
      const Run clean = runSteps(w.comm, sc, inPlace, [](dctCompressor_t) {});
      REQUIRE(clean.failedCalls == 0);
      // The ops every fault below lands on: a 1-bit step is prepare, the
      // agreement (header allgather, vote), the worker slots' alltoallv,
      // the server slots' allgather and the exchange vote (scales ride in
      // the slots); a warm-up step has the dense allreduce in their place.
      // One rank has no votes.
      const uint64_t warm = static_cast<uint64_t>(sc.warmup), votes = w.size > 1 ? 2 : 0;
      CHECK(clean.ops == warm * (3 + votes) + (kSteps - warm) * (4 + votes));
      for (uint64_t n = 0; n < clean.ops; n++)
        for (int victim = -1; victim < w.size; victim++) {
          CAPTURE(sc.n);
          CAPTURE(sc.warmup);
          CAPTURE(inPlace);
          CAPTURE(n);
          CAPTURE(victim);
          const Run faulty = runSteps(w.comm, sc, inPlace, [&](dctCompressor_t) { dct::armFault(w.comm, n, victim); });
          CHECK(faulty.failedCalls == 1);
          requireSame(clean, faulty);
        }
    }
}

TEST_CASE("an allocation failure on one rank fails every rank and a retry is exact") {
  World w;
  for (const Scenario& sc : kScenarios)
    for (bool inPlace : {false, true}) {
      const Run clean = runSteps(w.comm, sc, inPlace, [](dctCompressor_t) {});
      for (int victim = 0; victim < w.size; victim++)
        for (int n = 0; n < 6; n++) {
          CAPTURE(sc.n);
          CAPTURE(inPlace);
          CAPTURE(victim);
          CAPTURE(n);
          const Run faulty = runSteps(w.comm, sc, inPlace, [&](dctCompressor_t c) {
            REQUIRE(dct::bindOps(c, failingOps(), "test") == dctSuccess);
            allocationsLeft = w.rank == victim ? n : -1;
          });
          allocationsLeft = -1;
          requireSame(clean, faulty);
        }
    }
}
