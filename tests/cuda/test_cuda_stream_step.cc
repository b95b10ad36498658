// The CUDA twin of the fixed-capacity step's ops (kernels/stream_args.h)
// against the CPU twin, step after step on the same seeded inputs: the
// state, both residuals, every slot, the sum and the result bit for bit
// (NaN payloads aside: half_util.h's rule). Simulated ranks share one
// process: each rank's select writes its own slot, the "allgather" copies
// every slot into the gathered buffer, and (the test only) the vote reads
// every rank's verdict back and writes the max. Then: the ops return while
// a kernel queued before them still runs, and a captured step replays as
// eager steps do.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/debug.h"
#include "half_util.h"
#include "twin_bytes.h"

cudaError_t dctTestSpin(cudaStream_t stream, double milliseconds);  // spin_kernel.cu

using namespace dct;
using namespace dct::test;

namespace {

struct Config {
  dctDataType_t acc, grad, wire, result;
  int indexBytes;
  int ranks;
  double capacityFactor = 1.0;
  int errorFeedback = 1;
};

size_t sizeOf(dctDataType_t t) { return t == dctFloat64 ? 8 : t == dctFloat32 ? 4 : 2; }

// A twin's ops, context and stream.
struct Twin {
  const KernelOps& ops;
  KernelContext* ctx = nullptr;
  cudaStream_t stream = nullptr;
  explicit Twin(const KernelOps& o) : ops(o) {
    REQUIRE(ops.createContext(&ctx) == dctSuccess);
    if (ops.device) CUDA_REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }
  ~Twin() {
    ops.destroyContext(ctx);
    if (stream) cudaStreamDestroy(stream);
  }
};

// One simulated rank's memory and step arguments.
struct Rank {
  std::unique_ptr<Bytes> state, failed, grad, r0, r1, slot, target, result;
  StreamStepArgs args{};
};

// Every rank of one twin, and the gathered slots.
struct Rig {
  Config cfg;
  size_t n, k, capacity, slotBytes;
  Twin twin;
  std::vector<Rank> ranks;
  std::unique_ptr<Bytes> slots;

  Rig(const KernelOps& ops, const Config& c, size_t size, double density) : cfg(c), n(size), twin(ops) {
    const bool dev = ops.device;
    const double kd = std::round(density * static_cast<double>(n));
    k = kd < 1 ? 1 : static_cast<size_t>(kd);
    capacity = std::max<size_t>(1, static_cast<size_t>(std::ceil(c.capacityFactor * static_cast<double>(k))));
    slotBytes = dct::slotBytes(capacity, c.indexBytes, sizeOf(c.wire));
    slots = std::make_unique<Bytes>(dev, slotBytes * c.ranks);
    ranks.resize(c.ranks);
    const bool inPlace = c.result == c.acc;
    for (int r = 0; r < c.ranks; r++) {
      Rank& m = ranks[r];
      m.state = std::make_unique<Bytes>(dev, sizeof(StreamState));
      m.failed = std::make_unique<Bytes>(dev, sizeof(int32_t));
      m.grad = std::make_unique<Bytes>(dev, n * sizeOf(c.grad));
      m.r0 = std::make_unique<Bytes>(dev, n * sizeOf(c.acc));
      m.r1 = std::make_unique<Bytes>(dev, n * sizeOf(c.acc));
      m.r1->fill(0x5a);  // the spare's old bits: the select overwrites all of them
      m.slot = std::make_unique<Bytes>(dev, slotBytes);
      m.result = std::make_unique<Bytes>(dev, n * sizeOf(c.result));
      m.result->fill(0x3c);
      if (!inPlace) {
        m.target = std::make_unique<Bytes>(dev, n * sizeOf(c.acc));
        m.target->fill(0x7e);
      }
      StreamStepArgs& a = m.args;
      a.state = static_cast<StreamState*>(m.state->get());
      a.failed = static_cast<int32_t*>(m.failed->get());
      a.sticky = true;
      a.grad = m.grad->get();
      a.gradType = c.grad;
      a.residuals[0] = m.r0->get();
      a.residuals[1] = m.r1->get();
      a.n = n;
      a.accType = c.acc;
      a.errorFeedback = c.errorFeedback;
      a.density = density;
      a.interval = 2;
      a.seed = 0x5eed + 17;
      a.k = k;
      a.tauFloor = c.acc == dctFloat64 ? std::numeric_limits<double>::denorm_min()
                                        : static_cast<double>(std::numeric_limits<float>::denorm_min());
      a.capacity = capacity;
      a.indexBytes = c.indexBytes;
      a.wireType = c.wire;
      a.valueLimit = 0;
      a.slotBytes = slotBytes;
      a.digest = 0xd1e57ull;
      a.slot = m.slot->get();
      a.slots = slots->get();
      a.ranks = c.ranks;
      a.result = m.result->get();
      a.target = inPlace ? a.result : m.target->get();
      a.resultType = c.result;
      a.factor = 1.0 / c.ranks;
    }
  }

