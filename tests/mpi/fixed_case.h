// What the fixed-capacity tests share (test_fixed_capacity: the allgather
// slots; test_fixed_global_topk: global top-k's pieces): their gradients,
// a compressor handle, and the two transaction cases every fixed plan must
// pass: a step that fails on one rank fails on every rank and a retry is
// exact; a saved state continues bit for bit.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "mpi_util.h"

namespace dcttest {

// Normal draws of `scale` on every rank but rank 1, which sends zeros (an
// empty payload); grid: rounded to multiples of 1/64, so that sums of them
// are exact in fp64.
inline std::vector<double> fixedGradient(size_t n, int rank, int step, double scale = 1.0, bool grid = false) {
  std::vector<double> g(n, 0.0);
  if (rank == 1) return g;
  std::mt19937 rng(977u * static_cast<unsigned>(step) + 13u * static_cast<unsigned>(rank) + 1u);
  std::normal_distribution<double> normal(0.0, scale);
  for (double& x : g) x = grid ? std::round(normal(rng) * 64) / 64 : normal(rng);
  return g;
}

template <typename T>
std::vector<T> as(const std::vector<double>& g) {
  return std::vector<T>(g.begin(), g.end());
}

inline dctDataType_t typeOf(float) { return dctFloat32; }
inline dctDataType_t typeOf(double) { return dctFloat64; }

struct FixedCompressor {
  dctCompressor_t c = nullptr;
  FixedCompressor(dctComm_t comm, size_t n, dctDataType_t type, const Settings& s) {
    dctConfig_t cfg = explicitConfig(s);
    REQUIRE(dctCompressorCreate(comm, n, type, &cfg, &c) == dctSuccess);
  }
  ~FixedCompressor() { dctCompressorDestroy(c); }
  FixedCompressor(const FixedCompressor&) = delete;
  FixedCompressor& operator=(const FixedCompressor&) = delete;
  dctStats_t stats() const {
    dctStats_t st{};
    REQUIRE(dctCompressorGetStats(c, &st) == dctSuccess);
    return st;
  }
  // In the accumulation type (T = double for fp64 tensors, else float).
  template <typename T>
  std::vector<T> residual(size_t n) const {
    std::vector<T> r(n);
    REQUIRE(dctCompressorGetResidual(c, r.data(), nullptr) == dctSuccess);
    return r;
  }
};

// Compares what a plan keeps beyond the residual (tau, owner state).
using SameState = std::function<void(const FixedCompressor& a, const FixedCompressor& b)>;

// After two steps, b's third call differs on one rank (its op: the digest),
// then fails on one rank (a NULL sendbuf): every rank fails and b stays at
// step 2. Retried, b goes on exactly as a, which never failed.
inline void failedStepRetriesExactly(World& w, const Settings& s, bool grid, int retries, const SameState& same) {
  const size_t n = 3001;
  FixedCompressor a(w.comm, n, dctFloat32, s), b(w.comm, n, dctFloat32, s);
  auto step = [&](FixedCompressor& c, int k, dctRedOp_t op, bool nullSend) {
    std::vector<float> g = as<float>(fixedGradient(n, w.rank, k, 1.0, grid)), out(n);
    const dctResult_t res =
        dctSparseAllreduce(nullSend ? nullptr : g.data(), out.data(), n, dctFloat32, op, c.c, w.comm, nullptr);
    return std::make_pair(res, out);
  };
  for (int k = 0; k < 2; k++) {
    REQUIRE(step(a, k, dctAvg, false).first == dctSuccess);
    REQUIRE(step(b, k, dctAvg, false).first == dctSuccess);
  }
  const int odd = w.size - 1;
  if (w.size > 1) {
    const dctResult_t r1 = step(b, 2, w.rank == odd ? dctSum : dctAvg, false).first;
    CHECK(allTrue(r1 == dctInvalidUsage));
  }
  const dctResult_t r2 = step(b, 2, dctAvg, w.rank == odd).first;
  CHECK(allTrue(r2 != dctSuccess));
  CHECK(b.stats().step == 2);
  for (int k = 2; k < 2 + retries; k++) {
    const auto ra = step(a, k, dctAvg, false), rb = step(b, k, dctAvg, false);
    REQUIRE(ra.first == dctSuccess);
    REQUIRE(rb.first == dctSuccess);
    CHECK(ra.second == rb.second);
  }
  CHECK(a.residual<float>(n) == b.residual<float>(n));
  same(a, b);
}

// `before` steps, the state saved and loaded into a fresh compressor, then
// `after` steps of both: the same bits. scale(k): step k's gradient scale.
inline void savedStateContinues(World& w, const Settings& s, bool grid, int before, int after,
                                const std::function<double(int)>& scale, const SameState& same) {
  const size_t n = 2003;
  FixedCompressor a(w.comm, n, dctFloat32, s);
  auto run = [&](FixedCompressor& c, int k) {
    std::vector<float> g = as<float>(fixedGradient(n, w.rank, k, scale(k), grid)), out(n);
    REQUIRE(dctSparseAllreduce(g.data(), out.data(), n, dctFloat32, dctSum, c.c, w.comm, nullptr) == dctSuccess);
    return out;
  };
  for (int k = 0; k < before; k++) run(a, k);
  size_t bytes = 0;
  REQUIRE(dctCompressorSaveState(a.c, nullptr, &bytes, nullptr) == dctSuccess);
  std::vector<unsigned char> blob(bytes);
  REQUIRE(dctCompressorSaveState(a.c, blob.data(), &bytes, nullptr) == dctSuccess);
  FixedCompressor b(w.comm, n, dctFloat32, s);
  REQUIRE(dctCompressorLoadState(b.c, blob.data(), bytes, nullptr) == dctSuccess);
  for (int k = before; k < before + after; k++) CHECK(run(a, k) == run(b, k));
  CHECK(a.residual<float>(n) == b.residual<float>(n));
  CHECK(a.stats().step == b.stats().step);
  same(a, b);
}

}  // namespace dcttest
