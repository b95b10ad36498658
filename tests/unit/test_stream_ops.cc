// The fixed-capacity step's estimate and select ops (kernels/stream_args.h)
// in the CPU twin against plain references (stream_reference.h), on seeded
// inputs of odd sizes, every accumulator / gradient / wire type the select
// takes; and the conservation of a few whole steps at one rank: what went
// on the wire + the new residual = gradient + old residual, element by
// element.
#include <doctest/doctest.h>

#include "kernels/sampling.h"
#include "stream_reference.h"

using namespace dct;
using namespace dct::test;

namespace {

constexpr size_t kSizes[] = {1, 2, 3, 7, 11, 1000, 100003};

struct Types {
  dctDataType_t acc, grad, wire;
};

// The accumulation type, and each type no wider than it (the select's table).
std::vector<dctDataType_t> narrowOrSame(dctDataType_t acc) {
  if (acc == dctFloat64) return {dctFloat64, dctFloat32, dctFloat16, dctBFloat16};
  return {dctFloat32, dctFloat16, dctBFloat16};
}

std::vector<Types> selectTypes() {
  std::vector<Types> all;
  for (dctDataType_t acc : {dctFloat32, dctFloat64})
    for (dctDataType_t grad : narrowOrSame(acc))
      for (dctDataType_t wire : narrowOrSame(acc)) all.push_back({acc, grad, wire});
  return all;
}

void checkState(const StreamState& s, const StreamState& want) {
  CHECK(s.step == want.step);
  CHECK(sameBits(s.tau, want.tau));
  CHECK(s.lastEstimateStep == want.lastEstimateStep);
  CHECK(s.driftPending == want.driftPending);
  CHECK(s.committed == want.committed);
  CHECK(s.estimates == want.estimates);
  CHECK(s.nnz == want.nnz);
  CHECK(s.nonFinite == want.nonFinite);
  CHECK(s.overflow == want.overflow);
  CHECK(sameBits(s.draftTau, want.draftTau));
  CHECK(s.estimated == want.estimated);
  CHECK(s.draftDrift == want.draftDrift);
  CHECK(s.selected == want.selected);
  CHECK(s.written == want.written);
  CHECK(s.writtenNonFinite == want.writtenNonFinite);
  CHECK(s.vote == want.vote);
  CHECK(s.lastOk == want.lastOk);
}


struct SelectCase {
  Types t;
  int indexBytes;
  size_t n, capacity;
  double tau, valueLimit;
  bool estimated;
  int committed;
  uint64_t seed;
};

void checkSelect(const SelectCase& c) {
  CAPTURE(c.t.acc);
  CAPTURE(c.t.grad);
  CAPTURE(c.t.wire);
  CAPTURE(c.indexBytes);
  CAPTURE(c.n);
  CAPTURE(c.capacity);
  CAPTURE(c.tau);
  CAPTURE(c.valueLimit);
  CAPTURE(c.estimated);
  CAPTURE(c.committed);
  Rig rig(c.t.acc, c.t.grad, c.t.wire, c.indexBytes, c.n, c.capacity);
  const auto grad = randomOf(c.t.grad, c.n, c.seed);
  const auto old = randomOf(c.t.acc, c.n, c.seed + 1);
  std::memcpy(rig.grad.data(), grad.data(), grad.size());
  std::memcpy(rig.residuals[c.committed].data(), old.data(), old.size());
  std::fill(rig.residuals[1 - c.committed].begin(), rig.residuals[1 - c.committed].end(), char(0x3c));
  std::fill(rig.slot.begin(), rig.slot.end(), char(0xa5));
  rig.state = busyState(c.committed, 0);
  rig.state.draftTau = c.tau;
  rig.state.estimated = c.estimated ? 1 : 0;
  rig.a.valueLimit = c.valueLimit;
  rig.a.k = std::max<size_t>(1, c.n / 4);
  const StreamState before = rig.state;

  REQUIRE(rig.ops.streamSelect(rig.ctx, &rig.a, nullptr) == dctSuccess);
  const SelectRef ref =
      refSelect(c.t.acc, c.t.grad, c.t.wire, c.valueLimit, grad.data(), old.data(), c.n, c.tau, c.capacity);
  const size_t nnz = ref.indices.size();

  const SlotHeader h = headerOf(rig.slot.data());
  CHECK(h.digest == rig.a.digest);
  REQUIRE(h.nnz == nnz);
  CHECK(h.nonFinite == ref.nonFinite);
  CHECK(h.reserved == 0);
  const char* indices = rig.slot.data() + slotIndexOffset();
  const char* values = rig.slot.data() + slotValueOffset(c.capacity, c.indexBytes);
  CHECK(firstFailing(nnz, [&](size_t j) { return indexAt(c.indexBytes, indices, j) == ref.indices[j]; }) == kAllPass);
  CHECK(firstFailing(nnz, [&](size_t j) { return sameElement(c.t.wire, values, ref.values.data(), j); }) == kAllPass);
  // Nothing past the entries written (the slot's padding included).
  const size_t idxEnd = slotIndexOffset() + nnz * c.indexBytes, valBegin = slotValueOffset(c.capacity, c.indexBytes);
  const size_t valEnd = valBegin + nnz * dtypeSize(c.t.wire);
  CHECK(firstFailing(rig.slot.size(), [&](size_t b) {
          const bool untouched = (b >= idxEnd && b < valBegin) || b >= valEnd;
          return !untouched || rig.slot[b] == char(0xa5);
        }) == kAllPass);
  CHECK(firstFailing(c.n, [&](size_t i) { return sameValue(c.t.acc, rig.spareResidual(), ref.residual.data(), i); }) ==
        kAllPass);
  CHECK(std::memcmp(rig.committedResidual(), old.data(), old.size()) == 0);  // the old residual survives
  CHECK(std::memcmp(rig.grad.data(), grad.data(), grad.size()) == 0);

  StreamState want = before;
  want.selected = ref.selected;
  want.written = nnz;
  want.writtenNonFinite = ref.nonFinite;
  want.draftDrift = refDrifted(static_cast<double>(ref.selected), static_cast<double>(rig.a.k), c.estimated,
                               c.tau <= rig.a.tauFloor)
                        ? 1
                        : 0;
  checkState(rig.state, want);
}

}  // namespace

