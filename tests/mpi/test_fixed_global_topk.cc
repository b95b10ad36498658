// Global top-k in the fixed-capacity mode (algorithm globaltopk,
// capacityFactor c) under mpirun: every rank holds the same bits; nothing is
// lost when a piece or an owner's slot overflows (delivered + worker
// residuals + owner residuals = all gradients, exactly on grid values); with
// room to spare and owners that deliver every nonzero, results, residuals
// and counts equal the variable-size global top-k's; the mode is agreed; a
// failed step commits nothing and its retry is exact; a saved state
// continues bit for bit.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/compressor.h"
#include "kernels/stream_args.h"
#include "fixed_case.h"
#include "mpi_util.h"

using namespace dcttest;

namespace {

std::vector<double> gradient(size_t n, int rank, int step, double scale = 1.0) {
  return fixedGradient(n, rank, step, scale, true);
}

Settings fixedGlobal(double capacity, double density = 0.05) {
  Settings s;
  s.algorithm = dctAlgoGlobalTopk;
  s.method = dctThresholdSampled;
  s.interval = 3;
  s.density = density;
  s.capacity = capacity;
  return s;
}

struct Compressor : FixedCompressor {
  using FixedCompressor::FixedCompressor;
  // Entries the last step selected past a piece (worker) or the owner's slot.
  uint64_t workerOverflow() const { return c->stream.state.as<dct::StreamState>()->overflow; }
  uint64_t ownerOverflow() const { return c->stream.ownerState.as<dct::StreamState>()->overflow; }
};

template <typename T>
void identicalSteps(World& w, size_t n, bool inPlace, dctRedOp_t op) {
  Compressor c(w.comm, n, typeOf(T{}), fixedGlobal(1.25));
  for (int step = 0; step < 5; step++) {
    std::vector<T> send = as<T>(gradient(n, w.rank, step)), out(n, T(-1));
    if (inPlace) out = send;
    REQUIRE(dctSparseAllreduce(inPlace ? out.data() : send.data(), out.data(), n, typeOf(T{}), op, c.c, w.comm,
                               nullptr) == dctSuccess);
    CHECK(identicalOnAllRanks(out.data(), n * sizeof(T)));
  }
  const dctStats_t st = c.stats();
  CHECK(st.step == 5);
  CHECK(st.algorithm == dctAlgoGlobalTopk);
  const dct::StreamSetup& ss = c.c->stream;
  const uint64_t P = static_cast<uint64_t>(w.size);
  CHECK(st.bytesSent == (P - 1) * ss.slotBytes + ss.ownerSlotBytes);
  CHECK(st.bytesReceived == (P - 1) * (ss.slotBytes + ss.ownerSlotBytes));
  CHECK(st.totalBytesSent == 5 * st.bytesSent);
  CHECK(st.ownerKept <= ss.ownerCapacity);
  dctResult_t async = dctInternalError;
  REQUIRE(dctCommGetAsyncError(w.comm, &async) == dctSuccess);
  CHECK(async == dctSuccess);
}

}  // namespace

TEST_CASE("every rank holds the same bits: fp32 and fp64, in place or not, sum and average, count < P") {
  World w;
  for (size_t n : {size_t(1), size_t(3), size_t(7), size_t(1001), size_t(100003)})
    for (bool inPlace : {false, true})
      for (dctRedOp_t op : {dctSum, dctAvg}) {
        CAPTURE(n);
        CAPTURE(inPlace);
        CAPTURE(op);
        identicalSteps<float>(w, n, inPlace, op);
        identicalSteps<double>(w, n, inPlace, op);
      }
}

TEST_CASE("half tensors: identical on every rank") {
  World w;
  const size_t n = 3001;
  for (dctDataType_t type : {dctFloat16, dctBFloat16}) {
    CAPTURE(type);
    Compressor c(w.comm, n, type, fixedGlobal(2));
    static const uint16_t half[5] = {0x0000, 0x3c00, 0x4000, 0x4200, 0x4400};  // 0..4 in binary16
    static const uint16_t bf16[5] = {0x0000, 0x3f80, 0x4000, 0x4040, 0x4080};  // 0..4 in bfloat16
    std::vector<uint16_t> send(n), out(n);
    for (size_t i = 0; i < n; i++) {
      const size_t v = (i * 7 + static_cast<size_t>(w.rank)) % 5;
      send[i] = type == dctFloat16 ? half[v] : bf16[v];
    }
    for (int step = 0; step < 3; step++) {
      REQUIRE(dctSparseAllreduce(send.data(), out.data(), n, type, dctSum, c.c, w.comm, nullptr) == dctSuccess);
      CHECK(identicalOnAllRanks(out.data(), n * 2));
    }
  }
}

