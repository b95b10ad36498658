// The drop-in shims' policy, buffer cache and session bookkeeping.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "preload/buffer_cache.h"
#include "preload/policy.h"
#include "preload/session.h"

using namespace dct::preload;

namespace {

Policy parsed(PolicyText text, bool byDefault = true) {
  Policy p;
  std::string error;
  REQUIRE_MESSAGE(parsePolicy(text, byDefault, &p, &error), error);
  return p;
}

std::string refused(PolicyText text) {
  Policy p;
  std::string error;
  CHECK_FALSE(parsePolicy(text, true, &p, &error));
  return error;
}

CallFacts eligible() {
  CallFacts f;
  f.commSize = 4;
  f.bytes = 4 << 20;
  f.typeSupported = f.opSupported = true;
  return f;
}

}  // namespace

TEST_CASE("policy settings parse strictly") {
  const Policy defaults = parsed({});
  CHECK(defaults.enabled);
  CHECK(defaults.minBytes == (1u << 20));
  CHECK(defaults.allow.empty());
  CHECK(defaults.deny.empty());
  CHECK_FALSE(parsed({}, false).enabled);
  CHECK_FALSE(parsed({"DCT_PRELOAD", "0"}).enabled);
  CHECK(parsed({"DCT_MPI_COMPRESS", "1"}, false).enabled);
  CHECK(parsed({"DCT_PRELOAD", nullptr, "4M"}).minBytes == 4u << 20);
  CHECK(parsed({"DCT_PRELOAD", nullptr, "3k"}).minBytes == 3072);
  CHECK(parsed({"DCT_PRELOAD", nullptr, "0"}).minBytes == 0);
  CHECK(parsed({"DCT_PRELOAD", nullptr, "2G"}).minBytes == 2ull << 30);

  const Policy rules = parsed({"DCT_PRELOAD", nullptr, nullptr, "size=2-64,bytes=-8M", "call=10,call=100-"});
  REQUIRE(rules.allow.size() == 2);
  CHECK(rules.allow[0].subject == Subject::CommSize);
  CHECK(rules.allow[0].range.lo == 2);
  CHECK(rules.allow[0].range.hi == 64);
  CHECK(rules.allow[1].subject == Subject::Bytes);
  CHECK(rules.allow[1].range.lo == 0);
  CHECK(rules.allow[1].range.hi == 8u << 20);
  REQUIRE(rules.deny.size() == 2);
  CHECK(rules.deny[0].subject == Subject::CallIndex);
  CHECK(rules.deny[0].range.lo == 10);
  CHECK(rules.deny[0].range.hi == 10);
  CHECK(rules.deny[1].range.lo == 100);
  CHECK(rules.deny[1].range.hi == UINT64_MAX);

  CHECK(refused({"DCT_PRELOAD", "yes"}).find("DCT_PRELOAD: 'yes'") != std::string::npos);
  CHECK(refused({"DCT_MPI_COMPRESS", "2"}).find("DCT_MPI_COMPRESS") != std::string::npos);
  for (const char* bad : {"12x", "-5", "", "M", "99999999999G", "1.5M", " -1", " 5", "+5"})
    if (*bad) CHECK(refused({"DCT_PRELOAD", nullptr, bad}).find("DCT_PRELOAD_MIN_BYTES") != std::string::npos);
  for (const char* bad : {"foo=1", "size=5-2", "size=", "call=a", "size", "bytes=-", "size=1-2,", ",size=1"})
    CHECK_MESSAGE(refused({"DCT_PRELOAD", nullptr, nullptr, nullptr, bad}).find("DCT_PRELOAD_DENY") !=
                      std::string::npos, bad);
  CHECK(refused({"DCT_PRELOAD", nullptr, nullptr, "call=x"}).find("DCT_PRELOAD_ALLOW") != std::string::npos);
}