TEST_CASE("streamSelect: the first `capacity` entries meeting tau into the slot, the rest kept") {
  uint64_t seed = 100;
  for (const Types& t : selectTypes())
    for (size_t n : kSizes)
      for (size_t capacity : {size_t(1), n / 3 + 1, n}) {
        const bool narrow = t.wire != t.acc;
        checkSelect({t, 4, n, capacity, 1.0, 0.0, seed % 2 == 0, static_cast<int>(seed % 3 == 0), seed});
        seed += 2;
        if (n == 7 || n == 1000) {  // 64-bit indices, a tighter tau, a clamp below the wire type's range
          checkSelect({t, 8, n, capacity, 2.5, narrow ? 1000.0 : 0.0, false, 1, seed});
          seed += 2;
        }
      }
}

TEST_CASE("streamSelect: past kStreamBytes (streamed residual stores)") {
  const size_t n32 = (size_t(1) << 21) + 5, n64 = (size_t(1) << 20) + 3;
  checkSelect({{dctFloat32, dctFloat32, dctFloat32}, 4, n32, n32 / 10, 1.5, 0.0, false, 0, 7});
  checkSelect({{dctFloat32, dctFloat16, dctBFloat16}, 4, n32, n32 / 10, 1.5, 0.0, true, 1, 8});
  checkSelect({{dctFloat64, dctFloat64, dctFloat64}, 8, n64, n64 / 2, 1.0, 0.0, false, 1, 9});
}

TEST_CASE("streamSelect: the drift verdict") {
  // k = n / 4 = 250 of 1000: a tau taking everything drifts high, one
  // taking nothing starves, a fresh estimate never drifts, and a tau at the
  // floor does not drift low.
  const Types t{dctFloat32, dctFloat32, dctFloat32};
  checkSelect({t, 4, 1000, 1000, 1e-30, 0.0, false, 0, 1});
  checkSelect({t, 4, 1000, 1000, 1e30, 0.0, false, 0, 2});
  checkSelect({t, 4, 1000, 1000, 1e30, 0.0, true, 0, 3});
  Rig rig(dctFloat32, dctFloat32, dctFloat32, 4, 1000, 1000);
  rig.a.tauFloor = 1e30;  // at the floor: a starved count is a tie, not drift
  rig.state = busyState(0, 0);
  rig.state.draftTau = 1e30;
  rig.state.estimated = 0;
  REQUIRE(rig.ops.streamSelect(rig.ctx, &rig.a, nullptr) == dctSuccess);
  CHECK(rig.state.selected == 0);
  CHECK(rig.state.draftDrift == 0);
  for (double x : {0.0, 1.0, 2.0, 3.0, 250.0, 1e6, 1e12, 1.8e19})  // the twins' square root, for any k
    CHECK(std::fabs(streamSqrt(x) - std::sqrt(x)) <= 1e-15 * std::sqrt(x));
}

