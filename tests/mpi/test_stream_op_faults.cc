// The fixed-capacity step (algo/stream_step.cc) with one of the twin's ops
// failing once on one rank, before or at the vote (the ops a host twin can
// fail at: the step's estimate, select and merge, and the copy and wait
// that bring the vote to the host): every rank fails that call (none
// hangs), nothing is committed, and retrying gives bit for bit the
// results, residual and statistics of a run without the fault. Both plans:
// the allgather of slots and global top-k's fixed pieces (whose estimate,
// select and merge run twice a step: the worker's and the owner's).
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

constexpr size_t kCount = 3001;
constexpr int kSteps = 4;

enum Op { kEstimate, kSelect, kMerge, kCopy, kSynchronize, kNumOps };
const char* const kOpNames[] = {"streamEstimate", "streamSelect", "streamMerge", "copy", "synchronize"};

// Calls of the failing op left before the one that fails, on this rank; -1: none.
int callsLeft = -1;
Op failing = kNumOps;

bool failNow(Op op) {
  if (op != failing || callsLeft < 0) return false;
  if (callsLeft-- > 0) return false;
  return true;
}

const dct::KernelOps& failingOps() {
  static const dct::KernelOps ops = [] {
    dct::KernelOps o = dct::cpuKernelOps();
    o.name = "cpu (one failing op)";
    o.streamEstimate = [](dct::KernelContext* ctx, const dct::StreamStepArgs* a, void* s) {
      return failNow(kEstimate) ? dctInternalError : dct::cpuKernelOps().streamEstimate(ctx, a, s);
    };
    o.streamSelect = [](dct::KernelContext* ctx, const dct::StreamStepArgs* a, void* s) {
      return failNow(kSelect) ? dctOutOfMemory : dct::cpuKernelOps().streamSelect(ctx, a, s);
    };
    o.streamMerge = [](dct::KernelContext* ctx, const dct::StreamStepArgs* a, void* s) {
      return failNow(kMerge) ? dctInternalError : dct::cpuKernelOps().streamMerge(ctx, a, s);
    };
    o.copy = [](dct::KernelContext* ctx, void* dst, const void* src, size_t bytes, void* s) {
      return failNow(kCopy) ? dctCudaError : dct::cpuKernelOps().copy(ctx, dst, src, bytes, s);
    };
    o.synchronize = [](dct::KernelContext* ctx, void* s) {
      return failNow(kSynchronize) ? dctCudaError : dct::cpuKernelOps().synchronize(ctx, s);
    };
    return o;
  }();
  return ops;
}

struct Run {
  std::vector<std::vector<float>> outputs;
  std::vector<float> residual;
  dctStats_t stats{};
  int failedCalls = 0;
};

std::vector<float> gradient(int rank, int step) {
  std::mt19937 rng(1000 * rank + step);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> g(kCount);
  for (float& x : g) x = dist(rng);
  return g;
}

// kSteps fixed-capacity steps (sampled tau every other step), every failed call retried.
Run runSteps(const World& w, dctAlgorithm_t algorithm, bool inPlace, int victim, Op op, int after) {
  Settings s;
  s.algorithm = algorithm;
  s.density = 0.02;
  s.method = dctThresholdSampled;
  s.interval = 2;
  s.capacity = 1.0;  // some steps overflow the slot (global top-k: a piece or an owner's slot)
  dctConfig_t cfg = explicitConfig(s);
  dctCompressor_t c = nullptr;
  REQUIRE(dctCompressorCreate(w.comm, kCount, dctFloat32, &cfg, &c) == dctSuccess);
  if (victim >= 0) {
    REQUIRE(dct::bindOps(c, failingOps(), "test") == dctSuccess);
    failing = op;
    callsLeft = w.rank == victim ? after : -1;
  }
  Run run;
  for (int step = 0; step < kSteps; step++) {
    const auto g = gradient(w.rank, step);
    std::vector<float> send = g, out(kCount, 0.0f);
    for (int attempt = 0;; attempt++) {
      REQUIRE(attempt < 3);
      if (inPlace) out = g;
      const dctResult_t res =
          dctSparseAllreduce(inPlace ? out.data() : send.data(), out.data(), kCount, dctFloat32, dctSum, c, w.comm, nullptr);
      REQUIRE(allRanksAgree(res == dctSuccess));  // every rank fails, or none
      if (res == dctSuccess) break;
      dctStats_t stats{};
      REQUIRE(dctCompressorGetStats(c, &stats) == dctSuccess);
      CHECK(stats.step == uint64_t(step));  // nothing committed
      run.failedCalls++;
    }
    CHECK(identicalOnAllRanks(out.data(), kCount * sizeof(float)));
    run.outputs.push_back(out);
  }
  callsLeft = -1;
  run.residual.resize(kCount);
  REQUIRE(dctCompressorGetResidual(c, run.residual.data(), nullptr) == dctSuccess);
  REQUIRE(dctCompressorGetStats(c, &run.stats) == dctSuccess);
  dctCompressorDestroy(c);
  return run;
}

}  // namespace

TEST_CASE("fixed capacity: an op failing on one rank up to the vote fails every rank; the retry is exact") {
  World w;
  for (dctAlgorithm_t algorithm : {dctAlgoAllgather, dctAlgoGlobalTopk})
  for (bool inPlace : {false, true}) {
    CAPTURE(algorithm);
    const Run clean = runSteps(w, algorithm, inPlace, -1, kNumOps, 0);
    for (int op = 0; op < kNumOps; op++)
      for (int victim = 0; victim < w.size; victim++)
        for (int after : {0, 1, 2, 4}) {
          CAPTURE(inPlace);
          const std::string name = kOpNames[op];
          CAPTURE(name);
          CAPTURE(victim);
          CAPTURE(after);
          const Run faulty = runSteps(w, algorithm, inPlace, victim, static_cast<Op>(op), after);
          for (int step = 0; step < kSteps; step++) REQUIRE(faulty.outputs[step] == clean.outputs[step]);
          REQUIRE(faulty.residual == clean.residual);
          CHECK(faulty.stats.step == clean.stats.step);
          CHECK(faulty.stats.threshold == clean.stats.threshold);
          CHECK(faulty.stats.thresholdEstimates == clean.stats.thresholdEstimates);
          CHECK(faulty.stats.nnz == clean.stats.nnz);
          CHECK(faulty.stats.totalBytesSent == clean.stats.totalBytesSent);
          CHECK(faulty.stats.ownerKept == clean.stats.ownerKept);
          CHECK(faulty.stats.ownerThreshold == clean.stats.ownerThreshold);
          CHECK(allRanksAgree(faulty.failedCalls > 0));
        }
  }
}
