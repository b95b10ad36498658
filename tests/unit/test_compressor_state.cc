// dctCompressorSaveState / LoadState on the host twin, one rank (dctCompress
// steps): a state saved after k steps and loaded into a fresh (or a used)
// compressor continues the run bit for bit for every threshold method,
// datatype and wire type, mid-L-interval included; never-stepped states;
// and every kind of bad string is refused by name with nothing changed,
// including loads whose copies fail halfway and binds that fail with a
// state held.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "../common/typed_gradient.h"
#include "core/compressor.h"
#include "core/state_blob.h"

using namespace dct;
using dcttest::typeBytes;
using dcttest::typedGradient;
using Bytes = std::vector<unsigned char>;

namespace {

struct Cfg {
  double density = 0.02;
  int interval = 5;
  dctThresholdMethod_t method = dctThresholdSampled;
  int wire = -1;  // the tensor's own
  int warmup = 0;
  long long seed = 3;
  int errorFeedback = 1;
};

dctConfig_t resolved(const Cfg& c, dctDataType_t dtype) {
  dctConfig_t cfg = DCT_CONFIG_INITIALIZER;
  cfg.density = c.density;
  cfg.thresholdInterval = c.interval;
  cfg.errorFeedback = c.errorFeedback;
  cfg.warmupSteps = c.warmup;
  cfg.thresholdMethod = c.method;
  cfg.algorithm = dctAlgoAllgather;
  cfg.seed = c.seed;
  cfg.rowSelection = dctRowTopK;
  cfg.wireType = c.wire < 0 ? dtype : c.wire;
  cfg.compressor = dctCompressorTopk;
  cfg.autoGlobalTopk = 0;
  return cfg;
}

struct Out {
  size_t nnz = 0;
  Bytes indices, values;
  bool operator==(const Out& o) const { return nnz == o.nnz && indices == o.indices && values == o.values; }
};

struct Local {
  dctCompressor_t c = nullptr;
  size_t n;
  dctDataType_t dtype;
  Local(size_t count, dctDataType_t type, const Cfg& cfg) : n(count), dtype(type) {
    REQUIRE(compressorCreate(nullptr, 1, n, dtype, resolved(cfg, dtype), &c) == dctSuccess);
  }
  ~Local() { compressorDestroy(c); }
  Out step(int t) {
    const Bytes g = typedGradient(n, dtype, 0, t);
    Out o;
    o.indices.resize(n * 4 + 4);
    o.values.resize(n * typeBytes(c->wireType) + 8);
    REQUIRE(dctCompress(c, g.data(), o.indices.data(), o.values.data(), n, &o.nnz, nullptr) == dctSuccess);
    o.indices.resize(o.nnz * 4);
    o.values.resize(o.nnz * typeBytes(c->wireType));
    return o;
  }
  Bytes save() {
    size_t bytes = 0;
    REQUIRE(dctCompressorSaveState(c, nullptr, &bytes, nullptr) == dctSuccess);
    Bytes b(bytes);
    size_t given = bytes;
    REQUIRE(dctCompressorSaveState(c, b.data(), &given, nullptr) == dctSuccess);
    REQUIRE(given == bytes);
    return b;
  }
  dctResult_t load(const Bytes& b) { return dctCompressorLoadState(c, b.data(), b.size(), nullptr); }
  Bytes residual() {
    Bytes r(n * typeBytes(c->accType));
    REQUIRE(dctCompressorGetResidual(c, r.data(), nullptr) == dctSuccess);
    return r;
  }
};

bool sameStats(dctCompressor_t a, dctCompressor_t b) {
  const dctStats_t &x = a->stats, &y = b->stats;
  return x.step == y.step && std::memcmp(&x.threshold, &y.threshold, 8) == 0 && x.nnz == y.nnz &&
         x.thresholdEstimates == y.thresholdEstimates && x.totalBytesSent == y.totalBytesSent &&
         x.totalDenseBytes == y.totalDenseBytes;
}

// k steps on a, save, load into b (fresh, or used first), then m more steps
// on both: every message, residual and the whole state agree.
void roundTrip(size_t n, dctDataType_t dtype, const Cfg& cfg, int k, int m, bool usedTarget) {
  CAPTURE(n);
  CAPTURE(dtype);
  CAPTURE(k);
  CAPTURE(usedTarget);
  Local a(n, dtype, cfg), b(n, dtype, cfg);
  for (int t = 0; t < k; t++) a.step(t);
  const Bytes saved = a.save();
  if (usedTarget)
    for (int t = 100; t < 103; t++) b.step(t);
  REQUIRE(b.load(saved) == dctSuccess);
  CHECK(b.save() == saved);  // held or applied, it is the same state
  CHECK(sameStats(a.c, b.c));
  for (int t = k; t < k + m; t++) {
    CAPTURE(t);
    const Out oa = a.step(t), ob = b.step(t);
    REQUIRE(oa == ob);
    REQUIRE(a.residual() == b.residual());
    REQUIRE(sameStats(a.c, b.c));
  }
  CHECK(a.save() == b.save());
}

}  // namespace