namespace {

// The exact estimate (the sample is all of x): the k-th largest |acc| with
// NaN ranked as +Inf, k = max(1, round(density n)), floored positive.
double plainExactTau(const std::vector<double>& acc, double density, dctDataType_t accType) {
  std::vector<double> mag;
  for (double x : acc) mag.push_back(std::isnan(x) ? INFINITY : std::fabs(x));
  std::sort(mag.begin(), mag.end(), std::greater<double>());
  const double kd = std::round(density * static_cast<double>(acc.size()));
  const size_t k = kd < 1 ? 1 : std::min(acc.size(), static_cast<size_t>(kd));
  const double floor = accType == dctFloat64 ? std::numeric_limits<double>::denorm_min()
                                             : static_cast<double>(std::numeric_limits<float>::denorm_min());
  return std::max(mag[k - 1], floor);
}

bool sampleIsAll(size_t n, double density) {
  const double s = std::min(1048576.0, std::max(4096.0, 256.0 / density));
  return 2 * s >= static_cast<double>(n);
}

void checkEstimate(dctDataType_t acc, dctDataType_t gradType, size_t n, double density, int committed,
                   bool nonFinite, uint64_t seed) {
  CAPTURE(acc);
  CAPTURE(gradType);
  CAPTURE(n);
  CAPTURE(density);
  CAPTURE(committed);
  Rig rig(acc, gradType, acc, 4, n, n);
  const auto grad = randomOf(gradType, n, seed, nonFinite, false);
  const auto old = randomOf(acc, n, seed + 1, nonFinite, false);
  std::memcpy(rig.grad.data(), grad.data(), grad.size());
  std::memcpy(rig.residuals[committed].data(), old.data(), old.size());
  std::fill(rig.residuals[1 - committed].begin(), rig.residuals[1 - committed].end(), char(0x3c));
  const auto spare = rig.residuals[1 - committed];
  rig.a.density = density;
  rig.a.interval = 4;
  std::vector<double> accs(n);
  for (size_t i = 0; i < n; i++) accs[i] = addAcc(acc, refLoad(acc, old.data(), i), inAcc(acc, refLoad(gradType, grad.data(), i)));

  struct Schedule {
    const char* why;
    double tau;
    uint64_t step, last;
    int drift;
    bool due;
  };
  for (const Schedule& sc : {Schedule{"fresh tau, L not reached", 0.75, 10, 7, 0, false},
                             Schedule{"no tau yet", 0.0, 0, 0, 0, true},
                             Schedule{"drift last step", 0.75, 10, 9, 1, true},
                             Schedule{"L steps since the last", 0.75, 11, 7, 0, true}}) {
    CAPTURE(sc.why);
    rig.state = busyState(committed, 0);
    rig.state.tau = sc.tau;
    rig.state.step = sc.step;
    rig.state.lastEstimateStep = sc.last;
    rig.state.driftPending = sc.drift;
    rig.state.draftTau = -1;
    rig.state.estimated = 7;
    const StreamState before = rig.state;
    REQUIRE(rig.ops.streamEstimate(rig.ctx, &rig.a, nullptr) == dctSuccess);
    StreamState want = before;
    want.estimated = sc.due ? 1 : 0;
    want.draftTau = rig.state.draftTau;
    checkState(rig.state, want);
    CHECK(std::memcmp(rig.committedResidual(), old.data(), old.size()) == 0);
    CHECK(std::memcmp(rig.spareResidual(), spare.data(), spare.size()) == 0);
    CHECK(std::memcmp(rig.grad.data(), grad.data(), grad.size()) == 0);
    const double tau = rig.state.draftTau;
    if (!sc.due) {
      CHECK(sameBits(tau, sc.tau));
      continue;
    }
    // The threshold op's sampled estimate on residual + gradient, with this step's seed.
    ThresholdArgs t{old.data(), n, acc, density, dctThresholdSampled, stepSeed(rig.a.seed, sc.step)};
    t.addend = grad.data();
    t.addendType = gradType;
    double expect = 0;
    REQUIRE(rig.ops.threshold(rig.ctx, &t, &expect, nullptr) == dctSuccess);
    CHECK(sameBits(tau, expect));
    CHECK(tau > 0);
    if (sampleIsAll(n, density)) {
      CHECK(sameBits(tau, plainExactTau(accs, density, acc)));
    } else {  // about density * n entries meet it
      size_t meet = 0;
      for (double x : accs) meet += !(std::fabs(x) < inAcc(acc, tau));
      const double want = density * static_cast<double>(n);
      CHECK(static_cast<double>(meet) >= 0.75 * want);
      CHECK(static_cast<double>(meet) <= 1.25 * want);
    }
  }
}

}  // namespace

