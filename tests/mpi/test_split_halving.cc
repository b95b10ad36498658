// The split plans' reduce-scatter by recursive halving (split_halving.h),
// forced on through the comm's DCT_SPLIT_EXCHANGE setting, at any rank
// count: split and global top-k give the pairwise exchange's results bit
// for bit on grid values (every sum exact) in every datatype, with empty
// ranks, all-dense windows, single entries and fewer elements than ranks;
// global top-k loses nothing; ranks that disagree on the exchange fail
// alike; and a transport fault at any operation on any rank fails every
// rank, commits nothing, and the retry is exact.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstring>
#include <random>
#include <vector>

#include "../common/typed_values.h"
#include "algo/algorithms.h"
#include "core/compressor.h"
#include "fault_util.h"
#include "mpi_util.h"
#include "transport/comm.h"
#include "transport/fault_injection.h"

using namespace dcttest;

namespace {

// The comm's split exchange for a scope.
class ScopedExchange {
 public:
  ScopedExchange(dctComm_t comm, int exchange) : comm_(comm), old_(comm->settings.splitExchange) {
    comm->settings.splitExchange = exchange;
  }
  ~ScopedExchange() { comm_->settings.splitExchange = old_; }
  ScopedExchange(const ScopedExchange&) = delete;
  ScopedExchange& operator=(const ScopedExchange&) = delete;

 private:
  dctComm_t comm_;
  int old_;
};

// Rank r's gradient by scenario: multiples of 1/4 in [-16, 16] (exact in
// every datatype, and every sum of them the test forms exact in fp32).
//   0 mixed: some ranks empty, some dense, some sparse
//   1 one entry per rank
//   2 every entry on every rank (all-dense windows)
std::vector<char> gradient(dctDataType_t t, size_t n, int rank, int step, int scenario) {
  std::mt19937 rng(7919u * static_cast<unsigned>(step) + 31u * static_cast<unsigned>(rank) +
                   static_cast<unsigned>(scenario));
  std::uniform_int_distribution<int> value(-64, 64);
  std::uniform_real_distribution<double> u(0, 1);
  static const double fill[] = {0.3, 0.0, 1.0, 0.02, 0.1, 0.0, 0.6, 0.05};
  std::vector<char> g(n * typeSize(t), 0);
  for (size_t i = 0; i < n; i++) {
    bool on = false;
    if (scenario == 0) on = u(rng) < fill[rank % 8];
    else if (scenario == 1) on = i == (static_cast<size_t>(rank) * 13 + static_cast<size_t>(step)) % n;
    else on = true;
    store(t, g.data() + i * typeSize(t), on ? (value(rng) | 1) / 4.0 : 0.0);
  }
  return g;
}

struct Run {
  std::vector<std::vector<char>> outs;  // per step
  std::vector<char> held;               // the residual at the end (owner's part included)
};

Run run(World& w, dctAlgorithm_t algo, int exchange, dctDataType_t t, size_t n, double density, int scenario,
        int steps) {
  ScopedExchange scoped(w.comm, exchange);
  Settings s;
  s.density = density;
  s.algorithm = algo;
  s.interval = 2;
  dctConfig_t cfg = explicitConfig(s);
  dctCompressor_t c = nullptr;
  REQUIRE(dctCompressorCreate(w.comm, n, t, &cfg, &c) == dctSuccess);
  Run r;
  for (int step = 0; step < steps; step++) {
    const std::vector<char> g = gradient(t, n, w.rank, step, scenario);
    std::vector<char> out(g.size(), 0x5a);
    const dctResult_t res = dctSparseAllreduce(g.data(), out.data(), n, t, dctSum, c, w.comm, nullptr);
    INFO(std::string(dctGetLastError(w.comm)));
    REQUIRE(res == dctSuccess);
    CHECK(identicalOnAllRanks(out.data(), out.size()));
    // What the next step runs (the plan's, the kernels bound by now):
    // halving exactly where forced (the MPI transport has sendrecv).
    CHECK(dct::planAlgorithm(c, w.comm).halving == (exchange == dct::kSplitExchangeHalving));
    r.outs.push_back(out);
  }
  r.held.resize(n * (t == dctFloat64 ? 8 : 4));
  REQUIRE(dctCompressorGetResidual(c, r.held.data(), nullptr) == dctSuccess);
  dctCompressorDestroy(c);
  return r;
}

}  // namespace

