// The fixed-capacity step's merge, post, commit and finish ops
// (kernels/stream_args.h) in the CPU twin against plain references
// (stream_reference.h); every op with the comm's sticky error set changes
// nothing; and whole steps of a few ranks simulated in one process (the
// allgather and the vote done by hand), one of them with a digest that
// differs.
#include <doctest/doctest.h>

#include "stream_reference.h"

using namespace dct;
using namespace dct::test;

namespace {

constexpr dctDataType_t kAll[] = {dctFloat32, dctFloat64, dctFloat16, dctBFloat16};

std::vector<dctDataType_t> narrowOrSame(dctDataType_t acc) {
  if (acc == dctFloat64) return {dctFloat64, dctFloat32, dctFloat16, dctBFloat16};
  return {dctFloat32, dctFloat16, dctBFloat16};
}

// Every field but the vote, compared: the ops that must not touch them.
bool sameBesidesVote(StreamState a, StreamState b) {
  a.vote = b.vote = 0;
  return std::memcmp(&a, &b, sizeof a) == 0;
}

struct Messages {
  std::vector<std::vector<uint64_t>> indices;
  std::vector<std::vector<char>> values;
};

// Every rank's slot: ascending unique indices, nnz from 0 to the capacity.
Messages fillSlots(Rig& rig, uint64_t seed) {
  Messages m;
  const size_t most = std::min(rig.capacity, rig.n);
  for (int r = 0; r < rig.ranks; r++) {
    const size_t nnz = r == 0 ? most : (r == 1 ? 0 : (seed * 7 + r * 13) % (most + 1));
    m.indices.push_back(randomIndices<uint64_t>(rig.n, nnz, true, seed + r));
    m.values.push_back(randomOf(rig.wire, nnz, seed + 100 + r));
    std::fill(rig.slotOf(r), rig.slotOf(r) + rig.a.slotBytes, char(0x11 * (r + 1)));  // stale bytes past nnz
    writeSlot(rig.slotOf(r), rig.a.digest, nnz, 0, rig.indexBytes, m.indices.back(), m.values.back(), rig.capacity);
  }
  return m;
}

// The rank-order sum in the accumulation type, scaled when built in the result.
std::vector<char> plainSum(const Rig& rig, const Messages& m, bool scaled) {
  std::vector<char> sum(rig.n * dtypeSize(rig.acc), 0);
  for (size_t i = 0; i < rig.n; i++) refStore(rig.acc, 0.0, sum.data(), i);
  for (int r = 0; r < rig.ranks; r++)
    for (size_t j = 0; j < m.indices[r].size(); j++) {
      const size_t i = m.indices[r][j];
      const double v = inAcc(rig.acc, refLoad(rig.wire, m.values[r].data(), j));
      refStore(rig.acc, addAcc(rig.acc, refLoad(rig.acc, sum.data(), i), v), sum.data(), i);
    }
  if (scaled)
    for (size_t i = 0; i < rig.n; i++)
      refStore(rig.acc, mulAcc(rig.acc, refLoad(rig.acc, sum.data(), i), inAcc(rig.acc, rig.a.factor)), sum.data(), i);
  return sum;
}

void checkMerge(dctDataType_t acc, dctDataType_t wire, int indexBytes, size_t n, size_t capacity, int ranks,
                bool inResult, double factor, uint64_t seed) {
  CAPTURE(acc);
  CAPTURE(wire);
  CAPTURE(indexBytes);
  CAPTURE(n);
  CAPTURE(capacity);
  CAPTURE(ranks);
  CAPTURE(inResult);
  CAPTURE(factor);
  Rig rig(acc, acc, wire, indexBytes, n, capacity, ranks);
  const Messages m = fillSlots(rig, seed);
  if (inResult) {
    rig.a.result = rig.a.target;
    rig.a.resultType = acc;
  }
  rig.a.factor = factor;
  std::fill(rig.target.begin(), rig.target.end(), char(0x7b));
  std::fill(rig.result.begin(), rig.result.end(), char(0x6c));
  const auto result = rig.result;
  const auto slots = rig.slots;
  rig.state = busyState(0, 1);
  rig.state.vote = 9;  // the last step's: the merge's verdict replaces it
  const StreamState before = rig.state;
  REQUIRE(rig.ops.streamMerge(rig.ctx, &rig.a, nullptr) == dctSuccess);
  CHECK(rig.state.vote == 0);
  CHECK(sameBesidesVote(rig.state, before));
  const auto sum = plainSum(rig, m, inResult && factor != 1.0);
  CHECK(firstFailing(n, [&](size_t i) { return sameValue(acc, rig.target.data(), sum.data(), i); }) == kAllPass);
  CHECK(rig.slots == slots);
  if (!inResult) CHECK(rig.result == result);  // finish converts it, the merge leaves it
}

}  // namespace

