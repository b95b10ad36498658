// What auto learns of a step under mpirun: the slowest rank's time without
// its wait for late ranks. One rank sleeps before every call (as a DDP rank
// whose backward runs long); the others wait for it in the header gather.
// That wait is no plan's cost, so the time every rank puts in its next
// header (the tuner's sample) must stay that of the exchange, on every
// path: allgather unchunked and pipelined, split, dense, global top-k, auto,
// and the hierarchical step's leaders.
//
// Not timing-flaky: the sleep (200 ms) is far beyond what these small
// exchanges take even on a loaded machine, and the check is a median over
// the steps. Counting the wait put every sample above the sleep.
#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/compressor.h"
#include "fault_util.h"
#include "mpi_util.h"

using namespace dcttest;

namespace {

constexpr double kLateMs = 200;  // the late rank's sleep before each call
constexpr int kSteps = 7;        // the first (first touches) is not late

struct Case {
  const char* name;
  dctAlgorithm_t algorithm;
  long long chunkElems = 0;  // > 0: the allgather pipelined in chunks of this many elements
  int localSize = 0;         // > 0: a hierarchical comm with nodes of this many ranks
};

// The samples (max over ranks of lastStepNs, ms) of the late steps; checks
// that every rank holds the same sum and ran the same algorithm.
std::vector<double> lateSamples(const Case& k) {
  World w(k.localSize);
  const ScopedChunking chunking(w.comm, k.chunkElems);
  constexpr size_t n = 1 << 14;
  Settings s;
  s.density = 0.01;
  s.algorithm = k.algorithm;
  s.interval = k.chunkElems ? 1000 : 1;  // the pipeline redoes steps that re-estimate
  const dctConfig_t cfg = explicitConfig(s);
  dctCompressor_t c = nullptr;
  REQUIRE(dctCompressorCreate(w.comm, n, dctFloat32, &cfg, &c) == dctSuccess);
  std::vector<float> g(n), out(n);
  std::vector<double> samples;
  bool chunked = false;
  for (int step = 0; step < kSteps; step++) {
    std::mt19937 rng(1000 * w.rank + step);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    for (float& x : g) x = dist(rng);
    if (step > 0 && w.rank == w.size - 1)
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(kLateMs));
    REQUIRE(dctSparseAllreduce(g.data(), out.data(), n, dctFloat32, dctSum, c, w.comm, nullptr) == dctSuccess);
    CHECK(identicalOnAllRanks(out.data(), n * sizeof(float)));
    dctStats_t st{};
    dctCompressorGetStats(c, &st);
    CHECK(identicalOnAllRanks(&st.algorithm, sizeof(st.algorithm)));
    chunked = chunked || c->chunkElems > 0;
    // Hierarchical: the ranks that are not leaders run no step of their own (0).
    uint64_t mine = c->lastStepNs, slowest = 0;
    MPI_Allreduce(&mine, &slowest, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    if (step > 0) samples.push_back(static_cast<double>(slowest) * 1e-6);
  }
  if (k.chunkElems) CHECK(chunked);  // the pipelined step ran
  dctCompressorDestroy(c);
  return samples;
}

}  // namespace

TEST_CASE("a late rank's wait is not in the time auto learns of a step") {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) return;  // nobody to wait for
  const Case cases[] = {
      {"allgather", dctAlgoAllgather},
      {"allgather, pipelined", dctAlgoAllgather, 4096},
      {"split", dctAlgoSplit},
      {"dense", dctAlgoDense},
      {"global top-k", dctAlgoGlobalTopk},
      {"auto", dctAlgoAuto},
      {"auto, hierarchical (nodes of 2)", dctAlgoAuto, 0, 2},
  };
  for (const Case& k : cases) {
    const std::string name = k.name;
    CAPTURE(name);
    std::vector<double> samples = lateSamples(k);
    std::sort(samples.begin(), samples.end());
    const double median = samples[samples.size() / 2];
    CAPTURE(median);
    CAPTURE(samples.back());
    CHECK(median < kLateMs / 2);
  }
}
