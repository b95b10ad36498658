// Hierarchical dctSparseAllreduce (DCT_HIERARCHY, nodes faked with
// DCT_LOCAL_SIZE) under mpirun: bit for bit the reference run on the nodes'
// sums with one compressor per node, on every rank; nothing lost (what was
// delivered plus the leaders' residuals is every gradient); disagreements
// fail every rank without a hang.
//
// Gradients lie on a grid of 2^-10 well inside fp32's range, so every sum
// of them is exact in any order: the node reduce and a dense exchange,
// whose order belongs to MPI, are then as exact as the rank-order merge.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/compressor.h"
#include "mpi_util.h"
#include "reference.h"

using namespace dcttest;

namespace {

template <typename T>
constexpr dctDataType_t dtypeOf() {
  return sizeof(T) == 8 ? dctFloat64 : dctFloat32;
}

// Seeded, on the grid, different for every (rank, step); rank 1 sends zeros.
template <typename T>
std::vector<T> gridGrad(int rank, int step, size_t n) {
  std::vector<T> g(n, T(0));
  if (rank == 1) return g;
  std::mt19937_64 rng(7919 * rank + step);
  std::normal_distribution<double> normal(0.0, 1.0);
  // + 0.0: no -0, which a dense step may deliver as is where the reference adds it to a zero residual
  for (auto& x : g) x = static_cast<T>(std::round(normal(rng) * 1024.0) / 1024.0 + 0.0);
  return g;
}

struct Case {
  dctAlgorithm_t algorithm = dctAlgoAllgather;
  dctRedOp_t op = dctSum;
  bool inPlace = false;
  int interval = 1;
  int steps = 4;
};

// The library on a comm with nodes of `local` ranks against the reference:
// each node's gradient is the sum of its ranks', compressed by its own
// reference compressor; the result is the node-order sum of their messages.
template <typename T>
void checkAgainstReference(int local, size_t n, const Case& k) {
  World w(local);
  CAPTURE(local);
  CAPTURE(n);
  CAPTURE(k.algorithm);
  CAPTURE(k.op);
  CAPTURE(k.inPlace);
  const int nodes = (w.size + local - 1) / local, myNode = w.rank / local;
  Settings s;
  s.algorithm = k.algorithm;
  s.interval = k.interval;
  const dctConfig_t cfg = explicitConfig(s);
  dctCompressor_t c = nullptr;
  REQUIRE(dctCompressorCreate(w.comm, n, dtypeOf<T>(), &cfg, &c) == dctSuccess);
  std::vector<RefCompressor<T>> refs(nodes, RefCompressor<T>(n, RefConfig{s.density, s.interval, true, 0}));
  const double scale = k.op == dctAvg && w.size > 1 ? 1.0 / w.size : 1.0;
  for (int step = 0; step < k.steps; step++) {
    CAPTURE(step);
    std::vector<T> g = gridGrad<T>(w.rank, step, n), out(n, T(0));
    if (k.inPlace) out = g;
    REQUIRE(dctSparseAllreduce(k.inPlace ? out.data() : g.data(), out.data(), n, dtypeOf<T>(), k.op, c, w.comm,
                               nullptr) == dctSuccess);
    dctStats_t st;
    REQUIRE(dctCompressorGetStats(c, &st) == dctSuccess);
    CHECK(st.step == static_cast<uint64_t>(step + 1));
    CHECK(identicalOnAllRanks(&st.algorithm, sizeof(st.algorithm)));
    if (k.algorithm != dctAlgoAuto) CHECK(st.algorithm == k.algorithm);

    std::vector<uint32_t> idx;
    std::vector<T> val;
    double myTau = 0;
    for (int node = 0; node < nodes; node++) {
      std::vector<T> sum(n, T(0));
      for (int r = node * local; r < std::min(w.size, (node + 1) * local); r++) {
        const std::vector<T> gr = gridGrad<T>(r, step, n);
        for (size_t i = 0; i < n; i++) sum[i] += gr[i];
      }
      RefMessage<T> m = refs[node].step(sum, 0, st.algorithm == dctAlgoDense);
      idx.insert(idx.end(), m.idx.begin(), m.idx.end());
      val.insert(val.end(), m.val.begin(), m.val.end());
      if (node == myNode) myTau = m.tau;
    }
    CHECK(st.threshold == myTau);  // the node's leader's tau, on its every rank
    std::vector<T> want, mag;
    rankOrderSum(n, idx, val, scale, want, mag);
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++) wrong += !sameBits(out[i], want[i]);
    CHECK(wrong == 0);
    CHECK(identicalOnAllRanks(out.data(), n * sizeof(T)));
  }
  dctCompressorDestroy(c);
}

}  // namespace

