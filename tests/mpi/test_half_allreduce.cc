// fp16/bf16 through the collectives: half tensors and fp32 tensors with a
// half wire type in dctSparseAllreduce (allgather: bit for bit against a
// plain reference that sums in fp32 in rank order; dense: all of acc by the transport's
// half allreduce, within its per-step rounding, identical on every rank),
// and half values through dctSparseAllgather.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "../common/half_reference.h"
#include "mpi_util.h"

using namespace dcttest;

namespace {

size_t sizeOf(dctDataType_t t) { return t == dctFloat64 ? 8 : (t == dctFloat32 ? 4 : 2); }

float load(dctDataType_t t, const std::vector<char>& v, size_t i) {
  uint16_t h;
  switch (t) {
    case dctFloat16: std::memcpy(&h, v.data() + 2 * i, 2); return refHalfToFloat(h);
    case dctBFloat16: std::memcpy(&h, v.data() + 2 * i, 2); return refBf16ToFloat(h);
    default: float f; std::memcpy(&f, v.data() + 4 * i, 4); return f;
  }
}

void store(dctDataType_t t, float x, std::vector<char>& v, size_t i) {
  uint16_t h = t == dctFloat16 ? refFloatToHalf(x) : refFloatToBf16(x);
  if (t == dctFloat32) std::memcpy(v.data() + 4 * i, &x, 4);
  else std::memcpy(v.data() + 2 * i, &h, 2);
}

// What a compressor sends for acc: rounded to the wire type; with a half
// wire, finite values are first clamped to the largest power of two that P
// of them cannot sum past (2^15 / P for fp16, 2^127 / P for bf16).
float sendAs(dctDataType_t wire, float acc, int ranks, std::vector<char>& scratch) {
  if (wire == dctFloat32) return acc;
  const int top = wire == dctFloat16 ? 15 : 127;
  float limit = std::ldexp(1.0f, top);
  while (limit * ranks > (wire == dctFloat16 ? 65504.0f : refBf16ToFloat(0x7f7f))) limit /= 2;
  store(wire, std::isfinite(acc) ? std::clamp(acc, -limit, limit) : acc, scratch, 0);
  return load(wire, scratch, 0);
}

// Rank r's gradient at a step: normal values, some zeros, one 1e5 (beyond
// what fp16 holds once summed) and, at step 1 on the last rank, a NaN.
std::vector<char> gradient(dctDataType_t t, size_t n, int r, int step, int size) {
  std::mt19937_64 rng(1000 * r + step);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<char> g(n * sizeOf(t));
  for (size_t i = 0; i < n; i++) store(t, i % 17 == 0 ? 0.0f : normal(rng) * (1 + r), g, i);
  if (n > 4 && t != dctFloat16) store(t, 1.0e5f, g, n / 2);
  if (n > 4 && step == 1 && r == size - 1) store(t, NAN, g, n / 3);
  return g;
}

struct HalfCase {
  dctDataType_t dtype, wire;
  dctAlgorithm_t algorithm;
  dctRedOp_t op = dctSum;
  bool inPlace = false;
};

void run(size_t n, const HalfCase& k, int steps = 3) {
  CAPTURE(n);
  CAPTURE(k.dtype);
  CAPTURE(k.wire);
  CAPTURE(k.algorithm);
  World w;
  Settings s;
  s.density = 0.05;
  s.algorithm = k.algorithm;
  dctConfig_t cfg = explicitConfig(s);
  cfg.wireType = k.wire;
  dctCompressor_t c = nullptr;
  REQUIRE(dctCompressorCreate(w.comm, n, k.dtype, &cfg, &c) == dctSuccess);
  std::vector<std::vector<float>> residual(w.size, std::vector<float>(n, 0.0f));
  std::vector<char> scratch(8);
  const size_t kTarget = std::max<size_t>(1, static_cast<size_t>(std::llround(0.05 * n)));
  for (int step = 0; step < steps; step++) {
    std::vector<float> sum(n, 0.0f), mag(n, 0.0f);
    for (int r = 0; r < w.size; r++) {  // every rank's reference compressor, in rank order
      const auto g = gradient(k.dtype, n, r, step, w.size);
      std::vector<float> acc(n), keys(n);
      for (size_t i = 0; i < n; i++) {
        acc[i] = residual[r][i] + load(k.dtype, g, i);
        keys[i] = std::isnan(acc[i]) ? INFINITY : std::fabs(acc[i]);
      }
      std::nth_element(keys.begin(), keys.begin() + (kTarget - 1), keys.end(), std::greater<float>());
      // The dense algorithm sends every nonzero entry of acc.
      const float tau = k.algorithm == dctAlgoDense ? 1.4e-45f : std::max(keys[kTarget - 1], 1.4e-45f);
      for (size_t i = 0; i < n; i++) {
        if (std::fabs(acc[i]) < tau) {
          residual[r][i] = acc[i];
          continue;
        }
        const float sent = sendAs(k.wire, acc[i], w.size, scratch), error = acc[i] - sent;
        residual[r][i] = std::isnan(error) ? 0.0f : error;
        sum[i] += sent;
        mag[i] += std::fabs(sent);
      }
    }
    const float factor = k.op == dctAvg && w.size > 1 ? 1.0f / static_cast<float>(w.size) : 1.0f;
    auto mine = gradient(k.dtype, n, w.rank, step, w.size);
    std::vector<char> out(n * sizeOf(k.dtype));
    void* recv = k.inPlace ? mine.data() : out.data();
    REQUIRE(dctSparseAllreduce(mine.data(), recv, n, k.dtype, k.op, c, w.comm, nullptr) == dctSuccess);
    if (k.inPlace) out = mine;
    REQUIRE(identicalOnAllRanks(out.data(), out.size()));
    const float ulp = k.wire == dctBFloat16 || k.dtype == dctBFloat16 ? 1.0f / 128 : 1.0f / 1024;
    for (size_t i = 0; i < n; i++) {
      std::vector<char> expected(sizeOf(k.dtype));
      store(k.dtype, sum[i] * factor, expected, 0);
      const float got = load(k.dtype, out, i), want = load(k.dtype, expected, 0);
      CAPTURE(i);
      if (std::isnan(want) || k.algorithm != dctAlgoDense) {  // allgather, split: fp32 rank-order sums
        REQUIRE(std::memcmp(out.data() + i * sizeOf(k.dtype), expected.data(), sizeOf(k.dtype)) == 0);
      } else {  // the transport's half reduction rounds once per step, in its own order
        REQUIRE(std::fabs(got - want) <= w.size * ulp * mag[i] * factor + 1e-6f);
      }
    }
  }
  dctStats_t stats;
  REQUIRE(dctCompressorGetStats(c, &stats) == dctSuccess);
  CHECK(stats.denseBytes == n * sizeOf(k.dtype));
  REQUIRE(dctCompressorDestroy(c) == dctSuccess);
}

}  // namespace

