// dctCompressorGetResidual / SetResidual through the public API: nothing is
// lost (ranks x delivered mean + every rank's residual = the gradient sum),
// a residual restored into a fresh compressor continues the same run bit
// for bit (checkpoints), and bad buffers are refused with nothing changed.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "mpi_util.h"

using namespace dcttest;

namespace {

std::vector<float> gradient(size_t n, int rank, int step) {
  std::mt19937 rng(1000u * static_cast<unsigned>(step) + static_cast<unsigned>(rank));
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> g(n);
  for (float& x : g) x = normal(rng);
  return g;
}

std::vector<double> sumOverRanks(const std::vector<double>& mine) {
  std::vector<double> all(mine.size());
  MPI_Allreduce(mine.data(), all.data(), static_cast<int>(mine.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return all;
}

struct Run {
  dctCompressor_t c = nullptr;
  size_t n;
  explicit Run(World& w, size_t count, dctAlgorithm_t algo) : n(count) {
    Settings s;
    s.density = 0.05;
    s.algorithm = algo;
    dctConfig_t cfg = explicitConfig(s);
    REQUIRE(dctCompressorCreate(w.comm, n, dctFloat32, &cfg, &c) == dctSuccess);
  }
  ~Run() { dctCompressorDestroy(c); }
  std::vector<float> step(World& w, int k) {
    std::vector<float> g = gradient(n, w.rank, k), out(n);
    REQUIRE(dctSparseAllreduce(g.data(), out.data(), n, dctFloat32, dctAvg, c, w.comm, nullptr) == dctSuccess);
    return out;
  }
  std::vector<float> residual() {
    std::vector<float> r(n, -1.f);
    REQUIRE(dctCompressorGetResidual(c, r.data(), nullptr) == dctSuccess);
    return r;
  }
};

}  // namespace

TEST_CASE("no gradient mass is lost: ranks x results + residuals = the gradient sum") {
  World w;
  for (dctAlgorithm_t algo : {dctAlgoAllgather, dctAlgoSplit, dctAlgoDense}) {
    CAPTURE(algo);
    const size_t n = 4099;
    Run run(w, n, algo);
    std::vector<double> applied(n, 0.0), grads(n, 0.0), tol(n, 0.0);
    for (int k = 0; k < 6; k++) {
      const std::vector<float> g = gradient(n, w.rank, k), out = run.step(w, k);
      for (size_t i = 0; i < n; i++) {
        grads[i] += g[i];
        applied[i] += out[i];
        tol[i] += 4 * std::numeric_limits<float>::epsilon() * (std::fabs(g[i]) + std::fabs(out[i]) * w.size);
      }
    }
    const std::vector<float> r = run.residual();
    std::vector<double> mine(r.begin(), r.end());
    const std::vector<double> residuals = sumOverRanks(mine), gradSum = sumOverRanks(grads),
                              tolSum = sumOverRanks(tol);
    for (size_t i = 0; i < n; i++)
      REQUIRE(std::fabs(w.size * applied[i] + residuals[i] - gradSum[i]) <= tolSum[i] + 1e-6);
  }
}

TEST_CASE("a residual restored into a fresh compressor continues the run bit for bit") {
  World w;
  const size_t n = 2053;
  Run a(w, n, dctAlgoAllgather);
  for (int k = 0; k < 3; k++) a.step(w, k);
  Run b(w, n, dctAlgoAllgather);
  const std::vector<float> saved = a.residual();
  REQUIRE(dctCompressorSetResidual(b.c, saved.data(), nullptr) == dctSuccess);
  CHECK(b.residual() == saved);
  // Exact threshold every step (interval 1): the schedule carries no state.
  const std::vector<float> fromA = a.step(w, 3), fromB = b.step(w, 3);
  CHECK(std::memcmp(fromA.data(), fromB.data(), n * sizeof(float)) == 0);
  CHECK(a.residual() == b.residual());
}

TEST_CASE("a compressor that has not stepped holds zeros; half tensors keep an fp32 residual") {
  World w;
  dctConfig_t cfg = explicitConfig(Settings{});
  dctCompressor_t c = nullptr;
  REQUIRE(dctCompressorCreate(w.comm, 9, dctFloat16, &cfg, &c) == dctSuccess);
  std::vector<float> r(9, 7.f);
  REQUIRE(dctCompressorGetResidual(c, r.data(), nullptr) == dctSuccess);
  CHECK(r == std::vector<float>(9, 0.f));
  dctCompressorDestroy(c);
}

TEST_CASE("bad residual buffers are refused and change nothing") {
  World w;
  Run run(w, 101, dctAlgoAllgather);
  run.step(w, 0);
  const std::vector<float> before = run.residual();
  std::vector<float> bad(before);
  bad[50] = std::numeric_limits<float>::quiet_NaN();
  CHECK(dctCompressorSetResidual(run.c, bad.data(), nullptr) == dctInvalidArgument);
  CHECK(std::string(dctGetLastError(w.comm)).find("NaN") != std::string::npos);
  bad[50] = std::numeric_limits<float>::infinity();
  CHECK(dctCompressorSetResidual(run.c, bad.data(), nullptr) == dctInvalidArgument);
  CHECK(dctCompressorSetResidual(run.c, nullptr, nullptr) == dctInvalidArgument);
  CHECK(dctCompressorGetResidual(run.c, nullptr, nullptr) == dctInvalidArgument);
  std::vector<char> raw(101 * sizeof(float) + 1);
  CHECK(dctCompressorGetResidual(run.c, raw.data() + 1, nullptr) == dctInvalidArgument);
  CHECK(dctCompressorGetResidual(nullptr, raw.data(), nullptr) == dctInvalidArgument);
  CHECK(run.residual() == before);
}
