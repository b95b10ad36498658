// dctSparseAllreduce under mpirun: against a reference built from every
// rank's selection, for every algorithm, and bit-identical on all ranks.
#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "mpi_util.h"

using namespace dcttest;

namespace {

template <typename T>
constexpr dctDataType_t dtypeOf() {
  return sizeof(T) == 8 ? dctFloat64 : dctFloat32;
}

template <typename T>
using GradFn = std::function<void(int rank, int step, std::vector<T>&)>;

template <typename T>
void normalGrad(int rank, int step, std::vector<T>& g) {
  std::mt19937_64 rng(1000 * rank + step);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (auto& x : g) x = static_cast<T>(normal(rng));
}

struct Case {
  dctAlgorithm_t algo = dctAlgoAuto;
  double density = 0.01;
  dctRedOp_t op = dctSum;
  bool inPlace = false;
  int steps = 3;
  int warmup = 0;
  int interval = 2;
};

// Runs `steps` collective steps. Compressor A does dctSparseAllreduce;
// compressor B, same config and inputs, does dctCompress so the test sees
// each rank's exact selection and can build the reference sum itself.
template <typename T>
void run(size_t n, const Case& k, GradFn<T> grad, std::vector<T>* lastOut = nullptr) {
  World w;
  CAPTURE(n);
  CAPTURE(k.algo);
  CAPTURE(k.density);
  dctConfig_t cfg = DCT_CONFIG_INITIALIZER;
  cfg.density = k.density;
  cfg.algorithm = k.algo;
  cfg.warmupSteps = k.warmup;
  cfg.thresholdInterval = k.interval;
  dctCompressor_t a = nullptr, b = nullptr;
  REQUIRE(dctCompressorCreate(w.comm, n, dtypeOf<T>(), &cfg, &a) == dctSuccess);
  REQUIRE(dctCompressorCreate(w.comm, n, dtypeOf<T>(), &cfg, &b) == dctSuccess);
  std::vector<T> g(n), out(n), val(n);
  std::vector<uint32_t> idx(n);
  for (int step = 0; step < k.steps; step++) {
    CAPTURE(step);
    grad(w.rank, step, g);
    size_t nnz = 0;
    REQUIRE(dctCompress(b, g.data(), idx.data(), val.data(), n, &nnz, nullptr) == dctSuccess);
    T* send = g.data();
    if (k.inPlace) {
      out = g;
      send = out.data();
    }
    REQUIRE(dctSparseAllreduce(send, out.data(), n, dtypeOf<T>(), k.op, a, w.comm, nullptr) ==
            dctSuccess);
    dctStats_t stats;
    REQUIRE(dctCompressorGetStats(a, &stats) == dctSuccess);
    CHECK(stats.step == static_cast<uint64_t>(step + 1));
    bool warm = step < k.warmup;
    if (!warm) CHECK(stats.nnz == nnz);

    // Reference: every rank's message added in rank order (or, in warm-up,
    // the dense sum of the raw gradients).
    std::vector<T> ref(n, T(0)), mag(n, T(0));
    std::vector<uint32_t> allIdx;
    std::vector<T> allVal;
    gatherMessages(idx, val, nnz, allIdx, allVal);
    for (size_t j = 0; j < allIdx.size(); j++) {
      ref[allIdx[j]] += allVal[j];
      mag[allIdx[j]] += std::fabs(allVal[j]);
    }
    if (k.op == dctAvg)
      for (size_t i = 0; i < n; i++) ref[i] *= static_cast<T>(1.0 / w.size);
    bool exact = stats.algorithm == dctAlgoAllgather;
    if (k.algo != dctAlgoAuto && !warm) CHECK(stats.algorithm == k.algo);
    size_t wrong = 0;
    const T eps = std::numeric_limits<T>::epsilon();
    for (size_t i = 0; i < n; i++) {
      if (std::isnan(ref[i]) || std::isnan(out[i])) {
        wrong += std::isnan(ref[i]) != std::isnan(out[i]);
      } else if (exact) {
        wrong += std::memcmp(&ref[i], &out[i], sizeof(T)) != 0;
      } else {
        wrong += !(out[i] == ref[i] || std::fabs(out[i] - ref[i]) <= 4 * w.size * eps * mag[i]);
      }
    }
    CHECK(wrong == 0);
    CHECK(identicalOnAllRanks(out.data(), n * sizeof(T)));
  }
  if (lastOut) *lastOut = out;
  dctCompressorDestroy(a);
  dctCompressorDestroy(b);
}

}  // namespace

TEST_CASE("every algorithm matches the reference, fp32 and fp64, odd sizes") {
  for (dctAlgorithm_t algo : {dctAlgoAllgather, dctAlgoDense, dctAlgoAuto}) {
    for (size_t n : {size_t(1), size_t(2), size_t(7), size_t(1001), size_t(100003)}) {
      Case k;
      k.algo = algo;
      run<float>(n, k, normalGrad<float>);
      run<double>(n, k, normalGrad<double>);
    }
  }
}

TEST_CASE("large odd size with the exact-size workers path") {
  Case k;
  k.steps = 2;
  run<float>(1000003, k, normalGrad<float>);
}

TEST_CASE("average, in place, and warm-up") {
  Case avg;
  avg.op = dctAvg;
  run<float>(5003, avg, normalGrad<float>);
  Case inPlace;
  inPlace.inPlace = true;
  inPlace.algo = dctAlgoAllgather;
  run<float>(5003, inPlace, normalGrad<float>);
  inPlace.algo = dctAlgoDense;
  run<double>(5003, inPlace, normalGrad<double>);
  Case warm;
  warm.warmup = 2;
  warm.steps = 4;
  run<float>(3001, warm, normalGrad<float>);
}

TEST_CASE("ranks with empty selections") {
  // Odd ranks send nothing at all (zero gradients).
  GradFn<float> sparse = [](int rank, int step, std::vector<float>& g) {
    if (rank % 2) std::fill(g.begin(), g.end(), 0.0f);
    else normalGrad<float>(rank, step, g);
  };
  for (dctAlgorithm_t algo : {dctAlgoAllgather, dctAlgoDense, dctAlgoAuto}) {
    Case k;
    k.algo = algo;
    run<float>(4099, k, sparse);
  }
  // Every rank empty.
  GradFn<float> zeros = [](int, int, std::vector<float>& g) { std::fill(g.begin(), g.end(), 0.0f); };
  std::vector<float> out;
  run<float>(4099, Case{}, zeros, &out);
  for (float x : out) REQUIRE(x == 0.0f);
}

TEST_CASE("density 1: everything is sent") {
  for (dctAlgorithm_t algo : {dctAlgoAllgather, dctAlgoDense, dctAlgoAuto}) {
    Case k;
    k.algo = algo;
    k.density = 1.0;
    run<float>(2053, k, normalGrad<float>);
  }
}

TEST_CASE("a NaN on one rank reaches every rank at that index") {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  GradFn<float> withNan = [size](int rank, int step, std::vector<float>& g) {
    normalGrad<float>(rank, step, g);
    if (rank == size - 1) {
      g[5] = std::numeric_limits<float>::quiet_NaN();
      g[9] = std::numeric_limits<float>::infinity();
    }
  };
  for (dctAlgorithm_t algo : {dctAlgoAllgather, dctAlgoDense}) {
    Case k;
    k.algo = algo;
    k.steps = 1;
    std::vector<float> out;
    run<float>(1000, k, withNan, &out);
    CHECK(std::isnan(out[5]));
    CHECK(std::isinf(out[9]));
  }
}
