// Global top-k's fixed pieces on the CUDA twin against the CPU twin
// (kernels/stream_args.h): streamSelect with `pieces` (P slots, one per
// range, overflow kept), streamMerge `ranged` (each slot written at its
// range, the vote raised), streamCommit with an owner state. The pieces one
// rank selects are laid out as P owners' slots would be (range-relative
// indices, range r in slot r), so the ranged merge reads them directly.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "base/debug.h"
#include "half_util.h"
#include "twin_bytes.h"

using namespace dct;
using namespace dct::test;

namespace {

struct Case {
  dctDataType_t acc, grad, wire;
  int indexBytes, pieces;
  double capacityFactor;
};

size_t sizeOf(dctDataType_t t) { return t == dctFloat64 ? 8 : t == dctFloat32 ? 4 : 2; }

// One rank's memory for a step of P pieces, in one twin.
struct Side {
  const KernelOps& ops;
  KernelContext* ctx = nullptr;
  cudaStream_t stream = nullptr;
  std::unique_ptr<Bytes> state, owner, failed, grad, r0, r1, pieces, target;
  StreamStepArgs a{};

  Side(const KernelOps& o, const Case& c, size_t n, size_t capacity, size_t slotBytes) : ops(o) {
    REQUIRE(ops.createContext(&ctx) == dctSuccess);
    const bool dev = ops.device;
    if (dev) CUDA_REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    state = std::make_unique<Bytes>(dev, sizeof(StreamState));
    owner = std::make_unique<Bytes>(dev, sizeof(StreamState));
    failed = std::make_unique<Bytes>(dev, sizeof(int32_t));
    grad = std::make_unique<Bytes>(dev, n * sizeOf(c.grad));
    r0 = std::make_unique<Bytes>(dev, n * sizeOf(c.acc));
    r1 = std::make_unique<Bytes>(dev, n * sizeOf(c.acc));
    pieces = std::make_unique<Bytes>(dev, slotBytes * c.pieces);
    target = std::make_unique<Bytes>(dev, n * sizeOf(c.acc));
    a.state = static_cast<StreamState*>(state->get());
    a.failed = static_cast<int32_t*>(failed->get());
    a.sticky = true;
    a.grad = grad->get();
    a.gradType = c.grad;
    a.residuals[0] = r0->get();
    a.residuals[1] = r1->get();
    a.n = n;
    a.accType = c.acc;
    a.errorFeedback = 1;
    a.density = 0.01;
    a.interval = 2;
    a.seed = 0x5eed;
    a.k = std::max<size_t>(1, static_cast<size_t>(std::round(0.01 * static_cast<double>(n))));
    a.tauFloor = c.acc == dctFloat64 ? std::numeric_limits<double>::denorm_min()
                                      : static_cast<double>(std::numeric_limits<float>::denorm_min());
    a.capacity = capacity;
    a.indexBytes = c.indexBytes;
    a.wireType = c.wire;
    a.slotBytes = slotBytes;
    a.digest = 0xfeedull;
    a.slot = pieces->get();
    a.slots = pieces->get();
    a.ranks = c.pieces;
    a.pieces = c.pieces;
    a.target = target->get();
    a.result = target->get();
    a.resultType = c.acc;
    a.factor = 1.0;
    a.owner = static_cast<StreamState*>(owner->get());
  }
  ~Side() {
    ops.destroyContext(ctx);
    if (stream) cudaStreamDestroy(stream);
  }

