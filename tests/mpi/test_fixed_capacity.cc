// The fixed-capacity mode (config.capacityFactor) under mpirun: every rank
// holds the same bits; nothing is lost when the selection overflows the
// slots; with room to spare it selects and sums exactly what the allgather
// plan does; the mode and the call are agreed (a rank that differs fails
// every rank, nothing changed, a retry exact); and the stats count slots.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "fixed_case.h"
#include "mpi_util.h"

using namespace dcttest;

namespace {

using Compressor = FixedCompressor;

std::vector<double> gradient(size_t n, int rank, int step, double scale = 1.0) {
  return fixedGradient(n, rank, step, scale);
}

// Entries per slot: ceil(c * k), k = round(density * n).
uint64_t slotEntries(double c, double density, size_t n) {
  return static_cast<uint64_t>(std::ceil(c * std::round(density * static_cast<double>(n))));
}

Settings fixedSettings(double capacity) {
  Settings s;
  s.method = dctThresholdSampled;
  s.interval = 3;
  s.density = 0.05;
  s.capacity = capacity;
  return s;
}

// Steps of T tensors, in place or not: every rank's result identical.
template <typename T>
void identicalSteps(World& w, size_t n, bool inPlace, dctRedOp_t op) {
  Compressor c(w.comm, n, typeOf(T{}), fixedSettings(2));
  for (int step = 0; step < 5; step++) {
    std::vector<T> send = as<T>(gradient(n, w.rank, step)), out(n, T(-1));
    if (inPlace) out = send;
    REQUIRE(dctSparseAllreduce(inPlace ? out.data() : send.data(), out.data(), n, typeOf(T{}), op, c.c, w.comm,
                               nullptr) == dctSuccess);
    CHECK(identicalOnAllRanks(out.data(), n * sizeof(T)));
  }
  const dctStats_t st = c.stats();
  CHECK(st.step == 5);
  CHECK(st.algorithm == dctAlgoAllgather);
  CHECK(st.bytesReceived == st.bytesSent * static_cast<uint64_t>(w.size - 1));
  CHECK(st.totalBytesSent == 5 * st.bytesSent);
  dctResult_t async = dctInternalError;
  REQUIRE(dctCommGetAsyncError(w.comm, &async) == dctSuccess);
  CHECK(async == dctSuccess);
}

}  // namespace

TEST_CASE("every rank holds the same bits, fp32 and fp64, in place or not, sum and average") {
  World w;
  for (size_t n : {size_t(1), size_t(7), size_t(1001), size_t(100003)})
    for (bool inPlace : {false, true})
      for (dctRedOp_t op : {dctSum, dctAvg}) {
        CAPTURE(n);
        CAPTURE(inPlace);
        CAPTURE(op);
        identicalSteps<float>(w, n, inPlace, op);
        identicalSteps<double>(w, n, inPlace, op);
      }
}

TEST_CASE("half tensors: identical on every rank, summed in fp32") {
  World w;
  const size_t n = 3001;
  for (dctDataType_t type : {dctFloat16, dctBFloat16}) {
    CAPTURE(type);
    Compressor c(w.comm, n, type, fixedSettings(2));
    // fp16 / bf16 bits of small integers (exact in both).
    std::vector<uint16_t> send(n, 0), out(n);
    for (size_t i = 0; i < n; i++) {
      const float v = static_cast<float>((i * 7 + static_cast<size_t>(w.rank)) % 5);
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      send[i] = type == dctBFloat16 ? static_cast<uint16_t>(bits >> 16) : 0;
    }
    if (type == dctFloat16)  // 0..4 in binary16: 0x0000, 0x3c00, 0x4000, 0x4200, 0x4400
      for (size_t i = 0; i < n; i++) {
        static const uint16_t h[5] = {0x0000, 0x3c00, 0x4000, 0x4200, 0x4400};
        send[i] = h[(i * 7 + static_cast<size_t>(w.rank)) % 5];
      }
    for (int step = 0; step < 3; step++) {
      REQUIRE(dctSparseAllreduce(send.data(), out.data(), n, type, dctSum, c.c, w.comm, nullptr) == dctSuccess);
      CHECK(identicalOnAllRanks(out.data(), n * 2));
    }
  }
}

