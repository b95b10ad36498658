// The fixed-capacity step's ops (CPU twin) when a rank finds the comm's
// sticky error set partway through a step (another compressor's step on
// another stream set it at a different point on each rank): the vote is the
// one decision the ranks share, so every rank drops the step, never one
// rank commits what another drops.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/kernels.h"

using namespace dct;

namespace {

// One simulated rank of a 2-rank step on the CPU twin.
struct Rank {
  StreamState state{};
  int32_t failed = 0;
  std::vector<float> grad, r0, r1, result;
  std::vector<unsigned char> slot;
  StreamStepArgs a{};
};

constexpr size_t kN = 4096;

void setUp(Rank& r, int rank, size_t capacity, size_t bytes, void* slots) {
  r.grad.resize(kN);
  for (size_t i = 0; i < kN; i++) r.grad[i] = static_cast<float>((i * 7919 + rank * 31) % 1000) / 100.0f - 5.0f;
  r.r0.assign(kN, 0.0f);
  r.r1.assign(kN, 0.0f);
  r.result.assign(kN, 0.0f);
  r.slot.assign(bytes, 0);
  StreamStepArgs& a = r.a;
  a.state = &r.state;
  a.failed = &r.failed;
  a.sticky = true;
  a.grad = r.grad.data();
  a.gradType = dctFloat32;
  a.residuals[0] = r.r0.data();
  a.residuals[1] = r.r1.data();
  a.n = kN;
  a.accType = dctFloat32;
  a.errorFeedback = 1;
  a.density = 0.01;
  a.interval = 4;
  a.seed = 5;
  a.k = 41;
  a.tauFloor = 1e-45;
  a.capacity = capacity;
  a.indexBytes = 4;
  a.wireType = dctFloat32;
  a.slotBytes = bytes;
  a.digest = 77;
  a.slot = r.slot.data();
  a.slots = slots;
  a.ranks = 2;
  a.target = r.result.data();
  a.result = r.result.data();
  a.resultType = dctFloat32;
  a.factor = 1.0;
}

}  // namespace

TEST_CASE("a rank halted partway through a step votes its error: every rank drops the step") {
  const KernelOps& ops = cpuKernelOps();
  KernelContext* ctx = nullptr;
  REQUIRE(ops.createContext(&ctx) == dctSuccess);
  const size_t capacity = 64, bytes = slotBytes(capacity, 4, sizeof(float));
  std::vector<unsigned char> slots(2 * bytes, 0);
  Rank ranks[2];
  for (int r = 0; r < 2; r++) setUp(ranks[r], r, capacity, bytes, slots.data());

  // haltAt: the op before which rank 0 finds the flag set (-1: never).
  const auto step = [&](int haltAt) {
    for (int r = 0; r < 2; r++) {
      if (r == 0 && haltAt == 0) ranks[0].failed = dctTransportError;
      REQUIRE(ops.streamEstimate(ctx, &ranks[r].a, nullptr) == dctSuccess);
      if (r == 0 && haltAt == 1) ranks[0].failed = dctTransportError;
      REQUIRE(ops.streamSelect(ctx, &ranks[r].a, nullptr) == dctSuccess);
    }
    for (int r = 0; r < 2; r++) std::memcpy(slots.data() + r * bytes, ranks[r].slot.data(), bytes);
    for (int r = 0; r < 2; r++) {
      if (r == 0 && haltAt == 2) ranks[0].failed = dctTransportError;
      REQUIRE(ops.streamMerge(ctx, &ranks[r].a, nullptr) == dctSuccess);
    }
    const int32_t worst = std::max(ranks[0].state.vote, ranks[1].state.vote);
    for (Rank& r : ranks) r.state.vote = worst;
    for (Rank& r : ranks) {
      REQUIRE(ops.streamCommit(ctx, &r.a, nullptr) == dctSuccess);
      REQUIRE(ops.streamFinish(ctx, &r.a, nullptr) == dctSuccess);
    }
  };

  step(-1);
  REQUIRE(ranks[0].state.step == 1);
  REQUIRE(ranks[1].state.step == 1);
  for (int haltAt : {2, 1, 0}) {
    CAPTURE(haltAt);
    ranks[0].failed = 0;
    step(haltAt);
    for (Rank& r : ranks) {
      CHECK(r.state.lastOk == 0);
      CHECK(r.state.step == 1);       // nothing committed on either rank
      CHECK(r.state.committed == 1);  // the residual of step 0 stays
    }
    CHECK(ranks[0].failed == dctTransportError);  // the first error stays
    CHECK(ranks[1].failed == dctTransportError);  // the failed vote reached rank 1 too
    ranks[1].failed = 0;
  }
  ops.destroyContext(ctx);
}