TEST_CASE("halving gives the pairwise exchange's results bit for bit on grid values") {
  World w;
  for (dctAlgorithm_t algo : {dctAlgoSplit, dctAlgoGlobalTopk})
    for (dctDataType_t t : {dctFloat32, dctFloat64, dctFloat16, dctBFloat16})
      for (size_t n : {size_t(1), size_t(7), size_t(1000), size_t(4099)})
        for (int scenario = 0; scenario < 3; scenario++)
          for (double density : {0.01, 0.3, 1.0}) {
            // fp32 at every size and fill; the other types at one size, and
            // density 0.3 once: the test stays short at 8 ranks.
            if (t != dctFloat32 && (n != 1000 || density == 0.3 || scenario == 1)) continue;
            if (density == 0.3 && (n != 1000 || scenario != 0)) continue;
            CAPTURE(static_cast<int>(algo));
            CAPTURE(static_cast<int>(t));
            CAPTURE(n);
            CAPTURE(scenario);
            CAPTURE(density);
            const Run pairwise = run(w, algo, dct::kSplitExchangePairwise, t, n, density, scenario, 3);
            const Run halving = run(w, algo, dct::kSplitExchangeHalving, t, n, density, scenario, 3);
            for (size_t step = 0; step < pairwise.outs.size(); step++) CHECK(halving.outs[step] == pairwise.outs[step]);
            CHECK(halving.held == pairwise.held);
          }
}