TEST_CASE("pieces and owner slots overflow: delivered + worker and owner residuals = all gradients, exactly") {
  // Every rank sends (the empty rank 1 too, from step 1); tau (worker and
  // owner) is estimated at step 0 and after a drift only, so the 1000x
  // gradients of steps 2 and 5 meet stale ones. A piece overflows at any
  // rank count; an owner's slot (4 c k / P + slack) only where the pieces'
  // entries can outnumber it: at 1-3 ranks the owner's aim exceeds all that
  // P pieces can bring (it delivers all of it); at 4 only nearly disjoint
  // full pieces would; checked from 5.
  World w;
  for (size_t n : {size_t(5003), size_t(3)}) {
    CAPTURE(n);
    Settings s = fixedGlobal(1);
    s.interval = 1000;
    Compressor c(w.comm, n, dctFloat64, s);
    std::vector<double> gradSum(n, 0.0), delivered(n, 0.0);
    bool pieceFull = false, ownerFull = false;
    for (int step = 0; step < 8; step++) {
      const double scale = step == 2 || step == 5 ? 1000.0 : 1.0;
      const std::vector<double> g = gradient(n, w.rank == 1 && step > 0 ? w.size : w.rank, step, scale);
      std::vector<double> out(n);
      REQUIRE(dctSparseAllreduce(g.data(), out.data(), n, dctFloat64, dctSum, c.c, w.comm, nullptr) == dctSuccess);
      std::vector<double> all(n);
      MPI_Allreduce(g.data(), all.data(), static_cast<int>(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      for (size_t i = 0; i < n; i++) {
        gradSum[i] += all[i];
        delivered[i] += out[i];
      }
      const dctStats_t st = c.stats();
      CHECK(st.ownerKept <= c.c->stream.ownerCapacity);
      pieceFull = pieceFull || c.workerOverflow() > 0;
      ownerFull = ownerFull || c.ownerOverflow() > 0;
    }
    if (n > 1000) {
      CHECK(!allTrue(!pieceFull));  // some rank kept a piece's overflow in its worker residual
      if (w.size >= 5) CHECK(!allTrue(!ownerFull));  // some owner kept its slot's overflow in its owner residual
    }
    const std::vector<double> residual = c.residual<double>(n);
    std::vector<double> sum(n);
    MPI_Allreduce(residual.data(), sum.data(), static_cast<int>(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    size_t off = 0;
    for (size_t i = 0; i < n; i++) off += delivered[i] + sum[i] != gradSum[i];
    CHECK(off == 0);
    CHECK(identicalOnAllRanks(delivered.data(), n * sizeof(double)));
  }
}

TEST_CASE("with room to spare and owners delivering every nonzero it equals the variable global top-k") {
  // density 0.25: the owners' share (4 x density) is the whole range, so
  // both plans deliver every nonzero of every range's sum; an estimate every
  // step keeps the workers' selections alike (no drift logic on either).
  ScopedEnv pairwise("DCT_SPLIT_EXCHANGE", 1);  // the variable plan sums in rank order, as the pieces are
  World w;
  const size_t n = 20011;
  Settings variable = fixedGlobal(0, 0.25);
  variable.interval = 1;
  Settings fixed = variable;
  fixed.capacity = 4;
  for (dctRedOp_t op : {dctSum, dctAvg}) {
    CAPTURE(op);
    Compressor a(w.comm, n, dctFloat32, variable), b(w.comm, n, dctFloat32, fixed);
    for (int step = 0; step < 6; step++) {
      std::vector<double> d = gradient(n, w.rank, step);
      for (double& x : d) x *= 1.0 + 1e-3 * static_cast<double>(step);  // off the grid: sums round
      const std::vector<float> g = as<float>(d);
      std::vector<float> outA(n), outB(n);
      REQUIRE(dctSparseAllreduce(g.data(), outA.data(), n, dctFloat32, op, a.c, w.comm, nullptr) == dctSuccess);
      REQUIRE(dctSparseAllreduce(g.data(), outB.data(), n, dctFloat32, op, b.c, w.comm, nullptr) == dctSuccess);
      CHECK(std::memcmp(outA.data(), outB.data(), n * sizeof(float)) == 0);
      const dctStats_t sa = a.stats(), sb = b.stats();
      CHECK(sa.nnz == sb.nnz);
      CHECK(sa.threshold == sb.threshold);
      CHECK(sa.ownerKept == sb.ownerKept);
      CHECK(b.workerOverflow() == 0);
      CHECK(b.ownerOverflow() == 0);
    }
    CHECK(a.residual<float>(n) == b.residual<float>(n));
  }
}

TEST_CASE("the mode is agreed: a rank whose capacity or algorithm differs fails every rank") {
  World w;
  if (w.size < 2) return;
  const size_t n = 1001;
  Settings allgather = fixedGlobal(2);
  allgather.algorithm = dctAlgoAllgather;
  const Settings others[] = {fixedGlobal(0), fixedGlobal(3), allgather};
  for (const Settings& other : others) {
    CAPTURE(other.capacity);
    CAPTURE(other.algorithm);
    Compressor c(w.comm, n, dctFloat32, w.rank == w.size - 1 ? other : fixedGlobal(2));
    std::vector<float> g = as<float>(gradient(n, w.rank, 0)), out(n);
    const dctResult_t res = dctSparseAllreduce(g.data(), out.data(), n, dctFloat32, dctSum, c.c, w.comm, nullptr);
    CHECK(res == dctInvalidUsage);
    CHECK(allTrue(res == dctInvalidUsage));
    const std::string why = dctGetLastError(w.comm);
    CHECK((why.find("capacityFactor") != std::string::npos || why.find("algorithm") != std::string::npos));
    CHECK(c.stats().step == 0);
  }
}

TEST_CASE("after the first step, a call that differs or fails on one rank fails every rank; a retry is exact") {
  World w;
  failedStepRetriesExactly(w, fixedGlobal(1.25), true, 4, [](const FixedCompressor& a, const FixedCompressor& b) {
    CHECK(a.stats().ownerThreshold == b.stats().ownerThreshold);
    CHECK(a.stats().ownerResidualMass == b.stats().ownerResidualMass);
  });
}

TEST_CASE("a saved state (owner residual and schedule included) continues bit for bit in a fresh compressor") {
  World w;
  Settings s = fixedGlobal(1.25);
  s.interval = 4;
  savedStateContinues(w, s, true, 4, 6, [](int k) { return k == 3 ? 50.0 : 1.0; },
                      [](const FixedCompressor& a, const FixedCompressor& b) {
                        CHECK(a.stats().ownerThreshold == b.stats().ownerThreshold);
                        CHECK(a.c->owner.driftPending == b.c->owner.driftPending);
                      });
}