TEST_CASE("a saved state continues the run bit for bit: threshold methods, datatypes, wire types") {
  for (dctThresholdMethod_t method : {dctThresholdSampled, dctThresholdExact, dctThresholdBisect})
    for (dctDataType_t dtype : {dctFloat32, dctFloat64, dctFloat16, dctBFloat16}) {
      CAPTURE(method);
      Cfg cfg;
      cfg.method = method;
      for (bool used : {false, true}) roundTrip(1009, dtype, cfg, 7, 9, used);  // 7: mid-interval (L = 5)
    }
  for (auto [dtype, wire] : {std::pair{dctFloat32, dctFloat16}, std::pair{dctFloat32, dctBFloat16},
                             std::pair{dctFloat64, dctFloat32}, std::pair{dctFloat64, dctFloat16}}) {
    CAPTURE(wire);
    Cfg cfg;
    cfg.wire = wire;
    roundTrip(2003, dtype, cfg, 6, 8, true);
  }
}

TEST_CASE("odd sizes, warm-up, no error feedback, long intervals") {
  for (size_t n : {size_t(1), size_t(2), size_t(3), size_t(7), size_t(11), size_t(1000003)}) {
    Cfg cfg;
    cfg.density = 0.01;
    roundTrip(n, dctFloat32, cfg, 4, n > 1000 ? 3 : 12, n % 2 == 1);
  }
  Cfg warm;
  warm.warmup = 3;
  roundTrip(513, dctFloat32, warm, 2, 6, false);  // saved inside the warm-up
  Cfg noEf;
  noEf.errorFeedback = 0;
  roundTrip(513, dctFloat16, noEf, 5, 5, true);
  Cfg longL;
  longL.interval = 1000;
  roundTrip(4099, dctBFloat16, longL, 13, 10, true);
}

TEST_CASE("the schedule matters: the residual alone does not continue the run") {
  Cfg cfg;
  cfg.interval = 5;
  Local a(3001, dctFloat32, cfg), r(3001, dctFloat32, cfg);
  for (int t = 0; t < 7; t++) a.step(t);
  const Bytes residual = a.residual();
  REQUIRE(dctCompressorSetResidual(r.c, residual.data(), nullptr) == dctSuccess);
  bool differs = false;
  for (int t = 7; t < 12; t++) differs = !(a.step(t) == r.step(t)) || differs;
  CHECK(differs);
}

TEST_CASE("a never-stepped compressor's state: zeros, and it loads anywhere as a fresh start") {
  Cfg cfg;
  Local fresh(777, dctFloat64, cfg), used(777, dctFloat64, cfg), reference(777, dctFloat64, cfg);
  const Bytes blank = fresh.save();
  size_t query = 0;
  REQUIRE(dctCompressorSaveState(fresh.c, nullptr, &query, nullptr) == dctSuccess);
  CHECK(query == blank.size());
  CHECK(fresh.c->ops == nullptr);  // saving binds nothing
  for (int t = 0; t < 4; t++) used.step(t);
  REQUIRE(used.load(blank) == dctSuccess);
  CHECK(used.c->stats.step == 0);
  CHECK(used.residual() == Bytes(777 * 8, 0));
  for (int t = 0; t < 8; t++) REQUIRE(used.step(t) == reference.step(t));
  CHECK(used.save() == reference.save());
  // Count 0: nothing to bind, the scalars still travel.
  Local emptyA(0, dctFloat32, cfg), emptyB(0, dctFloat32, cfg);
  const Bytes e = emptyA.save();
  CHECK(emptyB.load(e) == dctSuccess);
  CHECK(emptyB.save() == e);
}