TEST_CASE("streamMerge: every slot summed in rank order, in the accumulation type") {
  uint64_t seed = 1;
  for (dctDataType_t acc : {dctFloat32, dctFloat64})
    for (dctDataType_t wire : narrowOrSame(acc))
      for (size_t n : {size_t(1), size_t(2), size_t(3), size_t(7), size_t(11), size_t(1000), size_t(100003)})
        for (int ranks : {1, 2, 3, 4}) {
          const size_t capacity = n < 4 ? n : n / 3;
          checkMerge(acc, wire, seed % 3 == 0 ? 8 : 4, n, capacity, ranks, false, 1.0, seed++);
          checkMerge(acc, wire, 4, n, capacity, ranks, true, 1.0 / ranks, seed++);
          if (ranks == 3) checkMerge(acc, wire, 8, n, capacity, ranks, false, 1.0 / 3, seed++);
        }
}

namespace {

enum Corrupt { kDigest, kOverCapacity, kHugeCount, kRepeated, kDescending, kIndexN, kHugeIndex, kDigestAndCount };

void checkRejected(Corrupt what, int indexBytes, int bad, dctResult_t want) {
  CAPTURE(what);
  CAPTURE(indexBytes);
  CAPTURE(bad);
  const size_t n = 1000, capacity = 50;
  Rig rig(dctFloat32, dctFloat32, dctFloat16, indexBytes, n, capacity, 3);
  (void)fillSlots(rig, 77);
  // Rank 0's slot is full (50 entries); the others' are rewritten full too.
  for (int r = 1; r < 3; r++)
    writeSlot(rig.slotOf(r), rig.a.digest, capacity, 0, indexBytes, randomIndices<uint64_t>(n, capacity, true, 5 + r),
              randomOf(dctFloat16, capacity, 9 + r), capacity);
  char* slot = rig.slotOf(bad);
  char* indices = slot + slotIndexOffset();
  SlotHeader h = headerOf(slot);
  switch (what) {
    case kDigest: h.digest ^= 1; break;
    case kOverCapacity: h.nnz = capacity + 1; break;
    case kHugeCount: h.nnz = ~uint64_t(0); break;
    case kRepeated: setIndex(indexBytes, indices, 20, indexAt(indexBytes, indices, 19)); break;
    case kDescending: {
      const uint64_t a = indexAt(indexBytes, indices, 30), b = indexAt(indexBytes, indices, 31);
      setIndex(indexBytes, indices, 30, b);
      setIndex(indexBytes, indices, 31, a);
      break;
    }
    case kIndexN: setIndex(indexBytes, indices, capacity - 1, n); break;
    case kHugeIndex: setIndex(indexBytes, indices, capacity - 1, indexBytes == 8 ? (uint64_t(1) << 40) : 0xffffffffu); break;
    case kDigestAndCount: {
      h.digest ^= 1;  // this rank's digest, a later rank's count
      SlotHeader last = headerOf(rig.slotOf(2));
      last.nnz = capacity + 1;
      std::memcpy(rig.slotOf(2), &last, sizeof last);
      break;
    }
  }
  std::memcpy(slot, &h, sizeof h);
  std::fill(rig.target.begin(), rig.target.end(), char(0x7b));
  const auto target = rig.target;
  const auto slots = rig.slots;
  rig.a.result = rig.a.target;  // a scaled merge: still nothing written
  rig.a.resultType = dctFloat32;
  rig.a.factor = 1.0 / 3;
  rig.state = busyState(1, 1);
  const StreamState before = rig.state;
  REQUIRE(rig.ops.streamMerge(rig.ctx, &rig.a, nullptr) == dctSuccess);
  CHECK(rig.state.vote == want);
  CHECK(sameBesidesVote(rig.state, before));
  CHECK(rig.target == target);  // untouched
  CHECK(rig.slots == slots);
}

}  // namespace

TEST_CASE("streamMerge: a slot with another digest, too many entries or bad indices fails the step, target untouched") {
  for (int indexBytes : {4, 8})
    for (int bad : {0, 1, 2}) {
      checkRejected(kDigest, indexBytes, bad, dctInvalidUsage);
      checkRejected(kOverCapacity, indexBytes, bad, dctInternalError);
      checkRejected(kHugeCount, indexBytes, bad, dctInternalError);
      checkRejected(kRepeated, indexBytes, bad, dctInternalError);
      checkRejected(kDescending, indexBytes, bad, dctInternalError);
      checkRejected(kIndexN, indexBytes, bad, dctInternalError);
      checkRejected(kHugeIndex, indexBytes, bad, dctInternalError);
    }
  checkRejected(kDigestAndCount, 4, 0, dctInternalError);  // the worst verdict of all slots
}

TEST_CASE("streamPost: the vote is the max of the verdict and the code") {
  Rig rig(dctFloat32, dctFloat32, dctFloat32, 4, 10, 10);
  rig.state = busyState(0, 1);
  const StreamState before = rig.state;
  const std::pair<int32_t, int32_t> steps[] = {{0, 0}, {dctTransportError, dctTransportError},
                                               {dctInvalidUsage, dctTransportError}, {0, dctTransportError},
                                               {dctInternalError, dctTransportError}};
  for (auto [code, want] : steps) {
    REQUIRE(rig.ops.streamPost(rig.ctx, &rig.a, code, nullptr) == dctSuccess);
    CHECK(rig.state.vote == want);
    CHECK(sameBesidesVote(rig.state, before));
  }
}