TEST_CASE("half tensors: allgather and split bit for bit, dense within the half reduction's rounding") {
  for (dctAlgorithm_t algo : {dctAlgoAllgather, dctAlgoSplit, dctAlgoDense})
    for (size_t n : {size_t(1), size_t(7), size_t(1000), size_t(100003)}) {
      run(n, {dctFloat16, dctFloat16, algo});
      run(n, {dctBFloat16, dctBFloat16, algo});
      run(n, {dctFloat16, dctBFloat16, algo});
    }
}

TEST_CASE("fp32 tensors with fp16/bf16 wire values") {
  for (dctAlgorithm_t algo : {dctAlgoAllgather, dctAlgoSplit, dctAlgoDense})
    for (size_t n : {size_t(3), size_t(1000), size_t(100003)}) {
      run(n, {dctFloat32, dctFloat16, algo});
      run(n, {dctFloat32, dctBFloat16, algo});
    }
}

TEST_CASE("half tensors: average, in place, auto") {
  run(5003, {dctFloat16, dctFloat16, dctAlgoAllgather, dctAvg});
  run(5003, {dctBFloat16, dctBFloat16, dctAlgoAllgather, dctSum, true});
  run(5003, {dctFloat16, dctFloat16, dctAlgoDense, dctAvg, true});
  run(5003, {dctFloat32, dctFloat16, dctAlgoAllgather, dctAvg, true});
  run(5003, {dctFloat16, dctFloat16, dctAlgoSplit, dctAvg, true});
  World w;
  Settings s;
  s.algorithm = dctAlgoAuto;
  dctConfig_t cfg = explicitConfig(s);
  dctCompressor_t c = nullptr;
  REQUIRE(dctCompressorCreate(w.comm, 20011, dctBFloat16, &cfg, &c) == dctSuccess);
  auto g = gradient(dctBFloat16, 20011, w.rank, 0, w.size);
  std::vector<char> out(g.size());
  for (int step = 0; step < 3; step++) {
    REQUIRE(dctSparseAllreduce(g.data(), out.data(), 20011, dctBFloat16, dctSum, c, w.comm, nullptr) == dctSuccess);
    REQUIRE(identicalOnAllRanks(out.data(), out.size()));
  }
  dctCompressorDestroy(c);
}

TEST_CASE("a wire type wider than the tensor is refused") {
  World w;
  dctConfig_t cfg = DCT_CONFIG_INITIALIZER;
  cfg.wireType = dctFloat32;
  dctCompressor_t c = nullptr;
  CHECK(dctCompressorCreate(w.comm, 10, dctBFloat16, &cfg, &c) == dctInvalidArgument);
  CHECK(std::string(dctGetLastError(w.comm)).find("wider") != std::string::npos);
}

TEST_CASE("dctSparseAllgather moves fp16 and bf16 values untouched") {
  World w;
  for (dctDataType_t t : {dctFloat16, dctBFloat16}) {
    const size_t nnz = 3 + w.rank, count = 50;
    std::vector<uint16_t> values(nnz);
    std::vector<uint32_t> indices(nnz);
    for (size_t j = 0; j < nnz; j++) values[j] = static_cast<uint16_t>(0x3c00 + 17 * w.rank + j), indices[j] = 5 * j + w.rank;
    std::vector<size_t> counts(w.size);
    size_t total = 0;
    REQUIRE(dctSparseAllgather(values.data(), indices.data(), nnz, count, nullptr, nullptr, 0, counts.data(), &total, t,
                               w.comm, nullptr) == dctSuccess);
    std::vector<uint16_t> all(total);
    std::vector<uint32_t> allIdx(total);
    REQUIRE(dctSparseAllgather(values.data(), indices.data(), nnz, count, all.data(), allIdx.data(), total,
                               counts.data(), &total, t, w.comm, nullptr) == dctSuccess);
    size_t at = 0;
    for (int r = 0; r < w.size; r++)
      for (size_t j = 0; j < counts[r]; j++, at++) {
        REQUIRE(all[at] == 0x3c00 + 17 * r + j);
        REQUIRE(allIdx[at] == 5 * j + r);
      }
  }
}