  // Estimate, select into the pieces, merge them ranged, commit both states.
  dctResult_t step() {
    void* s = stream;
    DCTCHECK(ops.streamBegin(ctx, s));
    DCTCHECK(ops.streamEstimate(ctx, &a, s));
    DCTCHECK(ops.streamSelect(ctx, &a, s));
    StreamStepArgs m = a;
    m.pieces = 0;
    m.ranged = true;
    DCTCHECK(ops.streamMerge(ctx, &m, s));
    DCTCHECK(ops.streamCommit(ctx, &m, s));
    return ops.streamEnd(ctx, s);
  }
};

// Normals, with every 5th entry of the first owner range (below heavyEnd)
// 50 times larger: that range draws most of the selection and overflows its
// piece, the others stay under theirs.
void setGradient(Side& side, dctDataType_t type, size_t n, size_t heavyEnd, int step) {
  std::mt19937_64 rng(1000 + step);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<unsigned char> bytes(n * sizeOf(type));
  for (size_t i = 0; i < n; i++) {
    const double x = normal(rng) * (i < heavyEnd && i % 5 == 0 ? 50.0 : 1.0);
    if (type == dctFloat64) std::memcpy(&bytes[i * 8], &x, 8);
    else if (type == dctFloat32) {
      const float f = static_cast<float>(x);
      std::memcpy(&bytes[i * 4], &f, 4);
    } else {
      const Half h = fromDouble<Half>(x);
      std::memcpy(&bytes[i * 2], &h, 2);
    }
  }
  side.grad->write(bytes.data(), bytes.size());
}

StreamState stateOf(const Bytes& b) {
  StreamState s;
  const auto bytes = b.read();
  std::memcpy(&s, bytes.data(), sizeof s);
  return s;
}

void requireSameStates(const Bytes& gpu, const Bytes& cpu) {
  const auto g = gpu.read(), c = cpu.read();
  REQUIRE(std::memcmp(g.data(), c.data(), sizeof(StreamState)) == 0);
}

}  // namespace

TEST_CASE("global top-k's pieces, ranged merge and owner commit: CUDA twin equals the CPU twin") {
  const Case cases[] = {
      {dctFloat32, dctFloat32, dctFloat32, 4, 4, 1.0},
      {dctFloat32, dctFloat16, dctFloat16, 4, 3, 1.25},
      {dctFloat64, dctFloat32, dctFloat32, 8, 5, 1.0},  // the pre-add path
  };
  for (const Case& c : cases) {
    for (size_t n : {size_t(3), size_t(100003)}) {
      CAPTURE(n);
      CAPTURE(c.pieces);
      CAPTURE(static_cast<int>(c.grad));
      const size_t longest = (n + c.pieces - 1) / c.pieces;
      const double kq = 0.01 * static_cast<double>(longest);
      const size_t capacity = std::min<size_t>(
          longest, static_cast<size_t>(std::max(std::ceil(c.capacityFactor * kq), std::ceil(kq + 3 * std::sqrt(kq)))));
      const size_t slotBytes = dct::slotBytes(capacity, c.indexBytes, sizeOf(c.wire));
      Side cpu(cpuKernelOps(), c, n, capacity, slotBytes), gpu(cudaKernelOps(), c, n, capacity, slotBytes);
      uint64_t overflow = 0;
      for (int step = 0; step < 4; step++) {
        CAPTURE(step);
        setGradient(cpu, c.grad, n, longest, step);
        setGradient(gpu, c.grad, n, longest, step);
        REQUIRE(cpu.step() == dctSuccess);
        REQUIRE(gpu.step() == dctSuccess);
        requireSameStates(*gpu.state, *cpu.state);
        requireSameStates(*gpu.owner, *cpu.owner);
        const StreamState s = stateOf(*cpu.state);
        REQUIRE(s.lastOk == 1);
        overflow += s.overflow;
        REQUIRE(gpu.r0->read() == cpu.r0->read());
        REQUIRE(gpu.r1->read() == cpu.r1->read());
        const auto gp = gpu.pieces->read(), cp = cpu.pieces->read();
        for (int q = 0; q < c.pieces; q++) {
          SlotHeader gh, ch;
          std::memcpy(&gh, gp.data() + q * slotBytes, sizeof gh);
          std::memcpy(&ch, cp.data() + q * slotBytes, sizeof ch);
          REQUIRE(gh.nnz == ch.nnz);
          REQUIRE(gh.nonFinite == ch.nonFinite);
          const size_t at = q * slotBytes + slotIndexOffset();
          REQUIRE(std::memcmp(gp.data() + at, cp.data() + at, ch.nnz * c.indexBytes) == 0);
          const size_t v = q * slotBytes + slotValueOffset(capacity, c.indexBytes);
          REQUIRE(std::memcmp(gp.data() + v, cp.data() + v, ch.nnz * sizeOf(c.wire)) == 0);
        }
        REQUIRE(gpu.target->read() == cpu.target->read());
      }
      if (n > 1000) CHECK(overflow > 0);  // the heavy range overflowed its piece
    }
  }
}