TEST_CASE("streamCommit: vote 0 makes the draft the state; a failed vote changes nothing") {
  for (int errorFeedback : {0, 1})
    for (int estimated : {0, 1})
      for (int committed : {0, 1}) {
        CAPTURE(errorFeedback);
        CAPTURE(estimated);
        CAPTURE(committed);
        Rig rig(dctFloat32, dctFloat32, dctFloat32, 4, 10, 10);
        rig.a.errorFeedback = errorFeedback;
        rig.state = busyState(committed, 1);
        rig.state.estimated = estimated;
        rig.state.lastOk = 0;
        const auto r0 = rig.residuals[0], r1 = rig.residuals[1];
        StreamState want = rig.state;
        REQUIRE(rig.ops.streamCommit(rig.ctx, &rig.a, nullptr) == dctSuccess);
        want.committed = errorFeedback ? 1 - committed : committed;
        want.tau = 0.625;
        if (estimated) {
          want.lastEstimateStep = 41;
          want.estimates = 7;
        }
        want.driftPending = 1;
        want.nnz = 98;
        want.nonFinite = 97;
        want.overflow = 1;
        want.step = 42;
        want.lastOk = 1;
        CHECK(std::memcmp(&rig.state, &want, sizeof want) == 0);
        CHECK(rig.failed == 0);
        CHECK(rig.residuals[0] == r0);  // a commit moves no data
        CHECK(rig.residuals[1] == r1);
      }
  for (bool sticky : {false, true}) {
    CAPTURE(sticky);
    Rig rig(dctFloat32, dctFloat32, dctFloat32, 4, 10, 10);
    rig.a.sticky = sticky;
    rig.state = busyState(1, 1);
    rig.state.vote = dctInvalidUsage;
    StreamState want = rig.state;
    REQUIRE(rig.ops.streamCommit(rig.ctx, &rig.a, nullptr) == dctSuccess);
    want.lastOk = 0;
    CHECK(std::memcmp(&rig.state, &want, sizeof want) == 0);
    CHECK(rig.failed == (sticky ? dctInvalidUsage : 0));  // a device's asynchronous error
    // The next step's vote is not reached once the error is sticky: the first error stays.
    rig.state.vote = dctTransportError;
    REQUIRE(rig.ops.streamCommit(rig.ctx, &rig.a, nullptr) == dctSuccess);
    CHECK(rig.failed == (sticky ? dctInvalidUsage : 0));
  }
}

TEST_CASE("streamFinish: a committed step's sum into the result, converted and scaled") {
  uint64_t seed = 3;
  for (dctDataType_t acc : {dctFloat32, dctFloat64})
    for (dctDataType_t resultType : kAll) {
      if (dtypeSize(resultType) > dtypeSize(acc)) continue;
      for (size_t n : {size_t(1), size_t(7), size_t(1000), size_t(100003)})
        for (double factor : {1.0, 0.5, 1.0 / 3}) {
          CAPTURE(acc);
          CAPTURE(resultType);
          CAPTURE(n);
          CAPTURE(factor);
          Rig rig(acc, resultType, acc, 4, n, n);
          rig.a.factor = factor;
          const auto sum = randomOf(acc, n, seed++);
          std::memcpy(rig.target.data(), sum.data(), sum.size());
          std::fill(rig.result.begin(), rig.result.end(), char(0x6c));
          const auto untouched = rig.result;
          rig.state = busyState(0, 1);
          rig.state.lastOk = 0;  // a dropped step: nothing
          REQUIRE(rig.ops.streamFinish(rig.ctx, &rig.a, nullptr) == dctSuccess);
          CHECK(rig.result == untouched);
          rig.state.lastOk = 1;
          REQUIRE(rig.ops.streamFinish(rig.ctx, &rig.a, nullptr) == dctSuccess);
          const bool wide = acc == dctFloat64 || resultType == dctFloat64;
          std::vector<char> want(rig.result.size());
          for (size_t i = 0; i < n; i++) {
            const double t = refLoad(acc, sum.data(), i);
            const double w = factor == 1.0 ? t : (wide ? t * factor : mulAcc(dctFloat32, t, factor));
            refStore(resultType, resultType == dctFloat64 ? w : static_cast<double>(static_cast<float>(w)), want.data(), i);
          }
          CHECK(firstFailing(n, [&](size_t i) { return sameValue(resultType, rig.result.data(), want.data(), i); }) ==
                kAllPass);
          CHECK(rig.target == std::vector<char>(sum.begin(), sum.end()));
          // The sum built in the result (the merge scaled it): nothing to do.
          rig.a.result = rig.a.target;
          rig.a.resultType = acc;
          REQUIRE(rig.ops.streamFinish(rig.ctx, &rig.a, nullptr) == dctSuccess);
          CHECK(rig.target == std::vector<char>(sum.begin(), sum.end()));
        }
    }
}
