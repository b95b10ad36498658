// dctCompressorSaveState / LoadState with the state on the device: a device
// compressor's state (copied off on a stream) continues the run bit for bit
// in a fresh device compressor (held until its first step), in a used one,
// and in a host compressor; a host state continues on the device.
#include <cuda_runtime.h>

#include <vector>

#include "../common/typed_gradient.h"
#include "api/config.h"
#include "core/compressor.h"
#include "cuda_util.h"

using namespace dct;
using namespace dct::test;
using dcttest::typeBytes;
using dcttest::typedGradient;
using Bytes = std::vector<unsigned char>;

namespace {

dctConfig_t config(dctThresholdMethod_t method) {
  dctConfig_t cfg = DCT_CONFIG_INITIALIZER;
  cfg.density = 0.01;
  cfg.thresholdInterval = 5;
  cfg.thresholdMethod = method;
  cfg.seed = 9;
  return cfg;
}

struct Out {
  size_t nnz = 0;
  Bytes indices, values;
  bool operator==(const Out& o) const { return nnz == o.nnz && indices == o.indices && values == o.values; }
};

struct Runner {
  dctCompressor_t c = nullptr;
  size_t n;
  dctDataType_t dtype;
  bool device;
  cudaStream_t stream = nullptr;
  DeviceArray<unsigned char> dGrad, dIdx, dVal, dRes;
  Runner(size_t count, dctDataType_t type, dctConfig_t cfg, bool onDevice)
      : n(count), dtype(type), device(onDevice), dGrad(count * typeBytes(type)), dIdx(count * 4),
        dVal(count * typeBytes(type)), dRes(count * 8) {
    dctConfig_t resolved;
    REQUIRE(resolveConfig(nullptr, dct::configEnvFromEnv(), &cfg, &resolved) == dctSuccess);
    REQUIRE(compressorCreate(nullptr, 1, n, dtype, resolved, &c) == dctSuccess);
    CUDA_REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }
  ~Runner() {
    compressorDestroy(c);
    cudaStreamDestroy(stream);
  }
  Out step(int t) {
    const Bytes g = typedGradient(n, dtype, 0, t);
    Out o;
    o.indices.resize(n * 4);
    o.values.resize(n * typeBytes(dtype));
    if (!device) {
      REQUIRE(dctCompress(c, g.data(), o.indices.data(), o.values.data(), n, &o.nnz, nullptr) == dctSuccess);
    } else {
      dGrad.upload(g);
      REQUIRE(dctCompress(c, dGrad.get(), dIdx.get(), dVal.get(), n, &o.nnz, stream) == dctSuccess);
      CUDA_REQUIRE(cudaStreamSynchronize(stream));
      o.indices = dIdx.download();
      o.values = dVal.download();
    }
    o.indices.resize(o.nnz * 4);
    o.values.resize(o.nnz * typeBytes(dtype));
    return o;
  }
  Bytes save() {
    size_t bytes = 0;
    REQUIRE(dctCompressorSaveState(c, nullptr, &bytes, stream) == dctSuccess);
    Bytes b(bytes);
    REQUIRE(dctCompressorSaveState(c, b.data(), &bytes, stream) == dctSuccess);
    return b;
  }
  dctResult_t load(const Bytes& b) { return dctCompressorLoadState(c, b.data(), b.size(), stream); }
  Bytes residual() {
    const size_t bytes = n * typeBytes(c->accType);
    if (!device) {
      Bytes r(bytes);
      REQUIRE(dctCompressorGetResidual(c, r.data(), nullptr) == dctSuccess);
      return r;
    }
    REQUIRE(dctCompressorGetResidual(c, dRes.get(), stream) == dctSuccess);
    Bytes r = dRes.download();
    r.resize(bytes);
    return r;
  }
};

void continues(Runner& a, Runner& b, int from, int steps) {
  for (int t = from; t < from + steps; t++) {
    CAPTURE(t);
    REQUIRE(a.step(t) == b.step(t));
    REQUIRE(a.residual() == b.residual());
  }
}

}  // namespace

TEST_CASE("a device compressor's state continues bit for bit on the device and on the host") {
  for (dctThresholdMethod_t method : {dctThresholdSampled, dctThresholdExact, dctThresholdBisect})
    for (dctDataType_t dtype : {dctFloat32, dctBFloat16}) {
      CAPTURE(method);
      CAPTURE(dtype);
      const size_t n = 100003;
      Runner a(n, dtype, config(method), true), fresh(n, dtype, config(method), true),
          used(n, dtype, config(method), true), host(n, dtype, config(method), false);
      for (int t = 0; t < 7; t++) a.step(t);  // mid-interval (L = 5)
      for (int t = 20; t < 22; t++) used.step(t);
      const Bytes saved = a.save();
      REQUIRE(fresh.load(saved) == dctSuccess);
      CHECK(fresh.c->ops == nullptr);  // held until its first step
      REQUIRE(used.load(saved) == dctSuccess);
      REQUIRE(host.load(saved) == dctSuccess);
      CHECK(used.save() == saved);
      for (int t = 7; t < 15; t++) {
        CAPTURE(t);
        const Out o = a.step(t);
        REQUIRE(fresh.step(t) == o);
        REQUIRE(used.step(t) == o);
        REQUIRE(host.step(t) == o);
      }
      CHECK(fresh.save() == a.save());
      CHECK(host.save() == a.save());
    }
}

TEST_CASE("a host compressor's state continues on the device") {
  const size_t n = 30011;
  Runner h(n, dctFloat32, config(dctThresholdSampled), false), d(n, dctFloat32, config(dctThresholdSampled), true);
  for (int t = 0; t < 6; t++) h.step(t);
  d.step(40);  // bound and used
  REQUIRE(d.load(h.save()) == dctSuccess);
  continues(h, d, 6, 8);
}
