// dctAlgoGlobalTopk under mpirun: nothing is lost (every result delivered +
// every rank's worker residual + every owner residual = every gradient,
// exactly, on grid values), results bit-identical on all ranks, the owners
// deliver about 4k entries in all whatever the rank count, the owner residual
// folds back when another plan runs, and the lossless allreduce refuses it.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/compressor.h"
#include "core/owner_target.h"
#include "transport/comm.h"
#include "mpi_util.h"

using namespace dcttest;

namespace {

// Multiples of 1/4 in [-64, 64]: every sum the test forms is exact in fp32.
template <typename T>
std::vector<T> gridGradient(size_t n, int rank, int step, bool sparse) {
  std::mt19937 rng(7919u * static_cast<unsigned>(step) + static_cast<unsigned>(rank));
  std::uniform_int_distribution<int> value(-256, 256), hole(0, 9);
  std::vector<T> g(n);
  for (T& x : g) x = sparse && hole(rng) != 0 ? T(0) : static_cast<T>(value(rng)) / T(4);
  return g;
}

template <typename T>
std::vector<double> sumOverRanks(const std::vector<T>& mine) {
  std::vector<double> wide(mine.begin(), mine.end()), all(mine.size());
  MPI_Allreduce(wide.data(), all.data(), static_cast<int>(wide.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return all;
}

template <typename T>
constexpr dctDataType_t dtypeOf() {
  return sizeof(T) == 8 ? dctFloat64 : dctFloat32;
}

// What this rank holds back: dctCompressorGetResidual (the worker residual
// with the owner residual added at its range); checked against the two
// read apart.
template <typename T>
std::vector<T> heldBack(dctCompressor_t c, size_t n) {
  std::vector<T> held(n), worker(n), owner(n);
  REQUIRE(dctCompressorGetResidual(c, held.data(), nullptr) == dctSuccess);
  std::memcpy(worker.data(), c->residual(), n * sizeof(T));
  size_t begin = 0, length = 0;
  REQUIRE(dctCompressorGetOwnerResidual(c, owner.data(), &begin, &length, nullptr) == dctSuccess);
  REQUIRE(begin + length <= n);
  for (size_t i = 0; i < length; i++) worker[begin + i] += owner[i];
  CHECK(std::memcmp(worker.data(), held.data(), n * sizeof(T)) == 0);
  return held;
}

struct Outcome {
  size_t wrong = 0;       // entries where the invariant fails
  bool identical = true;  // every result bit-identical across ranks
  uint64_t kept = 0;      // owner entries delivered in the last step, all ranks
  uint64_t received = 0;  // bytes this rank received in the last step
  size_t ownerHeld = 0;   // nonzero owner-residual entries after any (returning) step, this rank
};

// `plans` steps in order; after each, delivered so far + everything held
// back on every rank must equal every gradient so far.
template <typename T>
Outcome run(World& w, size_t n, double density, const std::vector<dctAlgorithm_t>& plans, bool sparse,
            bool errorFeedback = true, int ownerReturn = 0, size_t returnFrom = SIZE_MAX) {
  Settings s;
  s.density = density;
  s.interval = 3;
  s.errorFeedback = errorFeedback;
  s.algorithm = dctAlgoGlobalTopk;
  dctConfig_t cfg = explicitConfig(s);
  cfg.ownerReturn = ownerReturn;
  dctCompressor_t c = nullptr;
  REQUIRE(dctCompressorCreate(w.comm, n, dtypeOf<T>(), &cfg, &c) == dctSuccess);
  std::vector<double> delivered(n, 0.0), given(n, 0.0);
  Outcome o;
  for (size_t step = 0; step < plans.size(); step++) {
    // The plan is the config's: a fresh compressor would lose the state, so
    // the test switches plans the way DCT_TUNE would, through the config.
    c->config.algorithm = plans[step];
    if (step >= returnFrom) c->config.ownerReturn = 1;  // a keeping state restored into a returning run
    const std::vector<T> g = gridGradient<T>(n, w.rank, static_cast<int>(step), sparse);
    std::vector<T> out(n);
    REQUIRE(dctSparseAllreduce(g.data(), out.data(), n, dtypeOf<T>(), dctSum, c, w.comm, nullptr) == dctSuccess);
    o.identical = o.identical && identicalOnAllRanks(out.data(), n * sizeof(T));
    const std::vector<double> sumG = sumOverRanks(g);
    for (size_t i = 0; i < n; i++) {
      delivered[i] += static_cast<double>(out[i]);
      given[i] += sumG[i];
    }
    const std::vector<double> held = sumOverRanks(heldBack<T>(c, n));
    if (errorFeedback)
      for (size_t i = 0; i < n; i++) o.wrong += delivered[i] + held[i] != given[i];
    dctStats_t st;
    REQUIRE(dctCompressorGetStats(c, &st) == dctSuccess);
    MPI_Allreduce(&st.ownerKept, &o.kept, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    o.received = st.bytesReceived;
    std::vector<T> owner(n);
    size_t begin = 0, length = 0;
    REQUIRE(dctCompressorGetOwnerResidual(c, owner.data(), &begin, &length, nullptr) == dctSuccess);
    if (returnFrom == SIZE_MAX || step >= returnFrom)
      for (size_t i = 0; i < length; i++) o.ownerHeld += owner[i] != 0;
  }
  dctCompressorDestroy(c);
  return o;
}

}  // namespace

TEST_CASE("global top-k loses nothing and agrees bit for bit") {
  World w;
  const std::vector<dctAlgorithm_t> steps(6, dctAlgoGlobalTopk);
  for (size_t n : {size_t(1), size_t(7), size_t(1000), size_t(100003)})
    for (double density : {0.01, 0.2})
      for (bool sparse : {false, true}) {
        CAPTURE(n);
        CAPTURE(density);
        CAPTURE(sparse);
        const Outcome f = run<float>(w, n, density, steps, sparse);
        CHECK(f.wrong == 0);
        CHECK(f.identical);
        const Outcome d = run<double>(w, n, density, steps, sparse);
        CHECK(d.wrong == 0);
        CHECK(d.identical);
      }
}

TEST_CASE("ownerReturn: what no owner delivers goes back to the ranks that sent it, nothing lost") {
  World w;
  const std::vector<dctAlgorithm_t> steps(6, dctAlgoGlobalTopk);
  for (int exchange : {dct::kSplitExchangePairwise, dct::kSplitExchangeHalving}) {
    const int old = w.comm->settings.splitExchange;
    w.comm->settings.splitExchange = exchange;
    size_t keptByOwners = 0;
    for (size_t n : {size_t(1), size_t(7), size_t(1000), size_t(100003)})
      for (double density : {0.01, 0.2})
        for (bool sparse : {false, true}) {
          CAPTURE(exchange);
          CAPTURE(n);
          CAPTURE(density);
          CAPTURE(sparse);
          const Outcome f = run<float>(w, n, density, steps, sparse, true, 1);
          CHECK(f.wrong == 0);
          CHECK(f.identical);
          CHECK(f.ownerHeld == 0);
          const Outcome d = run<double>(w, n, density, steps, sparse, true, 1);
          CHECK(d.wrong == 0);
          CHECK(d.identical);
          CHECK(d.ownerHeld == 0);
          keptByOwners += run<float>(w, n, density, steps, sparse).ownerHeld;
        }
    w.comm->settings.splitExchange = old;
    if (w.size > 1) CHECK(keptByOwners > 0);  // the same steps without it leave owner residuals
  }
  // Owner residuals left by keeping steps join the worker residuals at the first returning one.
  for (size_t n : {size_t(1000), size_t(100003)}) {
    CAPTURE(n);
    const Outcome o = run<float>(w, n, 0.01, steps, false, true, 0, 3);
    CHECK(o.wrong == 0);
    CHECK(o.identical);
    CHECK(o.ownerHeld == 0);
  }
}

TEST_CASE("the owner residual folds back when another plan runs") {
  World w;
  const std::vector<dctAlgorithm_t> plans = {dctAlgoGlobalTopk, dctAlgoGlobalTopk, dctAlgoSplit,    dctAlgoGlobalTopk,
                                             dctAlgoAllgather,  dctAlgoDense,      dctAlgoGlobalTopk};
  for (size_t n : {size_t(5), size_t(4099)}) {
    CAPTURE(n);
    const Outcome o = run<float>(w, n, 0.05, plans, false);
    CHECK(o.wrong == 0);
    CHECK(o.identical);
  }
}

TEST_CASE("the owners deliver about 4k entries in all, fewer bytes than split's union") {
  World w;
  const size_t n = 200003;
  const double density = 0.01, k = density * n, target = dct::kOwnerTargetScale * k;
  const std::vector<dctAlgorithm_t> global(8, dctAlgoGlobalTopk), split(8, dctAlgoSplit);
  const Outcome g = run<float>(w, n, density, global, false);
  // Each rank selects its own k positions: below 4 ranks their sum has
  // fewer than 4k nonzeros, and the owners deliver all of them.
  CHECK(static_cast<double>(g.kept) > 0.5 * std::min(target, w.size * k));
  CHECK(static_cast<double>(g.kept) < 2.0 * target);
  if (w.size > dct::kOwnerTargetScale) {
    // Every rank selects its own k positions: split delivers their union.
    // (At fewer ranks the union is under the owners' 4k: they deliver all
    // of it and some of their residual too.)
    const Outcome s = run<float>(w, n, density, split, false);
    CHECK(g.received < s.received);
  }
}

TEST_CASE("a checkpoint of the residual carries the owner's part: a restored run loses nothing") {
  World w;
  const size_t n = 3001;
  Settings s;
  s.density = 0.05;
  s.algorithm = dctAlgoGlobalTopk;
  dctConfig_t cfg = explicitConfig(s);
  dctCompressor_t a = nullptr, b = nullptr;
  REQUIRE(dctCompressorCreate(w.comm, n, dctFloat32, &cfg, &a) == dctSuccess);
  REQUIRE(dctCompressorCreate(w.comm, n, dctFloat32, &cfg, &b) == dctSuccess);
  std::vector<double> delivered(n, 0.0), given(n, 0.0);
  std::vector<float> out(n), saved(n);
  auto step = [&](dctCompressor_t c, int t) {
    const std::vector<float> g = gridGradient<float>(n, w.rank, t, false);
    REQUIRE(dctSparseAllreduce(g.data(), out.data(), n, dctFloat32, dctSum, c, w.comm, nullptr) == dctSuccess);
    const std::vector<double> sumG = sumOverRanks(g);
    for (size_t i = 0; i < n; i++) {
      delivered[i] += out[i];
      given[i] += sumG[i];
    }
  };
  for (int t = 0; t < 3; t++) step(a, t);
  REQUIRE(dctCompressorGetResidual(a, saved.data(), nullptr) == dctSuccess);  // the checkpoint
  REQUIRE(dctCompressorSetResidual(b, saved.data(), nullptr) == dctSuccess);
  size_t begin = 0, length = 1;
  REQUIRE(dctCompressorGetOwnerResidual(b, nullptr, &begin, &length, nullptr) == dctSuccess);
  CHECK(length == 0);
  for (int t = 3; t < 6; t++) step(b, t);
  std::vector<float> held(n);
  REQUIRE(dctCompressorGetResidual(b, held.data(), nullptr) == dctSuccess);
  const std::vector<double> allHeld = sumOverRanks(held);
  size_t wrong = 0;
  for (size_t i = 0; i < n; i++) wrong += delivered[i] + allHeld[i] != given[i];
  CHECK(wrong == 0);
  dctCompressorDestroy(a);
  dctCompressorDestroy(b);
}

TEST_CASE("without error feedback the owners keep nothing back") {
  World w;
  const size_t n = 3001;
  const Outcome o = run<float>(w, n, 0.05, std::vector<dctAlgorithm_t>(3, dctAlgoGlobalTopk), false, false);
  CHECK(o.identical);
  Settings s;
  s.algorithm = dctAlgoGlobalTopk;
  s.errorFeedback = false;
  dctConfig_t cfg = explicitConfig(s);
  dctCompressor_t c = nullptr;
  REQUIRE(dctCompressorCreate(w.comm, n, dctFloat32, &cfg, &c) == dctSuccess);
  const std::vector<float> g = gridGradient<float>(n, w.rank, 0, false);
  std::vector<float> out(n);
  REQUIRE(dctSparseAllreduce(g.data(), out.data(), n, dctFloat32, dctSum, c, w.comm, nullptr) == dctSuccess);
  size_t begin = 1, length = 1;
  CHECK(dctCompressorGetOwnerResidual(c, nullptr, &begin, &length, nullptr) == dctSuccess);
  CHECK(length == 0);
  dctCompressorDestroy(c);
}

TEST_CASE("density 1 delivers the exact sum, as split does") {
  World w;
  const size_t n = 1001;
  for (dctAlgorithm_t algo : {dctAlgoGlobalTopk, dctAlgoSplit}) {
    Settings s;
    s.density = 1.0;
    s.algorithm = algo;
    dctConfig_t cfg = explicitConfig(s);
    dctCompressor_t c = nullptr;
    REQUIRE(dctCompressorCreate(w.comm, n, dctFloat32, &cfg, &c) == dctSuccess);
    const std::vector<float> g = gridGradient<float>(n, w.rank, 3, true);
    std::vector<float> out(n);
    REQUIRE(dctSparseAllreduce(g.data(), out.data(), n, dctFloat32, dctSum, c, w.comm, nullptr) == dctSuccess);
    const std::vector<double> sum = sumOverRanks(g);
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++) wrong += static_cast<double>(out[i]) != sum[i];
    CHECK(wrong == 0);
    dctStats_t st;
    REQUIRE(dctCompressorGetStats(c, &st) == dctSuccess);
    CHECK(st.ownerResidualMass == 0.0);
    dctCompressorDestroy(c);
  }
}

TEST_CASE("bad input: the lossless allreduce refuses global top-k; bad owner-residual queries") {
  World w;
  const uint32_t idx[1] = {0};
  const float val[1] = {1.f};
  float dense[4] = {};
  CHECK(dctSparseInputAllreduce(idx, val, 1, 4, dctFloat32, dctSum, dctAlgoGlobalTopk, dense, nullptr, nullptr, 0,
                                nullptr, nullptr, w.comm, nullptr) == dctInvalidArgument);
  CHECK(std::string(dctGetLastError(w.comm)).find("lossless") != std::string::npos);
  Settings s;
  s.algorithm = dctAlgoGlobalTopk;
  dctConfig_t cfg = explicitConfig(s);
  dctCompressor_t c = nullptr;
  REQUIRE(dctCompressorCreate(w.comm, 16, dctFloat32, &cfg, &c) == dctSuccess);
  size_t begin = 0;
  CHECK(dctCompressorGetOwnerResidual(c, nullptr, &begin, nullptr, nullptr) == dctInvalidArgument);
  CHECK(dctCompressorGetOwnerResidual(nullptr, nullptr, &begin, &begin, nullptr) == dctInvalidArgument);
  dctCompressorDestroy(c);
}