TEST_CASE("policy verdicts, in the order the checks run") {
  Policy p = parsed({"DCT_PRELOAD", nullptr, "1M", "size=2-8", "call=0-1,bytes=100M-"});
  CallFacts f = eligible();
  f.callIndex = 5;
  CHECK(p.decide(f) == Verdict::Compress);
  f.capturing = true;
  CHECK(p.decide(f) == Verdict::Capturing);
  f.captureReady = true;  // a fixed-capacity step libdct can queue under capture
  CHECK(p.decide(f) == Verdict::Compress);
  f.capturing = f.captureReady = false;
  f.commSize = 1;  // outside the allowed sizes
  CHECK(p.decide(f) == Verdict::Rule);
  f.commSize = 4;
  f.callIndex = 1;  // denied call index
  CHECK(p.decide(f) == Verdict::Rule);
  f.callIndex = 2;
  f.bytes = 100u << 20;  // denied size range
  CHECK(p.decide(f) == Verdict::Rule);
  f.bytes = (1u << 20) - 1;
  CHECK(p.decide(f) == Verdict::Small);
  f.bytes = 1u << 20;
  CHECK(p.decide(f) == Verdict::Compress);
  f.opSupported = false;
  CHECK(p.decide(f) == Verdict::Op);
  f.typeSupported = false;
  CHECK(p.decide(f) == Verdict::Type);
  p.enabled = false;
  CHECK(p.decide(f) == Verdict::Disabled);
  // A zero-byte call is never compressed, even with no minimum.
  Policy none = parsed({"DCT_PRELOAD", nullptr, "0"});
  CallFacts empty = eligible();
  empty.bytes = 0;
  CHECK(none.decide(empty) == Verdict::Small);
  CHECK(std::string(verdictName(Verdict::Small)) == "below min bytes");
}

TEST_CASE("buffer cache evicts the least recently used entry") {
  std::vector<int> evicted;
  LruCache<int> cache(3, [&](const BufferKey& k, int& v) {
    CHECK(static_cast<int>(k.buffer) == v);
    evicted.push_back(v);
  });
  auto key = [](int b) { return BufferKey{7, static_cast<uintptr_t>(b), 100, 0}; };
  for (int b = 1; b <= 3; b++) cache.insert(key(b), b);
  CHECK(cache.find(key(4)) == nullptr);
  REQUIRE(cache.find(key(1)) != nullptr);  // 1 is now the most recent
  cache.insert(key(4), 4);                 // evicts 2
  CHECK(evicted == std::vector<int>{2});
  CHECK(cache.find(key(2)) == nullptr);
  CHECK(*cache.find(key(3)) == 3);
  cache.insert(key(5), 5);  // evicts 1 (3 was just used)
  CHECK(evicted == std::vector<int>{2, 1});
  CHECK(cache.evictions() == 2);
  CHECK(cache.size() == 3);
  // The key's other fields count: same buffer, another count or type.
  CHECK(cache.find(BufferKey{7, 3, 101, 0}) == nullptr);
  CHECK(cache.find(BufferKey{7, 3, 100, 1}) == nullptr);
  CHECK(cache.find(BufferKey{8, 3, 100, 0}) == nullptr);
  cache.clear();
  CHECK(evicted.size() == 5);
  CHECK(cache.size() == 0);
  CHECK(cache.evictions() == 2);  // clearing is not eviction
}

// The agreement of a communicator of one rank: the maximum is this rank's.
const Agreer alone = [](uint64_t*, int) { return true; };