  void* stream() const { return twin.stream; }
};

// Mostly normal gradients with a few of every special kind (zeros,
// subnormals, values past the half types' range, +-Inf, negative NaNs).
std::vector<unsigned char> gradientBytes(dctDataType_t type, size_t n, uint64_t seed) {
  std::vector<unsigned char> out(n * sizeOf(type));
  const auto fill = [&]<typename T>() {
    auto v = mixedValues<T>(n, seed, NaNs::negative, false);
    std::mt19937_64 rng(seed ^ 0xabcdef);
    std::normal_distribution<double> normal(0.0, 1.0);
    for (auto& x : v)
      if (rng() % 100 < 97) x = fromDouble<T>(normal(rng));
    std::memcpy(out.data(), v.data(), out.size());
  };
  switch (type) {
    case dctFloat32: fill.template operator()<float>(); break;
    case dctFloat64: fill.template operator()<double>(); break;
    case dctFloat16: fill.template operator()<Half>(); break;
    default: fill.template operator()<BFloat16>(); break;
  }
  return out;
}

void setGradients(Rig& rig, int step) {
  for (int r = 0; r < rig.cfg.ranks; r++) {
    const auto g = gradientBytes(rig.cfg.grad, rig.n, 1000 * step + r + 7);
    rig.ranks[r].grad->write(g.data(), g.size());
  }
}

using Hook = std::function<void(Rig&)>;

// One step of every rank: what algo/stream_step.cc queues (streamBegin and
// streamEnd once: the ranks share one context here), the allgather a
// copy of every rank's slot, the vote (more than one rank) read back by the
// test. With one rank nothing waits for the device.
dctResult_t queueStep(Rig& rig, const Hook& afterGather = nullptr) {
  const KernelOps& ops = rig.twin.ops;
  KernelContext* ctx = rig.twin.ctx;
  void* s = rig.stream();
  DCTCHECK(ops.streamBegin(ctx, s));
  for (Rank& r : rig.ranks) {
    DCTCHECK(ops.streamEstimate(ctx, &r.args, s));
    DCTCHECK(ops.streamSelect(ctx, &r.args, s));
  }
  for (int q = 0; q < rig.cfg.ranks; q++)
    DCTCHECK(ops.copy(ctx, static_cast<char*>(rig.slots->get()) + q * rig.slotBytes, rig.ranks[q].slot->get(),
                      rig.slotBytes, s));
  if (afterGather) afterGather(rig);
  for (Rank& r : rig.ranks) DCTCHECK(ops.streamMerge(ctx, &r.args, s));
  if (rig.cfg.ranks > 1) {
    int32_t worst = 0;
    for (Rank& r : rig.ranks) {
      const auto st = r.state->read();
      int32_t vote;
      std::memcpy(&vote, st.data() + offsetof(StreamState, vote), sizeof vote);
      worst = std::max(worst, vote);
    }
    for (Rank& r : rig.ranks) r.state->write(&worst, sizeof worst, offsetof(StreamState, vote));
  }
  for (Rank& r : rig.ranks) {
    DCTCHECK(ops.streamCommit(ctx, &r.args, s));
    DCTCHECK(ops.streamFinish(ctx, &r.args, s));
  }
  return ops.streamEnd(ctx, s);
}

template <typename F>
bool sameField(const StreamState& a, const StreamState& b, F StreamState::*f) {
  return std::memcmp(&(a.*f), &(b.*f), sizeof(F)) == 0;
}

StreamState stateOf(const Bytes& b) {
  StreamState s;
  const auto bytes = b.read();
  std::memcpy(&s, bytes.data(), sizeof s);
  return s;
}

void requireSameState(const Bytes& gpuBytes, const Bytes& cpuBytes) {
  const StreamState g = stateOf(gpuBytes), c = stateOf(cpuBytes);
#define DCT_SAME(field)   \
  do {                    \
    CAPTURE(#field);      \
    CAPTURE(g.field);     \
    CAPTURE(c.field);     \
    REQUIRE(sameField(g, c, &StreamState::field)); \
  } while (0)
  DCT_SAME(step);
  DCT_SAME(tau);
  DCT_SAME(lastEstimateStep);
  DCT_SAME(driftPending);
  DCT_SAME(committed);
  DCT_SAME(estimates);
  DCT_SAME(nnz);
  DCT_SAME(nonFinite);
  DCT_SAME(overflow);
  DCT_SAME(draftTau);
  DCT_SAME(estimated);
  DCT_SAME(draftDrift);
  DCT_SAME(selected);
  DCT_SAME(written);
  DCT_SAME(writtenNonFinite);
  DCT_SAME(vote);
  DCT_SAME(lastOk);
#undef DCT_SAME
}

// count values of `type` at byte offset `at` of both buffers.
void requireSameTyped(dctDataType_t type, const std::vector<unsigned char>& gpu, const std::vector<unsigned char>& cpu,
                      size_t count, size_t at = 0) {
  const auto cmp = [&]<typename T>() {
    std::vector<T> g(count), c(count);
    if (count) {
      std::memcpy(g.data(), gpu.data() + at, count * sizeof(T));
      std::memcpy(c.data(), cpu.data() + at, count * sizeof(T));
    }
    requireSameResults(g, c, count);
  };
  switch (type) {
    case dctFloat32: cmp.template operator()<float>(); break;
    case dctFloat64: cmp.template operator()<double>(); break;
    case dctFloat16: cmp.template operator()<Half>(); break;
    default: cmp.template operator()<BFloat16>(); break;
  }
}

// A slot: the header and the used entries (what lies past nnz is whatever
// an earlier step left there, in both twins alike, but carries nothing).
void requireSameSlot(const Rig& rig, const std::vector<unsigned char>& gpu, const std::vector<unsigned char>& cpu,
                     size_t at) {
  SlotHeader g, c;
  std::memcpy(&g, gpu.data() + at, sizeof g);
  std::memcpy(&c, cpu.data() + at, sizeof c);
  REQUIRE(g.digest == c.digest);
  REQUIRE(g.nnz == c.nnz);
  REQUIRE(g.nonFinite == c.nonFinite);
  REQUIRE(g.reserved == c.reserved);
  const size_t nnz = std::min<size_t>(c.nnz, rig.capacity);
  const size_t idx = at + slotIndexOffset();
  REQUIRE(std::memcmp(gpu.data() + idx, cpu.data() + idx, nnz * rig.cfg.indexBytes) == 0);
  requireSameTyped(rig.cfg.wire, gpu, cpu, nnz, at + slotValueOffset(rig.capacity, rig.cfg.indexBytes));
}

void requireSameRigs(const Rig& gpu, const Rig& cpu) {
  for (int r = 0; r < cpu.cfg.ranks; r++) {
    CAPTURE(r);
    const Rank& g = gpu.ranks[r];
    const Rank& c = cpu.ranks[r];
    requireSameState(*g.state, *c.state);
    REQUIRE(g.failed->read() == c.failed->read());
    requireSameTyped(cpu.cfg.acc, g.r0->read(), c.r0->read(), cpu.n);
    requireSameTyped(cpu.cfg.acc, g.r1->read(), c.r1->read(), cpu.n);
    requireSameSlot(cpu, g.slot->read(), c.slot->read(), 0);
    requireSameTyped(cpu.cfg.result, g.result->read(), c.result->read(), cpu.n);
    if (c.target) requireSameTyped(cpu.cfg.acc, g.target->read(), c.target->read(), cpu.n);
  }
  const auto gs = gpu.slots->read(), cs = cpu.slots->read();
  for (int q = 0; q < cpu.cfg.ranks; q++) requireSameSlot(cpu, gs, cs, q * cpu.slotBytes);
}

const Config kConfigs[] = {
    {dctFloat32, dctFloat32, dctFloat32, dctFloat32, 4, 3},
    {dctFloat32, dctFloat16, dctFloat16, dctFloat16, 4, 2},
    {dctFloat32, dctBFloat16, dctBFloat16, dctBFloat16, 8, 2, 0.5},
    {dctFloat32, dctFloat32, dctBFloat16, dctFloat32, 4, 2, 1.0, 0},
    {dctFloat64, dctFloat64, dctFloat64, dctFloat64, 8, 3},
    {dctFloat64, dctFloat32, dctFloat32, dctFloat32, 4, 2},  // the pre-add path
    {dctFloat64, dctFloat16, dctFloat16, dctFloat16, 4, 1, 0.5},
};

}  // namespace

TEST_CASE("fixed-capacity step ops: CUDA twin equals the CPU twin over several steps") {
  for (const Config& cfg : kConfigs) {
    for (size_t n : {size_t(1), size_t(3), size_t(7), size_t(1000003)}) {
      CAPTURE(n);
      CAPTURE(static_cast<int>(cfg.acc));
      CAPTURE(static_cast<int>(cfg.grad));
      CAPTURE(static_cast<int>(cfg.wire));
      CAPTURE(cfg.indexBytes);
      CAPTURE(cfg.ranks);
      CAPTURE(cfg.capacityFactor);
      const double density = 0.01;
      Rig cpu(cpuKernelOps(), cfg, n, density), gpu(cudaKernelOps(), cfg, n, density);
      uint64_t overflow = 0;
      for (int step = 0; step < 5; step++) {
        CAPTURE(step);
        setGradients(cpu, step);
        setGradients(gpu, step);
        REQUIRE(queueStep(cpu) == dctSuccess);
        REQUIRE(queueStep(gpu) == dctSuccess);
        requireSameRigs(gpu, cpu);
        const StreamState s = stateOf(*cpu.ranks[0].state);
        REQUIRE(s.lastOk == 1);
        REQUIRE(s.step == static_cast<uint64_t>(step + 1));
        overflow += s.overflow;
      }
      if (n > 1000 && cfg.capacityFactor < 1) CHECK(overflow > 0);  // entries past the capacity stayed
    }
  }
}

TEST_CASE("fixed-capacity step ops: a bad slot fails the step on every rank, and later steps do nothing") {
  enum Bad { digest, count, range, order };
  for (Bad bad : {digest, count, range, order}) {
    CAPTURE(static_cast<int>(bad));
    const Config cfg{dctFloat32, dctFloat32, dctFloat32, dctFloat32, 4, 3};
    const size_t n = 1000;
    Rig cpu(cpuKernelOps(), cfg, n, 0.05), gpu(cudaKernelOps(), cfg, n, 0.05);
    // Rank 1's gathered slot, spoiled after the allgather.
    const auto spoil = [&](Rig& rig) {
      Bytes& slots = *rig.slots;
      const size_t at = rig.slotBytes;
      const auto bytes = slots.read();
      SlotHeader h;
      std::memcpy(&h, bytes.data() + at, sizeof h);
      REQUIRE(h.nnz >= 2);
      if (bad == digest) h.digest ^= 1;
      if (bad == count) h.nnz = rig.capacity + 1;
      slots.write(&h, sizeof h, at);
      uint32_t idx[2];
      std::memcpy(idx, bytes.data() + at + slotIndexOffset(), sizeof idx);
      if (bad == range) idx[1] = static_cast<uint32_t>(rig.n);
      if (bad == order) idx[1] = idx[0];
      slots.write(idx, sizeof idx, at + slotIndexOffset());
    };
    for (int step = 0; step < 3; step++) {
      CAPTURE(step);
      setGradients(cpu, step);
      setGradients(gpu, step);
      // The committed residual after step 0 (errorFeedback: residuals[1]).
      const std::vector<unsigned char> before = cpu.ranks[0].r1->read();
      REQUIRE(queueStep(cpu, step == 1 ? Hook(spoil) : Hook()) == dctSuccess);
      REQUIRE(queueStep(gpu, step == 1 ? Hook(spoil) : Hook()) == dctSuccess);
      requireSameRigs(gpu, cpu);
      const StreamState s = stateOf(*cpu.ranks[0].state);
      int32_t failed;
      std::memcpy(&failed, cpu.ranks[0].failed->read().data(), sizeof failed);
      if (step == 0) {
        REQUIRE(s.lastOk == 1);
      } else {
        REQUIRE(s.lastOk == 0);
        REQUIRE(s.step == 1);  // nothing committed after the failure
        REQUIRE(failed == (bad == digest ? dctInvalidUsage : dctInternalError));
        REQUIRE(s.committed == 1);
        REQUIRE(cpu.ranks[0].r1->read() == before);
      }
    }
  }
}

TEST_CASE("fixed-capacity step ops: the ops return while a kernel queued before them still runs") {
  const Config cfg{dctFloat32, dctFloat32, dctFloat32, dctFloat32, 4, 1};
  const size_t n = 1 << 20;
  Rig cpu(cpuKernelOps(), cfg, n, 0.01), gpu(cudaKernelOps(), cfg, n, 0.01);
  // The first step reserves the workspace (and may wait for the device).
  for (Rig* rig : {&cpu, &gpu}) {
    setGradients(*rig, 0);
    REQUIRE(queueStep(*rig) == dctSuccess);
  }
  setGradients(cpu, 1);
  setGradients(gpu, 1);
  CUDA_REQUIRE(dctTestSpin(gpu.twin.stream, 50.0));
  const auto start = std::chrono::steady_clock::now();
  REQUIRE(queueStep(gpu) == dctSuccess);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  CAPTURE(ms);
  CHECK(cudaStreamQuery(gpu.twin.stream) == cudaErrorNotReady);
  CHECK(ms < 25.0);
  REQUIRE(queueStep(cpu) == dctSuccess);
  CUDA_REQUIRE(cudaStreamSynchronize(gpu.twin.stream));
  requireSameRigs(gpu, cpu);
}

TEST_CASE("fixed-capacity step ops: a captured step replays N times as N eager steps") {
  for (const Config& cfg : {Config{dctFloat32, dctFloat16, dctFloat16, dctFloat16, 4, 1},
                            Config{dctFloat64, dctFloat32, dctFloat32, dctFloat64, 8, 1, 0.5}}) {
    CAPTURE(static_cast<int>(cfg.acc));
    const size_t n = 1000003;
    Rig eager(cudaKernelOps(), cfg, n, 0.01), graphed(cudaKernelOps(), cfg, n, 0.01);
    for (Rig* rig : {&eager, &graphed}) {  // the first step, eager, reserves the workspace
      setGradients(*rig, 0);
      REQUIRE(queueStep(*rig) == dctSuccess);
    }
    cudaStream_t s = graphed.twin.stream;
    CUDA_REQUIRE(cudaStreamSynchronize(s));
    cudaGraph_t graph = nullptr;
    CUDA_REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    const dctResult_t captured = queueStep(graphed);
    CUDA_REQUIRE(cudaStreamEndCapture(s, &graph));
    REQUIRE(captured == dctSuccess);
    cudaGraphExec_t exec = nullptr;
    CUDA_REQUIRE(cudaGraphInstantiate(&exec, graph, 0));
    for (int step = 1; step <= 6; step++) {
      CAPTURE(step);
      setGradients(eager, step);
      setGradients(graphed, step);
      REQUIRE(queueStep(eager) == dctSuccess);
      CUDA_REQUIRE(cudaGraphLaunch(exec, s));
      CUDA_REQUIRE(cudaStreamSynchronize(s));
      requireSameRigs(graphed, eager);
      REQUIRE(stateOf(*graphed.ranks[0].state).step == static_cast<uint64_t>(step + 1));
    }
    // A failed comm: the replay changes nothing.
    const int32_t failed = dctTransportError;
    graphed.ranks[0].failed->write(&failed, sizeof failed);
    const auto state = graphed.ranks[0].state->read();
    const auto residual = graphed.ranks[0].r0->read();
    CUDA_REQUIRE(cudaGraphLaunch(exec, s));
    CUDA_REQUIRE(cudaStreamSynchronize(s));
    const StreamState after = stateOf(*graphed.ranks[0].state);
    CHECK(after.lastOk == 0);
    CHECK(after.step == 7);
    CHECK(graphed.ranks[0].r0->read() == residual);
    CHECK(std::memcmp(graphed.ranks[0].state->read().data(), state.data(), offsetof(StreamState, vote)) == 0);
    CHECK(after.vote == dctTransportError);  // the halted rank votes its sticky error
    CUDA_REQUIRE(cudaGraphExecDestroy(exec));
    CUDA_REQUIRE(cudaGraphDestroy(graph));
  }
}

TEST_CASE("fixed-capacity step ops: a first step under capture fails cleanly instead of allocating") {
  const Config cfg{dctFloat32, dctFloat32, dctFloat32, dctFloat32, 4, 1};
  Rig gpu(cudaKernelOps(), cfg, 4096, 0.01);
  setGradients(gpu, 0);
  cudaStream_t s = gpu.twin.stream;
  cudaGraph_t graph = nullptr;
  CUDA_REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  const dctResult_t res = gpu.twin.ops.streamEstimate(gpu.twin.ctx, &gpu.ranks[0].args, s);
  CUDA_REQUIRE(cudaStreamEndCapture(s, &graph));
  if (graph) CUDA_REQUIRE(cudaGraphDestroy(graph));
  CHECK(res == dctInvalidUsage);
  CHECK(std::string(dctGetLastError(nullptr)).find("capture") != std::string::npos);
  // Outside capture the same step runs.
  REQUIRE(queueStep(gpu) == dctSuccess);
  CUDA_REQUIRE(cudaStreamSynchronize(s));
  CHECK(stateOf(*gpu.ranks[0].state).step == 1);
}