TEST_CASE("a state loaded before the first step is held, then applied by GetResidual or SetResidual") {
  Cfg cfg;
  Local a(999, dctFloat32, cfg), b(999, dctFloat32, cfg), c(999, dctFloat32, cfg);
  for (int t = 0; t < 6; t++) a.step(t);
  const Bytes saved = a.save();
  REQUIRE(b.load(saved) == dctSuccess);
  CHECK(b.c->ops == nullptr);
  CHECK(!b.c->heldState.empty());
  CHECK(b.c->stats.step == 6);  // the scalars at once
  CHECK(b.residual() == a.residual());  // binds and applies
  CHECK(b.c->heldState.empty());
  // SetResidual after a load: the state, then the new residual.
  REQUIRE(c.load(saved) == dctSuccess);
  const Bytes mine = a.residual();
  REQUIRE(dctCompressorSetResidual(c.c, mine.data(), nullptr) == dctSuccess);
  CHECK(c.c->stats.step == 6);
  CHECK(c.c->tau.tau == a.c->tau.tau);
  for (int t = 6; t < 10; t++) REQUIRE(a.step(t) == b.step(t));
}

namespace {

// Where a bad string must leave a compressor: refused with `what` in the
// message, its state unchanged, its steps as if no load had been tried.
void refused(Local& target, Local& twin, const Bytes& bad, const char* what) {
  CAPTURE(what);
  const Bytes before = target.save();
  CHECK(target.load(bad) == dctInvalidArgument);
  const std::string msg = dctGetLastError(nullptr);
  CAPTURE(msg);
  CHECK(msg.find(what) != std::string::npos);
  CHECK(target.save() == before);
  CHECK(target.step(50) == twin.step(50));
}

Bytes resealed(Bytes b) {
  sealState(b.data(), b.size());
  return b;
}

}  // namespace

TEST_CASE("a 1-bit step's report saved before version 3 (5) reads as dctNumAlgorithms") {  // a 1-segment layout
  Cfg cfg;
  Local a(777, dctFloat32, cfg);
  for (int t = 0; t < 3; t++) a.step(t);
  const Bytes good = a.save();
  for (uint32_t version : {1u, 3u}) {
    CAPTURE(version);
    SavedState st;
    std::string why;
    REQUIRE(readState(good.data(), good.size(), st, why));
    st.version = version;
    st.s.stats.algorithm = 5;
    Bytes old = good;
    writeState(st, old.data());
    sealState(old.data(), old.size());
    SavedState read;
    CAPTURE(why);
    REQUIRE(readState(old.data(), old.size(), read, why));
    CHECK(read.s.stats.algorithm == (version < 3 ? dctNumAlgorithms : dctAlgoRecursiveDoubling));
  }
}