TEST_CASE("hierarchical allreduce matches the per-node reference bit for bit on every rank") {
  for (int local : {1, 2, 3})
    for (size_t n : {1, 7, 1000, 100003})
      for (dctAlgorithm_t algo : {dctAlgoAllgather, dctAlgoSplit, dctAlgoDense, dctAlgoAuto}) {
        Case k;
        k.algorithm = algo;
        checkAgainstReference<float>(local, n, k);
      }
}

TEST_CASE("hierarchical allreduce: average, in place, fp64, tau kept between estimates") {
  for (int local : {2, 3}) {
    Case k;
    k.op = dctAvg;
    checkAgainstReference<float>(local, 1000, k);
    k.inPlace = true;
    checkAgainstReference<float>(local, 1001, k);
    k.interval = 3;
    k.steps = 6;
    checkAgainstReference<double>(local, 100003, k);
  }
}

TEST_CASE("hierarchical allreduce loses nothing: results plus the leaders' residuals are every gradient") {
  World w(2);
  const size_t n = 10007;
  Settings s;
  s.algorithm = dctAlgoAuto;
  s.method = dctThresholdSampled;
  s.interval = 3;
  const dctConfig_t cfg = explicitConfig(s);
  dctCompressor_t c = nullptr;
  REQUIRE(dctCompressorCreate(w.comm, n, dctFloat32, &cfg, &c) == dctSuccess);
  std::vector<double> delivered(n, 0.0), given(n, 0.0);
  for (int step = 0; step < 7; step++) {
    std::vector<float> g = gridGrad<float>(w.rank, step, n), out(n);
    REQUIRE(dctSparseAllreduce(g.data(), out.data(), n, dctFloat32, dctSum, c, w.comm, nullptr) == dctSuccess);
    for (size_t i = 0; i < n; i++) delivered[i] += out[i];
    for (int r = 0; r < w.size; r++) {
      const std::vector<float> gr = gridGrad<float>(r, step, n);
      for (size_t i = 0; i < n; i++) given[i] += gr[i];
    }
  }
  // Every rank's residual (zero off the leaders) summed over the comm.
  const float* res = static_cast<const float*>(c->residual());
  std::vector<double> mine(res, res + n), kept(n);
  MPI_Allreduce(mine.data(), kept.data(), static_cast<int>(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  size_t lost = 0;
  for (size_t i = 0; i < n; i++) lost += delivered[i] + kept[i] != given[i];
  CHECK(lost == 0);
  if (w.rank % 2 == 1) {  // not a leader: never compressed
    size_t nonzero = 0;
    for (size_t i = 0; i < n; i++) nonzero += res[i] != 0.0f;
    CHECK(nonzero == 0);
  }
  dctCompressorDestroy(c);
}

TEST_CASE("hierarchical allreduce: a rank that disagrees fails every rank, and the next call works") {
  World w(2);
  const size_t n = 1000;
  Settings s;
  const dctConfig_t cfg = explicitConfig(s);
  dctCompressor_t c = nullptr;
  REQUIRE(dctCompressorCreate(w.comm, n, dctFloat32, &cfg, &c) == dctSuccess);
  std::vector<float> g = gridGrad<float>(w.rank, 0, n), out(n);
  // The last rank: inside a node when it has a partner, across nodes always.
  const int odd = w.size - 1;
  const dctResult_t bad = dctSparseAllreduce(g.data(), w.rank == odd ? nullptr : out.data(), n, dctFloat32, dctSum,
                                             c, w.comm, nullptr);
  CHECK(bad != dctSuccess);
  CHECK(std::strlen(dctGetLastError(w.comm)) > 0);
  CHECK(allTrue(bad == (w.rank == odd ? dctInvalidArgument : dctInvalidUsage)));
  dctStats_t st;
  REQUIRE(dctCompressorGetStats(c, &st) == dctSuccess);
  CHECK(st.step == 0);
  REQUIRE(dctSparseAllreduce(g.data(), out.data(), n, dctFloat32, dctSum, c, w.comm, nullptr) == dctSuccess);
  CHECK(identicalOnAllRanks(out.data(), n * sizeof(float)));
  dctCompressorDestroy(c);
}

TEST_CASE("ranks that disagree on DCT_HIERARCHY all fail dctCommInitMpi") {
  World w;
  if (w.size < 2) return;
  const ScopedEnv hierarchy("DCT_HIERARCHY", w.rank == 1 ? 1 : 0);
  dctComm_t comm = nullptr;
  const dctResult_t res = dctCommInitMpi(MPI_COMM_WORLD, &comm);
  CHECK(res == dctInvalidUsage);
  CHECK(comm == nullptr);
  CHECK(std::strstr(dctGetLastError(nullptr), "DCT_HIERARCHY") != nullptr);
}
