// dctCompressorSaveState / LoadState under mpirun: every rank saves its
// compressor after k collective steps, loads it into a fresh (or used)
// compressor on the same comm, and both run m more steps on the same
// inputs with bit-identical results, residuals (worker, owner, 1-bit
// server) and statistics: top-k through allgather, split, dense and global
// top-k (sampled and exact thresholds, saved mid-interval; fp32, fp64,
// fp16, bf16; narrower wire types), and the 1-bit allreduce (saved in and
// after warm-up). Strings of another rank or comm size, or malformed ones,
// are refused with nothing changed, and the steps after are unaffected.
#include <cstring>
#include <string>
#include <vector>

#include "../common/typed_gradient.h"
#include "core/compressor.h"
#include "core/state_blob.h"
#include "mpi_util.h"

using namespace dcttest;
using Bytes = std::vector<unsigned char>;

namespace {

dctConfig_t config(dctAlgorithm_t algo, dctThresholdMethod_t method, int interval, int wire = -1,
                   dctCompressorKind_t kind = dctCompressorTopk, int warmup = 0) {
  Settings s;
  s.density = 0.03;
  s.algorithm = algo;
  s.method = method;
  s.interval = interval;
  s.warmup = warmup;
  s.seed = 11;
  dctConfig_t cfg = explicitConfig(s);
  cfg.wireType = wire;  // -1: the tensor's own
  cfg.compressor = kind;
  cfg.autoGlobalTopk = 0;
  return cfg;
}

struct Dist {
  World& w;
  dctCompressor_t c = nullptr;
  size_t n;
  dctDataType_t dtype;
  Dist(World& world, size_t count, dctDataType_t type, const dctConfig_t& cfg, dctComm_t comm = nullptr)
      : w(world), n(count), dtype(type) {
    REQUIRE(dctCompressorCreate(comm ? comm : w.comm, n, dtype, &cfg, &c) == dctSuccess);
  }
  ~Dist() { dctCompressorDestroy(c); }
  Bytes step(int t) {
    const Bytes g = typedGradient(n, dtype, w.rank, t);
    Bytes out(n * typeBytes(dtype));
    REQUIRE(dctSparseAllreduce(g.data(), out.data(), n, dtype, dctAvg, c, w.comm, nullptr) == dctSuccess);
    return out;
  }
  Bytes save() {
    size_t bytes = 0;
    REQUIRE(dctCompressorSaveState(c, nullptr, &bytes, nullptr) == dctSuccess);
    Bytes b(bytes);
    REQUIRE(dctCompressorSaveState(c, b.data(), &bytes, nullptr) == dctSuccess);
    REQUIRE(bytes == b.size());
    return b;
  }
  dctResult_t load(const Bytes& b) { return dctCompressorLoadState(c, b.data(), b.size(), nullptr); }
  // What the rank holds back: worker (+ owner) residual, the owner part
  // alone, and a 1-bit server error as stored.
  Bytes heldBack() {
    const size_t es = typeBytes(c->accType);
    Bytes r(n * es), owner(n * es);
    REQUIRE(dctCompressorGetResidual(c, r.data(), nullptr) == dctSuccess);
    size_t begin = 0, length = 0;
    REQUIRE(dctCompressorGetOwnerResidual(c, owner.data(), &begin, &length, nullptr) == dctSuccess);
    r.insert(r.end(), owner.begin(), owner.begin() + length * es);
    if (c->onebit.arena.as() != nullptr) {
      const auto* s = c->onebit.serverErrors[c->onebit.serverCommitted].as<unsigned char>();
      const size_t bytes = c->onebit.serverErrors[0].capacity();
      if (s) r.insert(r.end(), s, s + bytes);
    }
    return r;
  }
};

bool sameStats(dctCompressor_t a, dctCompressor_t b) {
  const dctStats_t &x = a->stats, &y = b->stats;
  return x.step == y.step && std::memcmp(&x.threshold, &y.threshold, 8) == 0 && x.nnz == y.nnz &&
         x.nonFinite == y.nonFinite && x.algorithm == y.algorithm && x.thresholdEstimates == y.thresholdEstimates &&
         x.bytesSent == y.bytesSent && x.bytesReceived == y.bytesReceived && x.totalBytesSent == y.totalBytesSent &&
         x.totalBytesReceived == y.totalBytesReceived && x.totalDenseBytes == y.totalDenseBytes &&
         x.ownerKept == y.ownerKept && std::memcmp(&x.ownerThreshold, &y.ownerThreshold, 8) == 0 &&
         std::memcmp(&x.ownerResidualMass, &y.ownerResidualMass, 8) == 0;
}

void roundTrip(World& w, size_t n, dctDataType_t dtype, const dctConfig_t& cfg, int k, int m, bool usedTarget) {
  CAPTURE(n);
  CAPTURE(dtype);
  CAPTURE(k);
  CAPTURE(usedTarget);
  Dist a(w, n, dtype, cfg), b(w, n, dtype, cfg);
  for (int t = 0; t < k; t++) a.step(t);
  const Bytes saved = a.save();
  if (usedTarget)
    for (int t = 100; t < 103; t++) b.step(t);
  REQUIRE(b.load(saved) == dctSuccess);
  CHECK(allTrue(b.save() == saved));
  bool same = true;
  for (int t = k; t < k + m; t++) {
    const Bytes ra = a.step(t), rb = b.step(t);
    same = same && ra == rb && a.heldBack() == b.heldBack() && sameStats(a.c, b.c);
  }
  CHECK(allTrue(same));
}

}  // namespace