TEST_CASE("bad strings are refused by name and change nothing") {
  Cfg cfg;
  const size_t n = 1501;
  Local a(n, dctFloat32, cfg), target(n, dctFloat32, cfg), twin(n, dctFloat32, cfg);
  for (int t = 0; t < 6; t++) a.step(t);
  for (int t = 10; t < 13; t++) target.step(t), twin.step(t);
  const Bytes good = a.save();
  SavedState layout;
  std::string why;
  REQUIRE(readState(good.data(), good.size(), layout, why));

  for (size_t keep : {size_t(1), size_t(10), size_t(23), size_t(24), good.size() / 2, good.size() - 1})
    refused(target, twin, Bytes(good.begin(), good.begin() + keep), "truncated");
  Bytes longer = good;
  longer.push_back(0);
  refused(target, twin, longer, "wrong size");
  Bytes magic = good;
  magic[0] ^= 0x40;
  refused(target, twin, magic, "magic");
  Bytes swapped = good;
  std::swap(swapped[0], swapped[3]), std::swap(swapped[1], swapped[2]);
  refused(target, twin, swapped, "byte order");
  Bytes version = good;
  version[4] = 7;  // past the newest (6: segments and the owner's drift flag)
  refused(target, twin, version, "format version 7");
  Bytes flipped = good;
  flipped[layout.residualAt + 13] ^= 1;
  refused(target, twin, flipped, "checksum");
  Bytes scalar = good;
  scalar[kStateHeaderBytes + 70] ^= 0x10;
  refused(target, twin, scalar, "checksum");
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    Bytes nan = good;
    std::memcpy(nan.data() + layout.residualAt + 4 * 77, &bad, 4);
    refused(target, twin, resealed(nan), "NaN or Inf");
  }
  // A resealed string that lies about itself.
  Bytes tau = good;
  const double negative = -1;
  SavedState probe = layout;
  probe.s.tau.tau = negative;
  writeState(probe, tau.data());
  refused(target, twin, resealed(tau), "NaN or negative");

  // Strings of other compressors.
  auto other = [&](size_t count, dctDataType_t dtype, Cfg c, const char* field) {
    Local o(count, dtype, c);
    o.step(0);
    refused(target, twin, o.save(), field);
  };
  other(n + 1, dctFloat32, cfg, "count");
  other(n, dctFloat64, cfg, "datatype");
  Cfg d = cfg;
  d.density = 0.03;
  other(n, dctFloat32, d, "config.density");
  Cfg s = cfg;
  s.seed = 4;
  other(n, dctFloat32, s, "config.seed");
  Cfg l = cfg;
  l.interval = 6;
  other(n, dctFloat32, l, "config.thresholdInterval");
  Cfg m = cfg;
  m.method = dctThresholdExact;
  other(n, dctFloat32, m, "config.thresholdMethod");
  Cfg w = cfg;
  w.wire = dctFloat16;
  other(n, dctFloat32, w, "config.wireType");
  Cfg wu = cfg;
  wu.warmup = 1;
  other(n, dctFloat32, wu, "config.warmupSteps");

  // Argument checks.
  CHECK(dctCompressorLoadState(target.c, nullptr, good.size(), nullptr) == dctInvalidArgument);
  CHECK(dctCompressorLoadState(nullptr, good.data(), good.size(), nullptr) == dctInvalidArgument);
  CHECK(dctCompressorSaveState(target.c, nullptr, nullptr, nullptr) == dctInvalidArgument);
  Bytes small(good.size() - 1, 0xab);
  size_t given = small.size();
  CHECK(dctCompressorSaveState(a.c, small.data(), &given, nullptr) == dctInvalidArgument);
  CHECK(given == small.size());
  CHECK(small == Bytes(good.size() - 1, 0xab));  // nothing written
  // After all that, still the good one loads.
  REQUIRE(target.load(good) == dctSuccess);
  for (int t = 6; t < 9; t++) REQUIRE(target.step(t) == a.step(t));
}

namespace {

// The host twin with a synchronize that fails once `passes` more calls
// have passed (-1: never).
int passes = -1;
dctResult_t failingSynchronize(KernelContext* ctx, void* stream) {
  if (passes == 0) {
    passes = -1;
    return dctSystemError;
  }
  if (passes > 0) passes--;
  return cpuKernelOps().synchronize(ctx, stream);
}
const KernelOps& failingOps() {
  static const KernelOps ops = [] {
    KernelOps o = cpuKernelOps();
    o.synchronize = failingSynchronize;
    return o;
  }();
  return ops;
}

}  // namespace

TEST_CASE("a load whose copies fail leaves the old state; a bind that fails keeps the state held") {
  Cfg cfg;
  const size_t n = 2001;
  Local a(n, dctFloat32, cfg), b(n, dctFloat32, cfg), twin(n, dctFloat32, cfg);
  for (int t = 0; t < 6; t++) a.step(t);
  const Bytes saved = a.save();
  REQUIRE(bindOps(b.c, failingOps(), "test") == dctSuccess);
  for (int t = 20; t < 23; t++) b.step(t), twin.step(t);
  const Bytes before = b.save();
  passes = 0;
  CHECK(b.load(saved) == dctSystemError);
  CHECK(b.save() == before);
  CHECK(b.step(30) == twin.step(30));

  // Held, then the bind fails: unbound again, still held; the next bind applies it.
  Local h(n, dctFloat32, cfg);
  REQUIRE(h.load(saved) == dctSuccess);
  passes = 1;  // the residual's zeroing passes, the held state's copy fails
  CHECK(bindOps(h.c, failingOps(), "test") == dctSystemError);
  CHECK(passes == -1);
  CHECK(h.c->ops == nullptr);
  CHECK(!h.c->heldState.empty());
  CHECK(h.save() == saved);
  for (int t = 6; t < 10; t++) REQUIRE(h.step(t) == a.step(t));
}