TEST_CASE("session counts calls per communicator and summarises") {
  Session s("test", parsed({"DCT_PRELOAD", nullptr, nullptr, nullptr, "call=0-1"}), 4);
  const uintptr_t a = 0x1000, b = 0x2000;
  CHECK(s.admit(a, eligible(), alone) == Verdict::Rule);  // calls 0 and 1 of each comm are denied
  CHECK(s.admit(a, eligible(), alone) == Verdict::Rule);
  CHECK(s.admit(b, eligible(), alone) == Verdict::Rule);
  CHECK(s.admit(a, eligible(), alone) == Verdict::Compress);
  CallFacts small = eligible();
  small.bytes = 10;
  CHECK(s.admit(a, small, alone) == Verdict::Small);
  s.countPass(Verdict::MultiComm);
  s.forget(a);  // a freed communicator starts counting again
  CHECK(s.admit(a, eligible(), alone) == Verdict::Rule);
  // A communicator libdct cannot wrap: the call is the caller's to pass on.
  CompressCall call;
  call.comm = b;
  const dctResult_t res = s.compress(call, [](dctComm_t* out) {
    *out = nullptr;
    return dctInvalidArgument;
  }, alone);
  CHECK(res == dctInvalidArgument);
  const Summary sum = s.summary();
  CHECK(sum.calls == 6);
  CHECK(sum.passed[static_cast<size_t>(Verdict::Rule)] == 4);
  CHECK(sum.passed[static_cast<size_t>(Verdict::Small)] == 1);
  CHECK(sum.passed[static_cast<size_t>(Verdict::MultiComm)] == 1);
  CHECK(sum.compressed == 0);
  CHECK(sum.buffers == 0);
}

TEST_CASE("the first call on a communicator compares the ranks' policies; a mismatch passes every call") {
  const Policy mine = parsed({"DCT_PRELOAD", nullptr, "1M"});
  CHECK(mine.digest() == parsed({"DCT_PRELOAD", nullptr, "1M"}).digest());
  CHECK(mine.digest() != parsed({"DCT_PRELOAD", nullptr, "2M"}).digest());
  CHECK(mine.digest() != parsed({"DCT_PRELOAD", "0", "1M"}).digest());
  CHECK(mine.digest() != parsed({"DCT_PRELOAD", nullptr, "1M", "size=2-"}).digest());
  // Another rank holds a larger digest: the maxima tell this rank it differs.
  int agreements = 0;
  const Agreer another = [&](uint64_t* values, int n) {
    agreements++;
    for (int i = 0; i < n; i++) values[i] = ~uint64_t{0};
    return true;
  };
  Session s("test", mine, 4);
  CHECK(s.admit(0x1000, eligible(), another) == Verdict::Disagree);
  CHECK(s.admit(0x1000, eligible(), another) == Verdict::Disagree);
  CHECK(agreements == 1);  // once per communicator
  CHECK(s.admit(0x2000, eligible(), alone) == Verdict::Compress);
  CHECK(s.summary().passed[static_cast<size_t>(Verdict::Disagree)] == 2);
  // No agreement possible yet (NCCL inside a group): passed, not decided.
  CHECK(s.admit(0x3000, eligible(), Agreer{}) == Verdict::Disagree);
  CHECK_FALSE(s.agreed(0x3000));
  CHECK(s.admit(0x3000, eligible(), alone) == Verdict::Compress);
  // Nor inside CUDA graph capture: the call passes, the agreement waits.
  CallFacts captured = eligible();
  captured.capturing = true;
  CHECK(s.admit(0x4000, captured, another) == Verdict::Capturing);
  CHECK_FALSE(s.agreed(0x4000));
  CHECK(agreements == 1);
}

TEST_CASE("a communicator libdct could not wrap on some rank is passed through on every rank") {
  Session s("test", parsed({"DCT_PRELOAD", nullptr, "1M"}), 4);
  const Agreer someoneFailed = [](uint64_t* values, int) {
    values[0] = 1;
    return true;
  };
  CHECK(s.admit(0x1000, eligible(), alone) == Verdict::Compress);
  CompressCall call;
  call.comm = 0x1000;
  int opened = 0;
  const CommOpener open = [&](dctComm_t* out) {
    opened++;
    *out = nullptr;
    return dctOutOfMemory;
  };
  CHECK(s.compress(call, open, someoneFailed) != dctSuccess);
  CHECK(s.admit(0x1000, eligible(), alone) == Verdict::Disagree);  // decided for good
  CHECK(s.compress(call, open, someoneFailed) != dctSuccess);
  CHECK(opened == 1);
  CHECK(s.summary().fellBack == 1);
}

TEST_CASE("handle keys keep a handle's bits") {
  int x = 0;
  CHECK(handleKey(&x) == reinterpret_cast<uintptr_t>(&x));
  CHECK(handleKey(42) == 42u);  // MPICH's int handles
}