TEST_CASE("top-k: a saved state continues the run bit for bit on every algorithm") {
  World w;
  for (dctAlgorithm_t algo : {dctAlgoAllgather, dctAlgoSplit, dctAlgoDense, dctAlgoGlobalTopk})
    for (dctThresholdMethod_t method : {dctThresholdSampled, dctThresholdExact}) {
      CAPTURE(algo);
      CAPTURE(method);
      const dctConfig_t cfg = config(algo, method, 4);
      roundTrip(w, 3001, dctFloat32, cfg, 6, 7, false);  // 6: mid-interval (L = 4)
      roundTrip(w, 3001, dctFloat32, cfg, 6, 7, true);
    }
}

TEST_CASE("top-k: datatypes and wire types") {
  World w;
  for (dctDataType_t dtype : {dctFloat64, dctFloat16, dctBFloat16})
    for (dctAlgorithm_t algo : {dctAlgoAllgather, dctAlgoGlobalTopk}) {
      CAPTURE(algo);
      roundTrip(w, 2011, dtype, config(algo, dctThresholdSampled, 5), 7, 6, true);
    }
  for (auto [dtype, wire] : {std::pair{dctFloat32, dctFloat16}, std::pair{dctFloat32, dctBFloat16},
                             std::pair{dctFloat64, dctFloat32}}) {
    CAPTURE(wire);
    roundTrip(w, 1999, dtype, config(dctAlgoSplit, dctThresholdSampled, 5, wire), 7, 6, true);
  }
}

TEST_CASE("top-k: a never-stepped compressor's state, and odd sizes") {
  World w;
  for (size_t n : {size_t(1), size_t(3), size_t(11)})
    roundTrip(w, n, dctFloat32, config(dctAlgoGlobalTopk, dctThresholdSampled, 3), 0, 6, true);
  roundTrip(w, 1000, dctFloat32, config(dctAlgoAllgather, dctThresholdExact, 3), 0, 4, true);
  roundTrip(w, 7, dctFloat32, config(dctAlgoSplit, dctThresholdSampled, 3), 4, 6, false);
}

TEST_CASE("1-bit: worker error, server error and their pending scales continue bit for bit") {
  World w;
  for (dctDataType_t dtype : {dctFloat32, dctFloat64, dctFloat16}) {
    const dctConfig_t cfg = config(dctAlgoAllgather, dctThresholdExact, 1, -1, dctCompressorOnebit, 2);
    roundTrip(w, 4099, dtype, cfg, 5, 5, true);   // after warm-up: both errors set
    roundTrip(w, 4099, dtype, cfg, 2, 5, true);   // at the end of warm-up: no server error yet
    roundTrip(w, 4099, dtype, cfg, 1, 5, false);  // in warm-up
    roundTrip(w, 4099, dtype, cfg, 0, 4, true);   // never stepped
  }
  roundTrip(w, 5, dctFloat32, config(dctAlgoAllgather, dctThresholdExact, 1, -1, dctCompressorOnebit, 0), 3, 3,
            true);  // chunks empty on some ranks
}

