// Whole fixed-capacity steps on the CPU twin's ops (kernels/stream_args.h):
// with the comm's sticky error set every op changes nothing but the vote
// (state, residuals, slots, sum and result byte for byte); and a few ranks
// simulated in one process (the allgather and the vote by hand): every
// rank ends with the same bits, a rank whose digest differs fails the step
// on every rank with nothing changed, and the retry equals a run that never
// failed.
#include <doctest/doctest.h>

#include <memory>

#include "stream_reference.h"

using namespace dct;
using namespace dct::test;

namespace {

struct Snapshot {
  StreamState state;
  std::vector<char> grad, r0, r1, slot, slots, target, result;
  explicit Snapshot(const Rig& rig)
      : state(rig.state), grad(rig.grad), r0(rig.residuals[0]), r1(rig.residuals[1]), slot(rig.slot),
        slots(rig.slots), target(rig.target), result(rig.result) {}
  void check(const Rig& rig) const {
    CHECK(std::memcmp(&rig.state, &state, sizeof state) == 0);
    CHECK(rig.grad == grad);
    CHECK(rig.residuals[0] == r0);
    CHECK(rig.residuals[1] == r1);
    CHECK(rig.slot == slot);
    CHECK(rig.slots == slots);
    CHECK(rig.target == target);
    CHECK(rig.result == result);
  }
};

// One whole step at one rank (its slot is the whole allgather).
void oneRankStep(Rig& rig) {
  const KernelOps& ops = rig.ops;
  REQUIRE(ops.streamEstimate(rig.ctx, &rig.a, nullptr) == dctSuccess);
  REQUIRE(ops.streamSelect(rig.ctx, &rig.a, nullptr) == dctSuccess);
  rig.slots = rig.slot;
  REQUIRE(ops.streamMerge(rig.ctx, &rig.a, nullptr) == dctSuccess);
  REQUIRE(ops.streamCommit(rig.ctx, &rig.a, nullptr) == dctSuccess);
  REQUIRE(ops.streamFinish(rig.ctx, &rig.a, nullptr) == dctSuccess);
}

}  // namespace

TEST_CASE("every op is a no-op while the comm's sticky error is set, but the merge votes it") {
  struct Case {
    dctDataType_t acc, grad, wire;
    size_t n;
  };
  for (const Case& c : {Case{dctFloat32, dctFloat32, dctFloat32, 7}, Case{dctFloat32, dctFloat16, dctBFloat16, 1000},
                        Case{dctFloat64, dctFloat64, dctFloat32, 1000}, Case{dctFloat64, dctBFloat16, dctFloat64, 11}}) {
    CAPTURE(c.acc);
    CAPTURE(c.grad);
    CAPTURE(c.wire);
    CAPTURE(c.n);
    Rig rig(c.acc, c.grad, c.wire, 4, c.n, c.n / 4 + 1);
    rig.a.sticky = true;
    auto grad = randomOf(c.grad, c.n, 1);
    std::memcpy(rig.grad.data(), grad.data(), grad.size());
    oneRankStep(rig);  // a state, residuals, slot and sum with something in them
    REQUIRE(rig.state.lastOk == 1);
    grad = randomOf(c.grad, c.n, 2);
    std::memcpy(rig.grad.data(), grad.data(), grad.size());
    std::fill(rig.result.begin(), rig.result.end(), char(0x6c));
    rig.state.driftPending = 1;  // an estimate would be due
    rig.failed = dctTransportError;
    const KernelOps& ops = rig.ops;
    for (int lastOk : {0, 1}) {
      CAPTURE(lastOk);
      rig.state.lastOk = lastOk;
      Snapshot before(rig);
      REQUIRE(ops.streamEstimate(rig.ctx, &rig.a, nullptr) == dctSuccess);
      before.check(rig);
      REQUIRE(ops.streamSelect(rig.ctx, &rig.a, nullptr) == dctSuccess);
      before.check(rig);
      // The merge votes the sticky error (so that every rank drops the
      // step) and changes nothing else; the post raises the vote (here it
      // stays the larger sticky error).
      REQUIRE(ops.streamMerge(rig.ctx, &rig.a, nullptr) == dctSuccess);
      before.state.vote = dctTransportError;
      before.check(rig);
      REQUIRE(ops.streamPost(rig.ctx, &rig.a, dctInternalError, nullptr) == dctSuccess);
      before.check(rig);
      // The commit clears lastOk (so that the finish after it writes
      // nothing) and nothing else; the first error stays.
      REQUIRE(ops.streamCommit(rig.ctx, &rig.a, nullptr) == dctSuccess);
      before.state.lastOk = 0;
      before.check(rig);
      CHECK(rig.failed == dctTransportError);
      REQUIRE(ops.streamFinish(rig.ctx, &rig.a, nullptr) == dctSuccess);
      before.check(rig);
    }
  }
}