TEST_CASE("streamEstimate: the schedule, and when due the sampled threshold of residual + gradient") {
  uint64_t seed = 500;
  for (dctDataType_t acc : {dctFloat32, dctFloat64})
    for (dctDataType_t grad : narrowOrSame(acc))
      for (size_t n : kSizes)
        for (double density : {0.01, 0.3}) {
          checkEstimate(acc, grad, n, density, static_cast<int>(seed % 2), seed % 5 == 0, seed);
          seed += 2;
        }
}

namespace {

// Several whole steps at one rank (the slots are the rank's own slot):
// each step, written (as the wire value, in the accumulation type) + new
// residual = old residual + gradient, element by element; the one-rank sum
// is what was written, the result its conversion.
void checkConservation(const Types& t, size_t n, size_t capacity, int steps) {
  CAPTURE(t.acc);
  CAPTURE(t.grad);
  CAPTURE(t.wire);
  CAPTURE(n);
  CAPTURE(capacity);
  Rig rig(t.acc, t.grad, t.wire, 4, n, capacity);
  rig.a.slots = rig.slot.data();
  rig.a.interval = 3;
  uint64_t estimates = 0, overflowSteps = 0;
  for (int step = 0; step < steps; step++) {
    CAPTURE(step);
    const auto grad = randomOf(t.grad, n, 900 + step, false, false);
    std::memcpy(rig.grad.data(), grad.data(), grad.size());
    const std::vector<char> old(rig.committedResidual(), rig.committedResidual() + n * dtypeSize(t.acc));
    const int committedBefore = rig.state.committed;
    const KernelOps& ops = rig.ops;
    REQUIRE(ops.streamEstimate(rig.ctx, &rig.a, nullptr) == dctSuccess);
    REQUIRE(ops.streamSelect(rig.ctx, &rig.a, nullptr) == dctSuccess);
    REQUIRE(ops.streamMerge(rig.ctx, &rig.a, nullptr) == dctSuccess);
    REQUIRE(rig.state.vote == 0);
    REQUIRE(ops.streamCommit(rig.ctx, &rig.a, nullptr) == dctSuccess);
    REQUIRE(ops.streamFinish(rig.ctx, &rig.a, nullptr) == dctSuccess);
    REQUIRE(rig.state.lastOk == 1);
    CHECK(rig.state.step == uint64_t(step + 1));
    CHECK(rig.state.committed == 1 - committedBefore);
    estimates += rig.state.estimated;
    CHECK(rig.state.estimates == estimates);
    CHECK(rig.state.overflow == rig.state.selected - rig.state.written);
    overflowSteps += rig.state.overflow > 0;

    const SlotHeader h = headerOf(rig.slot.data());
    REQUIRE(h.nnz <= capacity);
    std::vector<double> sent(n, 0.0);
    const char* values = rig.slot.data() + slotValueOffset(capacity, 4);
    for (size_t j = 0; j < h.nnz; j++) sent[indexAt(4, rig.slot.data() + slotIndexOffset(), j)] = refLoad(t.wire, values, j);
    const char* fresh = rig.committedResidual();
    CHECK(firstFailing(n, [&](size_t i) {
            const double before = addAcc(t.acc, refLoad(t.acc, old.data(), i), inAcc(t.acc, refLoad(t.grad, grad.data(), i)));
            return addAcc(t.acc, inAcc(t.acc, sent[i]), refLoad(t.acc, fresh, i)) == before;
          }) == kAllPass);
    CHECK(firstFailing(n, [&](size_t i) { return refLoad(t.acc, rig.target.data(), i) == inAcc(t.acc, sent[i]); }) ==
          kAllPass);
    std::vector<char> want(rig.result.size());
    for (size_t i = 0; i < n; i++) refStore(t.grad, refLoad(t.acc, rig.target.data(), i), want.data(), i);
    CHECK(rig.result == want);
  }
  CHECK(estimates >= 2);  // the first step and every L = 3 steps at least
  if (capacity < n / 20) CHECK(overflowSteps > 0);
}

}  // namespace

TEST_CASE("fixed-capacity steps at one rank conserve the mass (capacity overflow kept)") {
  for (const Types& t : selectTypes())
    for (size_t n : {size_t(11), size_t(1000), size_t(100003)}) {
      const size_t k = std::max<size_t>(1, static_cast<size_t>(std::llround(0.05 * static_cast<double>(n))));
      checkConservation(t, n, k / 2 + 1, 6);  // tight: the selection overflows
      checkConservation(t, n, 2 * k, 6);
    }
}
