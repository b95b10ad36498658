// Nothing that can fail follows a step's commit: the result's way into
// recvbuf (copy, conversion and averaging, 1-bit decoding) and the end of the
// stream work fail on one rank through a CPU twin whose n-th such call fails,
// and every rank must then fail together with nothing committed anywhere, the
// retry giving exactly the results, residual and step count of a clean run.
// Before, a rank could return an error with its state advanced while the
// others succeeded.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/compressor.h"
#include "fault_util.h"
#include "kernels/kernels.h"
#include "mpi_util.h"

using namespace dcttest;

namespace {

constexpr size_t kCount = 1001;
constexpr int kSteps = 2;

// Calls of the armed kind left before the failing one; -1: none fails.
int callsLeft = -1;

dctResult_t countdown() {
  if (callsLeft < 0) return dctSuccess;
  if (callsLeft-- > 0) return dctSuccess;
  callsLeft = -1;
  return dctInternalError;
}

dctResult_t failingConvert(dct::KernelContext* ctx, void* dst, dctDataType_t dstType, const void* src,
                           dctDataType_t srcType, size_t n, double factor, void* stream) {
  if (countdown() != dctSuccess) return dctInternalError;
  return dct::cpuKernelOps().convert(ctx, dst, dstType, src, srcType, n, factor, stream);
}
dctResult_t failingScale(dct::KernelContext* ctx, void* data, size_t n, dctDataType_t dtype, double factor,
                         void* stream) {
  if (countdown() != dctSuccess) return dctInternalError;
  return dct::cpuKernelOps().scale(ctx, data, n, dtype, factor, stream);
}
dctResult_t failingStreamEnd(dct::KernelContext* ctx, void* stream) {
  if (countdown() != dctSuccess) return dctInternalError;
  return dct::cpuKernelOps().streamEnd(ctx, stream);
}
dctResult_t failingDecode(dct::KernelContext* ctx, const dct::OnebitDecodeArgs* args, void* stream) {
  if (countdown() != dctSuccess) return dctInternalError;
  return dct::cpuKernelOps().onebitDecode(ctx, args, stream);
}

enum class Kind { convert, scale, streamEnd, decode };

const dct::KernelOps& failing(Kind kind) {
  static dct::KernelOps ops[4];
  dct::KernelOps& o = ops[static_cast<int>(kind)];
  o = dct::cpuKernelOps();
  o.name = "cpu (one failing tail call)";
  if (kind == Kind::convert) o.convert = failingConvert;
  if (kind == Kind::scale) o.scale = failingScale;
  if (kind == Kind::streamEnd) o.streamEnd = failingStreamEnd;
  if (kind == Kind::decode) o.onebitDecode = failingDecode;
  return o;
}

struct Scenario {
  const char* name;
  Settings settings;
  bool onebit = false;
  dctRedOp_t op = dctSum;
  bool inPlace = false;
  int wireType = -1;  // >= 0: config.wireType (a dense sum in another type than the tensor's)
};

struct Run {
  std::vector<float> outputs;  // every step's, one after the other
  std::vector<float> residual;
  uint64_t steps = 0;
  int failedCalls = 0;
};

std::vector<float> gradient(int rank, int step) {
  std::mt19937 rng(100 * rank + step);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> g(kCount);
  for (float& x : g) x = dist(rng);
  return g;
}

// kSteps steps, each failed call retried; with `kind`, the victim's call
// `n` of that kind fails once.
Run run(const World& w, const Scenario& sc, const Kind* kind, int victim, int n) {
  const ScopedEnv chunking("DCT_CHUNK_ELEMENTS", sc.settings.chunkElems);
  dctConfig_t cfg = explicitConfig(sc.settings);
  if (sc.onebit) cfg.compressor = dctCompressorOnebit;
  if (sc.wireType >= 0) cfg.wireType = sc.wireType;
  dctCompressor_t c = nullptr;
  REQUIRE(dctCompressorCreate(w.comm, kCount, dctFloat32, &cfg, &c) == dctSuccess);
  if (kind) {
    REQUIRE(dct::bindOps(c, failing(*kind), "test") == dctSuccess);
    callsLeft = w.rank == victim ? n : -1;
  }
  Run r;
  for (int step = 0; step < kSteps; step++) {
    const std::vector<float> g = gradient(w.rank, step);
    std::vector<float> send = g, out(kCount);
    for (int attempt = 0;; attempt++) {
      REQUIRE(attempt < 3);
      if (sc.inPlace) out = g;
      const dctResult_t res = dctSparseAllreduce(sc.inPlace ? out.data() : send.data(), out.data(), kCount,
                                                 dctFloat32, sc.op, c, w.comm, nullptr);
      REQUIRE(allRanksAgree(res == dctSuccess));  // every rank fails, or none
      if (res == dctSuccess) break;
      r.failedCalls++;
    }
    r.outputs.insert(r.outputs.end(), out.begin(), out.end());
  }
  const float* residual = static_cast<const float*>(c->residual());
  r.residual.assign(residual, residual + kCount);
  dctStats_t stats{};
  REQUIRE(dctCompressorGetStats(c, &stats) == dctSuccess);
  r.steps = stats.step;
  callsLeft = -1;
  dctCompressorDestroy(c);
  return r;
}

std::vector<Scenario> scenarios() {
  Settings allgather;
  Settings dense = allgather;
  dense.algorithm = dctAlgoDense;
  Settings pipelined = allgather;
  pipelined.chunkElems = 300;
  Settings warmup;
  warmup.warmup = 1;
  return {
      {"allgather, in place, average", allgather, false, dctAvg, true},
      {"allgather, average", allgather, false, dctAvg, false},
      {"dense, in place, average", dense, false, dctAvg, true},
      {"dense, in place, fp16 wire, average", dense, false, dctAvg, true, dctFloat16},
      {"dense, fp16 wire, average", dense, false, dctAvg, false, dctFloat16},
      {"pipelined, in place, average", pipelined, false, dctAvg, true},
      {"pipelined, average", pipelined, false, dctAvg, false},
      {"1-bit, in place", warmup, true, dctSum, true},
      {"1-bit", warmup, true, dctSum, false},
      {"1-bit, in place, average", warmup, true, dctAvg, true},
  };
}

}  // namespace