namespace {

struct Ranks {
  std::vector<std::unique_ptr<Rig>> rigs;
  Ranks(int ranks, dctDataType_t acc, dctDataType_t grad, dctDataType_t wire, size_t n, size_t capacity) {
    for (int r = 0; r < ranks; r++) rigs.push_back(std::make_unique<Rig>(acc, grad, wire, 4, n, capacity, ranks));
    for (auto& rig : rigs) rig->a.factor = 1.0 / ranks;  // dctAvg, out of place: finish scales
  }
  // One step; `badRank` (if >= 0) has a digest of its own. The vote (0 or not).
  int32_t step(int number, int badRank) {
    const int ranks = static_cast<int>(rigs.size());
    for (int r = 0; r < ranks; r++) {
      Rig& rig = *rigs[r];
      const auto grad = randomOf(rig.gradType, rig.n, 1000 * number + r, false, false);
      std::memcpy(rig.grad.data(), grad.data(), grad.size());
      const uint64_t digest = rig.a.digest;
      if (r == badRank) rig.a.digest ^= 0x40;
      REQUIRE(rig.ops.streamEstimate(rig.ctx, &rig.a, nullptr) == dctSuccess);
      REQUIRE(rig.ops.streamSelect(rig.ctx, &rig.a, nullptr) == dctSuccess);
      rig.a.digest = digest;
    }
    for (auto& rig : rigs)  // the allgather
      for (int r = 0; r < ranks; r++) std::memcpy(rig->slotOf(r), rigs[r]->slot.data(), rig->a.slotBytes);
    int32_t vote = 0;
    for (auto& rig : rigs) {
      REQUIRE(rig->ops.streamMerge(rig->ctx, &rig->a, nullptr) == dctSuccess);
      vote = std::max(vote, rig->state.vote);
    }
    for (auto& rig : rigs) {  // the vote's allreduce max, then commit and finish
      rig->state.vote = vote;
      REQUIRE(rig->ops.streamCommit(rig->ctx, &rig->a, nullptr) == dctSuccess);
      REQUIRE(rig->ops.streamFinish(rig->ctx, &rig->a, nullptr) == dctSuccess);
    }
    return vote;
  }
};

void checkSimulated(int ranks, dctDataType_t acc, dctDataType_t grad, dctDataType_t wire, size_t n) {
  CAPTURE(ranks);
  CAPTURE(acc);
  CAPTURE(grad);
  CAPTURE(wire);
  CAPTURE(n);
  const size_t k = std::max<size_t>(1, static_cast<size_t>(std::llround(0.05 * static_cast<double>(n))));
  const size_t capacity = k;  // capacityFactor 1: some steps overflow
  Ranks clean(ranks, acc, grad, wire, n, capacity), failing(ranks, acc, grad, wire, n, capacity);
  const int steps = 5, failAt = 2;
  for (int s = 0; s < steps; s++) {
    CAPTURE(s);
    REQUIRE(clean.step(s, -1) == 0);
    if (s == failAt) {
      std::vector<Snapshot> before;
      for (auto& rig : failing.rigs) before.emplace_back(*rig);
      CHECK(failing.step(s, ranks - 1) == dctInvalidUsage);
      for (int r = 0; r < ranks; r++) {  // nothing a later step reads changed, on any rank
        const Rig& rig = *failing.rigs[r];
        CHECK(rig.state.lastOk == 0);
        CHECK(rig.state.step == before[r].state.step);
        CHECK(sameBits(rig.state.tau, before[r].state.tau));
        CHECK(rig.state.committed == before[r].state.committed);
        CHECK(rig.state.estimates == before[r].state.estimates);
        CHECK(rig.state.lastEstimateStep == before[r].state.lastEstimateStep);
        CHECK(rig.state.driftPending == before[r].state.driftPending);
        CHECK(rig.residuals[rig.state.committed] == (rig.state.committed ? before[r].r1 : before[r].r0));
        CHECK(rig.result == before[r].result);
      }
    }
    REQUIRE(failing.step(s, -1) == 0);  // the step (again, after the failure)
    for (int r = 0; r < ranks; r++) {
      const Rig& a = *clean.rigs[r];
      const Rig& b = *failing.rigs[r];
      CHECK(a.result == clean.rigs[0]->result);  // the same bits on every rank
      CHECK(b.result == a.result);               // the retry is exact
      CHECK(a.residuals[a.state.committed] == b.residuals[b.state.committed]);
      CHECK(a.state.step == b.state.step);
      CHECK(sameBits(a.state.tau, b.state.tau));
      CHECK(a.state.estimates == b.state.estimates);
    }
  }
  CHECK(clean.rigs[0]->state.step == uint64_t(steps));
}

}  // namespace

TEST_CASE("simulated ranks: the same bits everywhere; a differing digest fails every rank; the retry is exact") {
  for (int ranks : {2, 3, 4}) {
    checkSimulated(ranks, dctFloat32, dctFloat32, dctFloat32, 1000);
    checkSimulated(ranks, dctFloat32, dctFloat16, dctBFloat16, 11);
    checkSimulated(ranks, dctFloat64, dctFloat64, dctFloat16, 100003);
  }
}