TEST_CASE("capacity overflow: delivered + residuals = the sum of the gradients, exactly in fp64") {
  World w;
  const size_t n = 5003;
  Settings s = fixedSettings(1);
  Compressor c(w.comm, n, dctFloat64, s);
  std::vector<double> gradSum(n, 0.0), delivered(n, 0.0);
  bool full = false;
  for (int step = 0; step < 8; step++) {
    // A stale tau meets a gradient 1000x larger at step 4: the slot overflows.
    const std::vector<double> g = gradient(n, w.rank, step, step == 4 ? 1000.0 : 1.0);
    std::vector<double> out(n);
    REQUIRE(dctSparseAllreduce(g.data(), out.data(), n, dctFloat64, dctSum, c.c, w.comm, nullptr) == dctSuccess);
    std::vector<double> all(n);
    MPI_Allreduce(g.data(), all.data(), static_cast<int>(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (size_t i = 0; i < n; i++) {
      gradSum[i] += all[i];
      delivered[i] += out[i];
    }
    const dctStats_t st = c.stats();
    full = full || st.nnz == slotEntries(1, 0.05, n);
    CHECK(st.nnz <= slotEntries(1, 0.05, n));
  }
  // Some rank's slot filled up (overflow kept in its residual).
  CHECK(!allTrue(!full));
  std::vector<double> residuals = c.residual<double>(n), sum(n);
  MPI_Allreduce(residuals.data(), sum.data(), static_cast<int>(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  double worst = 0;
  for (size_t i = 0; i < n; i++)
    worst = std::max(worst, std::fabs(delivered[i] + sum[i] - gradSum[i]) / (1.0 + std::fabs(gradSum[i])));
  CHECK(worst < 1e-9);
}

TEST_CASE("with room to spare it selects and sums what the allgather plan does, bit for bit") {
  World w;
  const size_t n = 20011;
  Settings plain = fixedSettings(0);
  plain.interval = 1;  // a fresh estimate every step: no drift logic on either path
  Settings fixed = plain;
  fixed.capacity = 8;
  Compressor a(w.comm, n, dctFloat32, plain), b(w.comm, n, dctFloat32, fixed);
  for (int step = 0; step < 6; step++) {
    const std::vector<float> g = as<float>(gradient(n, w.rank, step));
    std::vector<float> outA(n), outB(n);
    REQUIRE(dctSparseAllreduce(g.data(), outA.data(), n, dctFloat32, dctAvg, a.c, w.comm, nullptr) == dctSuccess);
    REQUIRE(dctSparseAllreduce(g.data(), outB.data(), n, dctFloat32, dctAvg, b.c, w.comm, nullptr) == dctSuccess);
    CHECK(std::memcmp(outA.data(), outB.data(), n * sizeof(float)) == 0);
    CHECK(a.stats().nnz == b.stats().nnz);
    CHECK(a.stats().threshold == b.stats().threshold);
  }
  CHECK(a.residual<float>(n) == b.residual<float>(n));
}

TEST_CASE("a warm-up runs dense first, then the fixed-capacity steps") {
  World w;
  const size_t n = 1001;
  Settings s = fixedSettings(2);
  s.warmup = 2;
  Compressor c(w.comm, n, dctFloat32, s);
  for (int step = 0; step < 5; step++) {
    std::vector<float> g = as<float>(gradient(n, w.rank, step)), out(n);
    REQUIRE(dctSparseAllreduce(g.data(), out.data(), n, dctFloat32, dctSum, c.c, w.comm, nullptr) == dctSuccess);
    CHECK(identicalOnAllRanks(out.data(), n * sizeof(float)));
    const dctStats_t st = c.stats();
    CHECK(st.step == static_cast<uint64_t>(step + 1));
    if (step >= 2) CHECK(st.nnz <= slotEntries(2, 0.05, n));
  }
}

TEST_CASE("the mode is agreed: a rank whose capacity differs fails every rank") {
  World w;
  if (w.size < 2) return;
  const size_t n = 1001;
  for (double other : {0.0, 3.0}) {
    CAPTURE(other);
    Compressor c(w.comm, n, dctFloat32, fixedSettings(w.rank == w.size - 1 ? other : 2.0));
    std::vector<float> g = as<float>(gradient(n, w.rank, 0)), out(n);
    const dctResult_t res = dctSparseAllreduce(g.data(), out.data(), n, dctFloat32, dctSum, c.c, w.comm, nullptr);
    CHECK(res == dctInvalidUsage);
    CHECK(allTrue(res == dctInvalidUsage));
    CHECK(std::string(dctGetLastError(w.comm)).find("capacityFactor") != std::string::npos);
    CHECK(c.stats().step == 0);
  }
}

TEST_CASE("after the first step, a call that differs or fails on one rank fails every rank; a retry is exact") {
  World w;
  failedStepRetriesExactly(w, fixedSettings(2), false, 3, [](const Compressor& a, const Compressor& b) {
    CHECK(a.stats().threshold == b.stats().threshold);
  });
}

TEST_CASE("a saved state continues bit for bit in a fresh compressor") {
  World w;
  savedStateContinues(w, fixedSettings(2), false, 4, 4, [](int) { return 1.0; }, [](const Compressor&, const Compressor&) {});
}

TEST_CASE("settings the mode cannot serve are refused when the compressor is made") {
  World w;
  Settings exact = fixedSettings(2);
  exact.method = dctThresholdExact;
  Settings split = fixedSettings(2);
  split.algorithm = dctAlgoSplit;
  Settings small = fixedSettings(0.5);
  for (const Settings& s : {exact, split, small}) {
    dctConfig_t cfg = explicitConfig(s);
    dctCompressor_t c = nullptr;
    CHECK(dctCompressorCreate(w.comm, 100, dctFloat32, &cfg, &c) == dctInvalidArgument);
    CHECK(c == nullptr);
  }
}