TEST_CASE("strings of another rank, comm size or config, and malformed ones, are refused; steps go on") {
  World w;
  const size_t n = 2003;
  const dctConfig_t cfg = config(dctAlgoGlobalTopk, dctThresholdSampled, 4);
  Dist a(w, n, dctFloat32, cfg), target(w, n, dctFloat32, cfg), twin(w, n, dctFloat32, cfg);
  for (int t = 0; t < 5; t++) a.step(t), target.step(t + 20), twin.step(t + 20);
  const Bytes mine = a.save();
  bool ok = true;
  auto refused = [&](const Bytes& bad, const std::string& what) {
    const Bytes before = target.save();
    const bool no = target.load(bad) == dctInvalidArgument;
    const std::string msg = dctGetLastError(w.comm);
    const bool right = no && msg.find(what) != std::string::npos && target.save() == before;
    if (!right) MESSAGE(what << ": " << msg);
    ok = ok && right;
  };
  // Rank 0's string on every rank: only rank 0 may load it.
  uint64_t size0 = mine.size();
  MPI_Bcast(&size0, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  Bytes zero(size0);
  if (w.rank == 0) zero = mine;
  MPI_Bcast(zero.data(), static_cast<int>(size0), MPI_BYTE, 0, MPI_COMM_WORLD);
  if (w.rank != 0) refused(zero, "rank");
  // Another comm size.
  if (w.size > 1) {
    dctComm_t self = nullptr;
    REQUIRE(dctCommInitMpi(MPI_COMM_SELF, &self) == dctSuccess);
    {
      Dist alone(w, n, dctFloat32, cfg, self);
      CHECK(alone.load(mine) == dctInvalidArgument);
      CHECK(std::string(dctGetLastError(self)).find("comm size") != std::string::npos);
    }
    dctCommDestroy(self);
  }
  refused(Bytes(mine.begin(), mine.begin() + mine.size() / 3), "truncated");
  Dist other(w, n, dctFloat32, config(dctAlgoSplit, dctThresholdSampled, 4));
  other.step(0);
  target.step(40), twin.step(40);  // the collective step other's took part in
  refused(other.save(), "config.algorithm");
  Dist onebit(w, n, dctFloat32, config(dctAlgoGlobalTopk, dctThresholdSampled, 4, -1, dctCompressorOnebit));
  onebit.step(0);
  target.step(41), twin.step(41);
  refused(onebit.save(), "config.compressor");
  // A 1-bit server error with a NaN in it (resealed: the check, not the checksum).
  Bytes withNan = onebit.save();
  dct::SavedState layout;
  std::string why;
  REQUIRE(dct::readState(withNan.data(), withNan.size(), layout, why));
  if (layout.serverElems > 0) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(withNan.data() + layout.serverAt, &nan, 4);
    dct::sealState(withNan.data(), withNan.size());
    const Bytes keep = onebit.save();
    CHECK(onebit.load(withNan) == dctInvalidArgument);
    CHECK(std::string(dctGetLastError(w.comm)).find("server error holds NaN") != std::string::npos);
    CHECK(onebit.save() == keep);
  }
  CHECK(allTrue(ok));
  // The steps after are those of a compressor that never saw a bad string.
  bool same = true;
  for (int t = 50; t < 54; t++) same = same && target.step(t) == twin.step(t) && target.heldBack() == twin.heldBack();
  CHECK(allTrue(same));
  // And the good string still loads on every rank.
  REQUIRE(target.load(mine) == dctSuccess);
  same = true;
  for (int t = 5; t < 9; t++) same = same && target.step(t) == a.step(t);
  CHECK(allTrue(same));
}