static void everyTailFault(const World& w, const std::vector<Scenario>& all) {
  for (const Scenario& sc : all) {
    const Run clean = run(w, sc, nullptr, 0, 0);
    for (Kind kind : {Kind::convert, Kind::scale, Kind::streamEnd, Kind::decode})
      for (int victim = 0; victim < w.size; victim++)
        for (int n = 0; n < 2 * kSteps; n++) {
          const std::string name = sc.name;
          CAPTURE(name);
          CAPTURE(static_cast<int>(kind));
          CAPTURE(victim);
          CAPTURE(n);
          const Run faulty = run(w, sc, &kind, victim, n);
          CHECK(faulty.failedCalls <= 1);
          REQUIRE(std::memcmp(faulty.outputs.data(), clean.outputs.data(), clean.outputs.size() * sizeof(float)) ==
                  0);
          REQUIRE(std::memcmp(faulty.residual.data(), clean.residual.data(), kCount * sizeof(float)) == 0);
          CHECK(faulty.steps == clean.steps);
        }
  }
}

TEST_CASE("a failure in the result's copy, conversion, decoding or stream end fails every rank before any commit") {
  World w;
  everyTailFault(w, scenarios());
}

TEST_CASE("hierarchical: a failure in the leaders' tail fails every rank before any commit") {
  World w(2);
  std::vector<Scenario> flat;
  for (const Scenario& sc : scenarios())
    if (!sc.onebit) flat.push_back(sc);
  everyTailFault(w, flat);
}
