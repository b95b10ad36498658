// The whole DCT-DP step (threshold schedule, select, drift re-estimate with
// undo, capacity cuts, EF off, warm-up) on device buffers against the same
// compressor on host buffers: every step's message, tau and residual agree.
#include <random>

#include "api/config.h"
#include "core/compressor.h"
#include "cuda_util.h"

using namespace dct;
using namespace dct::test;

namespace {

struct Pair {
  dctCompressor_t host = nullptr, device = nullptr;
  size_t n, capacity;
  std::vector<uint32_t> idx;
  std::vector<float> val;
  DeviceArray<uint32_t> dIdx;
  DeviceArray<float> dVal, dGrad;
  Pair(size_t n_, dctConfig_t cfg, size_t capacity_)
      : n(n_), capacity(capacity_), idx(capacity_), val(capacity_), dIdx(capacity_), dVal(capacity_),
        dGrad(n_) {
    dctConfig_t resolved;
    REQUIRE(resolveConfig(nullptr, dct::configEnvFromEnv(), &cfg, &resolved) == dctSuccess);
    REQUIRE(compressorCreate(nullptr, 1, n, dctFloat32, resolved, &host) == dctSuccess);
    REQUIRE(compressorCreate(nullptr, 1, n, dctFloat32, resolved, &device) == dctSuccess);
    std::vector<float> h(1);
    REQUIRE(bindTwin(host, h.data(), "test") == dctSuccess);
    REQUIRE(bindTwin(device, dGrad.get(), "test") == dctSuccess);
    REQUIRE(device->ops == &cudaKernelOps());
  }
  ~Pair() {
    compressorDestroy(host);
    compressorDestroy(device);
  }
  void step(const std::vector<float>& grad, int t) {
    CAPTURE(t);
    Message hm{idx.data(), val.data(), capacity, 0, nullptr};
    StepDraft hd, dd;
    REQUIRE(compressStep(host, grad.data(), hm, hd, nullptr) == dctSuccess);
    dGrad.upload(grad);
    Message dm{dIdx.get(), dVal.get(), capacity, 0, nullptr};
    REQUIRE(compressStep(device, dGrad.get(), dm, dd, nullptr) == dctSuccess);
    REQUIRE(device->ops->synchronize(device->kernels, nullptr) == dctSuccess);
    commitStep(host, hd, 0, 0, dctAlgoAllgather);
    commitStep(device, dd, 0, 0, dctAlgoAllgather);

    REQUIRE(dm.nnz == hm.nnz);
    CHECK(sameBits(device->tau.tau, host->tau.tau));
    CHECK(device->stats.thresholdEstimates == host->stats.thresholdEstimates);
    CHECK(device->stats.nonFinite == host->stats.nonFinite);
    const auto di = dIdx.download();
    for (size_t j = 0; j < hm.nnz; j++) REQUIRE(di[j] == idx[j]);
    requireSameValues(dVal.download(), val, hm.nnz);
    std::vector<float> residual(n);
    CUDA_REQUIRE(cudaMemcpy(residual.data(), device->residual(), n * sizeof(float), cudaMemcpyDeviceToHost));
    const float* hostResidual = static_cast<const float*>(host->residual());
    for (size_t i = 0; i < n; i++) REQUIRE(sameValue(residual[i], hostResidual[i]));
  }
};

// Gradients whose scale jumps 100x at step 30 (drift) and back at 45; one
// NaN at step 20 (always sent, never kept).
std::vector<float> gradient(size_t n, int step, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.f, 1.f);
  float scale = step >= 30 && step < 45 ? 100.f : 1.f;
  std::vector<float> g(n);
  for (auto& x : g) x = scale * normal(rng);
  if (step == 20) g[n / 2] = std::numeric_limits<float>::quiet_NaN();
  return g;
}

dctConfig_t config(double density, int interval) {
  dctConfig_t cfg = DCT_CONFIG_INITIALIZER;
  cfg.density = density;
  cfg.thresholdInterval = interval;
  return cfg;
}

void run(size_t n, dctConfig_t cfg, size_t capacity, int steps) {
  Pair p(n, cfg, capacity);
  std::mt19937_64 rng(17);
  for (int t = 0; t < steps; t++) p.step(gradient(n, t, rng), t);
}

}  // namespace

TEST_CASE("device compressor steps equal host compressor steps (sampled tau, drift)") {
  run(100003, config(0.01, 10), 100003, 60);
  run(1000003, config(0.001, 1000), 1000003, 60);
}

TEST_CASE("device compressor: exact tau, capacity cuts, warm-up, no error feedback") {
  auto exact = config(0.05, 7);
  exact.thresholdMethod = dctThresholdExact;
  run(30011, exact, 30011, 60);
  run(100003, config(0.01, 10), 37, 60);
  auto warm = config(0.01, 10);
  warm.warmupSteps = 3;
  run(100003, warm, 100003, 12);
  auto noEf = config(0.02, 5);
  noEf.errorFeedback = 0;
  run(100003, noEf, 100003, 20);
}