TEST_CASE("global top-k by halving loses nothing: delivered + residuals = gradients, exactly") {
  World w;
  for (size_t n : {size_t(5), size_t(1000), size_t(20011)})
    for (double density : {0.01, 0.2}) {
      CAPTURE(n);
      CAPTURE(density);
      const int steps = 5;
      const Run r = run(w, dctAlgoGlobalTopk, dct::kSplitExchangeHalving, dctFloat64, n, density, 0, steps);
      std::vector<double> given(n, 0), delivered(n, 0), held(n), all(n);
      for (int step = 0; step < steps; step++) {
        const std::vector<char> g = gradient(dctFloat64, n, w.rank, step, 0);
        for (size_t i = 0; i < n; i++) {
          given[i] += load(dctFloat64, g.data() + 8 * i);
          delivered[i] += load(dctFloat64, r.outs[step].data() + 8 * i);
        }
      }
      std::memcpy(held.data(), r.held.data(), n * 8);
      std::vector<double> mine(n);  // summed over ranks: what is not held back was delivered
      for (size_t i = 0; i < n; i++) mine[i] = given[i] - held[i];
      MPI_Allreduce(mine.data(), all.data(), static_cast<int>(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      size_t wrong = 0;
      for (size_t i = 0; i < n; i++) wrong += all[i] != delivered[i];
      CHECK(wrong == 0);
    }
}

TEST_CASE("ranks that disagree on the exchange all fail, with a message") {
  World w;
  if (w.size < 2) return;
  ScopedExchange scoped(w.comm, w.rank == 0 ? dct::kSplitExchangePairwise : dct::kSplitExchangeHalving);
  Settings s;
  s.algorithm = dctAlgoSplit;
  s.density = 0.1;
  dctConfig_t cfg = explicitConfig(s);
  dctCompressor_t c = nullptr;
  const size_t n = 100;
  REQUIRE(dctCompressorCreate(w.comm, n, dctFloat32, &cfg, &c) == dctSuccess);
  const std::vector<char> g = gradient(dctFloat32, n, w.rank, 0, 0);
  std::vector<char> out(g.size());
  const dctResult_t res = dctSparseAllreduce(g.data(), out.data(), n, dctFloat32, dctSum, c, w.comm, nullptr);
  CHECK(res != dctSuccess);
  CHECK(std::strlen(dctGetLastError(w.comm)) > 0);
  dctCompressorDestroy(c);
}

TEST_CASE("a transport fault at any operation of a halving step fails every rank; nothing is committed") {
  World w;
  REQUIRE(dct::installFaultSeam(w.comm) == dctSuccess);
  ScopedExchange scoped(w.comm, dct::kSplitExchangeHalving);
  const size_t n = 301;
  for (dctAlgorithm_t algo : {dctAlgoSplit, dctAlgoGlobalTopk}) {
    CAPTURE(static_cast<int>(algo));
    Settings s;
    s.algorithm = algo;
    s.density = 0.1;
    dctConfig_t cfg = explicitConfig(s);
    // A compressor one step in (residuals and owner residuals to keep), its
    // second step's result and residual.
    auto fresh = [&] {
      dctCompressor_t c = nullptr;
      REQUIRE(dctCompressorCreate(w.comm, n, dctFloat32, &cfg, &c) == dctSuccess);
      const std::vector<char> g = gradient(dctFloat32, n, w.rank, 0, 0);
      std::vector<char> out(g.size());
      REQUIRE(dctSparseAllreduce(g.data(), out.data(), n, dctFloat32, dctSum, c, w.comm, nullptr) == dctSuccess);
      return c;
    };
    auto residual = [&](dctCompressor_t c) {
      std::vector<char> held(n * 4);
      REQUIRE(dctCompressorGetResidual(c, held.data(), nullptr) == dctSuccess);
      return held;
    };
    const std::vector<char> g = gradient(dctFloat32, n, w.rank, 1, 0);
    dctCompressor_t c = fresh();
    const std::vector<char> before = residual(c);
    std::vector<char> clean(g.size());
    const uint64_t start = dct::transportOps(w.comm);
    REQUIRE(dctSparseAllreduce(g.data(), clean.data(), n, dctFloat32, dctSum, c, w.comm, nullptr) == dctSuccess);
    const std::vector<uint64_t> ops = opsOnEveryRank(dct::transportOps(w.comm) - start);
    const std::vector<char> after = residual(c);
    dctCompressorDestroy(c);
    std::vector<int> victims = {-1};
    for (int r = 0; r < w.size; r++)
      if (w.size <= 4 || r == 0 || r == w.size - 1 || r == 4) victims.push_back(r);
    for (uint64_t op = 0; op < mostOps(ops); op++)
      for (int victim : victims) {
        CAPTURE(op);
        CAPTURE(victim);
        c = fresh();
        dct::armFault(w.comm, op, victim);
        std::vector<char> out(g.size(), 0x11);
        const dctResult_t res = dctSparseAllreduce(g.data(), out.data(), n, dctFloat32, dctSum, c, w.comm, nullptr);
        dct::disarmFault(w.comm);
        CHECK(allRanksAgree(res == dctSuccess));
        CHECK((res != dctSuccess) == faultFires(ops, op, victim));
        if (res != dctSuccess) {
          CHECK(residual(c) == before);
          CHECK(std::strlen(dctGetLastError(w.comm)) > 0);
        }
        std::vector<char> retry(g.size());
        if (res != dctSuccess)
          REQUIRE(dctSparseAllreduce(g.data(), retry.data(), n, dctFloat32, dctSum, c, w.comm, nullptr) == dctSuccess);
        else
          retry = out;
        CHECK(retry == clean);
        CHECK(residual(c) == after);
        dctCompressorDestroy(c);
      }
  }
}

TEST_CASE("auto: the cost model picks the exchange, alike on every rank") {
  World w;
  const dct::CostOverrides saved = w.comm->settings.cost;
  Settings s;
  s.algorithm = dctAlgoSplit;
  s.density = 0.05;
  dctConfig_t cfg = explicitConfig(s);
  const size_t n = 100000;
  const std::vector<char> g = gradient(dctFloat32, n, w.rank, 0, 0);
  std::vector<char> out(g.size());
  // Latency dominates: halving's log2 P rounds (where there is a peer);
  // the link dominates: the pairwise pieces, packed, move fewer bytes.
  for (const bool slowStart : {true, false}) {
    CAPTURE(slowStart);
    w.comm->settings.cost.alphaUs = slowStart ? 1000 : 0.001;
    w.comm->settings.cost.linkGBps = slowStart ? 100 : 0.001;
    dctCompressor_t c = nullptr;
    REQUIRE(dctCompressorCreate(w.comm, n, dctFloat32, &cfg, &c) == dctSuccess);
    REQUIRE(dctSparseAllreduce(g.data(), out.data(), n, dctFloat32, dctSum, c, w.comm, nullptr) == dctSuccess);
    CHECK(identicalOnAllRanks(out.data(), out.size()));
    const bool halving = dct::planAlgorithm(c, w.comm).halving;
    CHECK(allRanksAgree(halving));
    CHECK(halving == (slowStart && w.size > 1));
    dctCompressorDestroy(c);
  }
  w.comm->settings.cost = saved;
}
