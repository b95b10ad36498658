// dctSparseAlltoall / dctSparseAlltoallBackward under mpirun against plain
// references: every rank rebuilds what each peer sent it (seeded per pair)
// and checks the forward against the sort-based per-row top-K (or threshold)
// mask, and the backward against the gradient restricted to its own masks.
// Uneven and empty splits, ties, NaN/Inf rows, fp32/fp64, values on a
// narrower wire (config.wireType), lossless K >= D (bit-identical to
// MPI_Alltoallv, of the rounded rows on an fp16 wire), bad input on every
// rank.
#include <cmath>
#include <limits>
#include <random>
#include <type_traits>

#include "../common/row_reference.h"
#include "../common/half_reference.h"
#include "../common/wire_reference.h"
#include "mpi_util.h"

using namespace dcttest;
using dct::test::maskedRow;
using dct::test::referenceThreshold;
using dct::test::referenceTopK;

namespace {

// Rows rank p sends to rank q: uneven, with zeros (and none at all to or
// from rank 1 when `emptyRank`).
size_t splitRows(int p, int q, bool emptyRank) {
  if (emptyRank && (p == 1 || q == 1)) return 0;
  return static_cast<size_t>((p * 3 + q * 5 + 1) % 4) * 2 + (p == q);
}

// The block p sends to q, rebuilt identically anywhere: normals with ties,
// and NaN/Inf-heavy rows now and then.
template <typename T>
std::vector<T> blockData(int p, int q, size_t rows, size_t d, uint64_t seed) {
  std::mt19937_64 rng(seed * 1000003 + p * 101 + q);
  std::normal_distribution<double> normal;
  std::vector<T> v(rows * d);
  for (size_t i = 0; i < v.size(); i++) {
    const unsigned pick = rng() % 100;
    v[i] = pick < 20 ? T(pick % 2 ? 1.5 : -1.5) : static_cast<T>(normal(rng));
    if ((i / d) % 7 == 3 && pick < 40) v[i] = pick % 2 ? std::numeric_limits<T>::quiet_NaN()
                                                       : std::numeric_limits<T>::infinity();
  }
  return v;
}

struct Split {
  std::vector<size_t> send, recv, sendStart, recvStart;
  Split(int me, int P, bool emptyRank) : send(P), recv(P), sendStart(P + 1), recvStart(P + 1) {
    for (int q = 0; q < P; q++) {
      send[q] = splitRows(me, q, emptyRank);
      recv[q] = splitRows(q, me, emptyRank);
      sendStart[q + 1] = sendStart[q] + send[q];
      recvStart[q + 1] = recvStart[q] + recv[q];
    }
  }
};

dctConfig_t rowConfig(double density, dctRowSelection_t selection) {
  dctConfig_t cfg = explicitConfig(Settings{});
  cfg.density = density;
  cfg.rowSelection = selection;
  cfg.thresholdInterval = 1;
  return cfg;
}

template <typename T>
std::vector<bool> keepOf(const T* row, size_t d, size_t k, dctRowSelection_t sel, double tau) {
  return sel == dctRowTopK || k >= d ? referenceTopK(row, d, k) : referenceThreshold(row, d, tau);
}

// Half rows (`half` = fp16/bf16, T = float): the data is made exact in the
// half type, travels as 16-bit elements, and is checked widened to float,
// where the float references rank it exactly as the half keys do.
std::vector<float> roundedTo(dctDataType_t half, std::vector<float> v) {
  for (float& x : v) x = half == dctFloat16 ? refHalfToFloat(refFloatToHalf(x)) : refBf16ToFloat(refFloatToBf16(x));
  return v;
}
std::vector<uint16_t> toHalf(dctDataType_t half, const std::vector<float>& v) {
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); i++) h[i] = half == dctFloat16 ? refFloatToHalf(v[i]) : refFloatToBf16(v[i]);
  return h;
}
std::vector<float> fromHalf(dctDataType_t half, const std::vector<uint16_t>& h) {
  std::vector<float> v(h.size());
  for (size_t i = 0; i < h.size(); i++) v[i] = half == dctFloat16 ? refHalfToFloat(h[i]) : refBf16ToFloat(h[i]);
  return v;
}

// v as it arrives through `wire` (dctNumTypes: the rows' own type).
template <typename T>
std::vector<T> throughWire(dctDataType_t wire, std::vector<T> v) {
  for (T& x : v) x = dcttest::throughWire(x, wire);
  return v;
}

template <typename T>
void checkRoundTrip(size_t d, double density, dctRowSelection_t sel, bool emptyRank, uint64_t seed,
                    dctDataType_t half = dctFloat32, dctDataType_t wire = dctNumTypes) {
  CAPTURE(d);
  CAPTURE(density);
  CAPTURE(sel);
  CAPTURE(emptyRank);
  CAPTURE(half);
  CAPTURE(wire);
  World w;
  const bool halves = half != dctFloat32;
  auto dataOf = [&](int p, int q, size_t rows, size_t len, uint64_t sd) {
    auto v = blockData<T>(p, q, rows, len, sd);
    if constexpr (std::is_same_v<T, float>)
      if (halves) v = roundedTo(half, v);
    return v;
  };
  // The library's call with T rows, or with their half form.
  auto call = [&](auto fn, std::vector<T>& in, std::vector<T>& out) {
    if constexpr (std::is_same_v<T, float>) {
      if (halves) {
        auto hin = toHalf(half, in);
        std::vector<uint16_t> hout(out.size(), 0x5140);
        const dctResult_t res = fn(hin.empty() ? nullptr : hin.data(), hout.empty() ? nullptr : hout.data());
        out = fromHalf(half, hout);
        return res;
      }
    }
    return fn(in.empty() ? nullptr : static_cast<void*>(in.data()), out.empty() ? nullptr : static_cast<void*>(out.data()));
  };
  const dctDataType_t dt = halves ? half : (sizeof(T) == 8 ? dctFloat64 : dctFloat32);
  const Split s(w.rank, w.size, emptyRank);
  const size_t k = std::min(d, std::max<size_t>(1, static_cast<size_t>(std::ceil(density * d - 1e-9))));
  dctConfig_t cfg = rowConfig(density, sel);
  if (wire != dctNumTypes) cfg.wireType = wire;
  dctAlltoallPlan_t plan = nullptr;
  REQUIRE(dctAlltoallPlanCreate(w.comm, s.send.data(), s.recv.data(), d, dt, &cfg, &plan) == dctSuccess);

  std::vector<T> send(s.sendStart[w.size] * d), recv(s.recvStart[w.size] * d, T(42));
  for (int q = 0; q < w.size; q++) {
    auto block = dataOf(w.rank, q, s.send[q], d, seed);
    std::copy(block.begin(), block.end(), send.begin() + s.sendStart[q] * d);
  }
  REQUIRE(call([&](void* in, void* out) { return dctSparseAlltoall(plan, in, out, nullptr); }, send, recv) ==
          dctSuccess);
  dctAlltoallStats_t st;
  REQUIRE(dctAlltoallPlanGetStats(plan, &st) == dctSuccess);
  std::vector<double> taus(w.size);
  MPI_Allgather(&st.threshold, 1, MPI_DOUBLE, taus.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD);

  // Forward: each received row is the sender's row under the reference mask.
  for (int q = 0; q < w.size; q++) {
    auto block = dataOf(q, w.rank, s.recv[q], d, seed);
    for (size_t r = 0; r < s.recv[q]; r++) {
      const auto want = throughWire(wire, maskedRow(&block[r * d], keepOf(&block[r * d], d, k, sel, taus[q])));
      const T* got = &recv[(s.recvStart[q] + r) * d];
      for (size_t j = 0; j < d; j++) REQUIRE(std::memcmp(&got[j], &want[j], sizeof(T)) == 0);
    }
  }
  // Backward: the gradient of received rows, back on the sender's mask only.
  std::vector<T> grad(recv.size()), gradBack(send.size(), T(42));
  for (int q = 0; q < w.size; q++) {
    auto g = dataOf(w.rank, q, s.recv[q], d, seed + 1);  // gradient rank me holds for q's rows
    std::copy(g.begin(), g.end(), grad.begin() + s.recvStart[q] * d);
  }
  REQUIRE(call([&](void* in, void* out) { return dctSparseAlltoallBackward(plan, in, out, nullptr); }, grad,
               gradBack) == dctSuccess);
  for (int q = 0; q < w.size; q++) {
    auto g = dataOf(q, w.rank, s.send[q], d, seed + 1);
    for (size_t r = 0; r < s.send[q]; r++) {
      const T* row = &send[(s.sendStart[q] + r) * d];
      const auto want = throughWire(wire, maskedRow(&g[r * d], keepOf(row, d, k, sel, taus[w.rank])));
      const T* got = &gradBack[(s.sendStart[q] + r) * d];
      for (size_t j = 0; j < d; j++) REQUIRE(std::memcmp(&got[j], &want[j], sizeof(T)) == 0);
    }
  }
  REQUIRE(dctAlltoallPlanGetStats(plan, &st) == dctSuccess);
  CHECK(st.forwardSteps == 1);
  CHECK(st.backwardSteps == 1);
  if (k < d && sel == dctRowTopK && st.denseBytesSent > 0) CHECK(st.forwardBytesSent < st.denseBytesSent);
  CHECK(dctAlltoallPlanDestroy(plan) == dctSuccess);
}

}  // namespace

TEST_CASE("forward and backward match the masked references") {
  uint64_t seed = 1;
  for (size_t d : {1, 3, 7, 64, 129, 1000})
    for (bool emptyRank : {false, true}) {
      checkRoundTrip<float>(d, 0.05, dctRowTopK, emptyRank, seed++);
      checkRoundTrip<double>(d, 0.3, dctRowTopK, emptyRank, seed++);
      checkRoundTrip<float>(d, 0.1, dctRowThreshold, emptyRank, seed++);
    }
}

TEST_CASE("fp16 and bf16 rows: forward and backward match the masked references") {
  uint64_t seed = 100;
  for (size_t d : {1, 7, 64, 129})
    for (dctDataType_t half : {dctFloat16, dctBFloat16}) {
      checkRoundTrip<float>(d, 0.05, dctRowTopK, d == 7, seed++, half);
      checkRoundTrip<float>(d, 0.1, dctRowThreshold, d == 64, seed++, half);
    }
}

TEST_CASE("values on a narrower wire: the masks of the rows as given, each value rounded once") {
  uint64_t seed = 200;
  for (size_t d : {1, 7, 64, 129})
    for (dctDataType_t wire : {dctFloat16, dctBFloat16}) {
      checkRoundTrip<float>(d, 0.05, dctRowTopK, d == 7, seed++, dctFloat32, wire);
      checkRoundTrip<float>(d, 0.1, dctRowThreshold, d == 64, seed++, dctFloat32, wire);
      checkRoundTrip<double>(d, 0.3, dctRowTopK, d == 1, seed++, dctFloat32, wire);
    }
  checkRoundTrip<double>(64, 0.05, dctRowTopK, true, seed++, dctFloat32, dctFloat32);
  checkRoundTrip<float>(64, 0.05, dctRowTopK, false, seed++, dctFloat32, dctFloat32);  // the rows' own type
}

// K >= rowLength, forward and backward: MPI_Alltoallv of the rows as they
// leave the wire (`wire` rounding, none for the rows' own type), bit for bit.
void checkLossless(dctDataType_t wire) {
  CAPTURE(wire);
  World w;
  const size_t d = 36;  // whole rows of an even count: 8-byte aligned blocks in both types
  const Split s(w.rank, w.size, false);
  dctConfig_t cfg = rowConfig(1.0, dctRowTopK);
  cfg.wireType = wire;
  dctAlltoallPlan_t plan = nullptr;
  REQUIRE(dctAlltoallPlanCreate(w.comm, s.send.data(), s.recv.data(), d, dctFloat32, &cfg, &plan) == dctSuccess);
  std::vector<float> send(s.sendStart[w.size] * d), recv(s.recvStart[w.size] * d), grad(recv.size());
  for (int q = 0; q < w.size; q++) {
    auto block = blockData<float>(w.rank, q, s.send[q], d, 99);
    std::copy(block.begin(), block.end(), send.begin() + s.sendStart[q] * d);
    auto g = blockData<float>(w.rank, q, s.recv[q], d, 98);
    std::copy(g.begin(), g.end(), grad.begin() + s.recvStart[q] * d);
  }
  std::vector<int> sc(w.size), sd(w.size), rc(w.size), rd(w.size);
  for (int q = 0; q < w.size; q++) {
    sc[q] = static_cast<int>(s.send[q] * d);
    sd[q] = static_cast<int>(s.sendStart[q] * d);
    rc[q] = static_cast<int>(s.recv[q] * d);
    rd[q] = static_cast<int>(s.recvStart[q] * d);
  }
  const auto wireSend = throughWire(wire, send), wireGrad = throughWire(wire, grad);
  std::vector<float> dense(recv.size()), denseBack(send.size()), back(send.size());
  MPI_Alltoallv(wireSend.data(), sc.data(), sd.data(), MPI_FLOAT, dense.data(), rc.data(), rd.data(), MPI_FLOAT,
                MPI_COMM_WORLD);
  MPI_Alltoallv(wireGrad.data(), rc.data(), rd.data(), MPI_FLOAT, denseBack.data(), sc.data(), sd.data(), MPI_FLOAT,
                MPI_COMM_WORLD);
  REQUIRE(dctSparseAlltoall(plan, send.data(), recv.data(), nullptr) == dctSuccess);
  REQUIRE(std::memcmp(recv.data(), dense.data(), recv.size() * sizeof(float)) == 0);
  REQUIRE(dctSparseAlltoallBackward(plan, grad.data(), back.data(), nullptr) == dctSuccess);
  REQUIRE(std::memcmp(back.data(), denseBack.data(), back.size() * sizeof(float)) == 0);
  dctAlltoallStats_t st;
  REQUIRE(dctAlltoallPlanGetStats(plan, &st) == dctSuccess);
  CHECK(st.maskFormat == -1);
  // Plain rows: no mask, no counts, values in the wire type.
  const uint64_t wireBytes = wire == dctFloat32 ? 4 : 2;
  CHECK(st.forwardBytesSent * 4 == st.denseBytesSent * wireBytes);
  CHECK(st.backwardBytesSent * 4 == st.denseBytesReceived * wireBytes);
  dctAlltoallPlanDestroy(plan);
}

TEST_CASE("K >= rowLength is lossless: bit-identical to MPI_Alltoallv (of the rounded rows on a half wire)") {
  for (dctDataType_t wire : {dctFloat32, dctFloat16, dctBFloat16}) checkLossless(wire);
}

TEST_CASE("bad input fails on every rank and loses nothing") {
  World w;
  const size_t d = 16;
  const Split s(w.rank, w.size, false);
  dctConfig_t cfg = rowConfig(0.25, dctRowTopK);
  dctAlltoallPlan_t plan = nullptr;
  CHECK(dctSparseAlltoall(nullptr, nullptr, nullptr, nullptr) == dctInvalidArgument);
  CHECK(dctAlltoallPlanCreate(w.comm, s.send.data(), s.recv.data(), d, dctFloat32, nullptr, nullptr) ==
        dctInvalidArgument);

  // Shapes that disagree across ranks.
  const size_t myD = w.rank == 0 && w.size > 1 ? d + 1 : d;
  dctResult_t res = dctAlltoallPlanCreate(w.comm, s.send.data(), s.recv.data(), myD, dctFloat32, &cfg, &plan);
  CHECK(res == (w.size > 1 ? dctInvalidUsage : dctSuccess));
  if (res == dctSuccess) dctAlltoallPlanDestroy(plan);
  std::vector<size_t> wrong = s.send;
  if (w.rank == w.size - 1) wrong[0] += 1;
  CHECK(dctAlltoallPlanCreate(w.comm, wrong.data(), s.recv.data(), d, dctFloat32, &cfg, &plan) == dctInvalidUsage);
  dctConfig_t bad = cfg;
  bad.density = 0;
  CHECK(dctAlltoallPlanCreate(w.comm, s.send.data(), s.recv.data(), d, dctFloat32, &bad, &plan) == dctInvalidArgument);
  bad = cfg;
  bad.wireType = dctFloat64;  // wider than the rows
  CHECK(dctAlltoallPlanCreate(w.comm, s.send.data(), s.recv.data(), d, dctFloat32, &bad, &plan) == dctInvalidArgument);
  CHECK(std::string(dctGetLastError(w.comm)).find("wider") != std::string::npos);
  bad.wireType = w.rank == 0 ? dctFloat16 : dctBFloat16;  // differs across ranks
  res = dctAlltoallPlanCreate(w.comm, s.send.data(), s.recv.data(), d, dctFloat32, &bad, &plan);
  CHECK(res == (w.size > 1 ? dctInvalidUsage : dctSuccess));
  if (res == dctSuccess) dctAlltoallPlanDestroy(plan);
  else CHECK(std::string(dctGetLastError(w.comm)).find("wireType") != std::string::npos);

  REQUIRE(dctAlltoallPlanCreate(w.comm, s.send.data(), s.recv.data(), d, dctFloat32, &cfg, &plan) == dctSuccess);
  std::vector<float> send(s.sendStart[w.size] * d, 1.0f), recv(s.recvStart[w.size] * d), grad(recv.size(), 2.0f),
      back(send.size());
  CHECK(dctSparseAlltoallBackward(plan, grad.data(), back.data(), nullptr) == dctInvalidUsage);
  CHECK(std::string(dctGetLastError(w.comm)).find("dctSparseAlltoallBackward") != std::string::npos);
  // One rank passes a NULL sendbuf: that rank rejects it, every other fails too.
  const float* mySend = w.rank == 0 ? nullptr : send.data();
  res = dctSparseAlltoall(plan, mySend, recv.data(), nullptr);
  CHECK(res == (w.rank == 0 ? dctInvalidArgument : dctInvalidUsage));
  CHECK(dctSparseAlltoallBackward(plan, grad.data(), back.data(), nullptr) == dctInvalidUsage);
  // Plans that differ across ranks in one call.
  dctAlltoallPlan_t other = nullptr;
  REQUIRE(dctAlltoallPlanCreate(w.comm, s.send.data(), s.recv.data(), d, dctFloat32, &cfg, &other) == dctSuccess);
  res = dctSparseAlltoall(w.rank == 0 ? other : plan, send.data(), recv.data(), nullptr);
  CHECK(res == (w.size > 1 ? dctInvalidUsage : dctSuccess));
  if (w.size == 1) CHECK(dctSparseAlltoallBackward(other, grad.data(), back.data(), nullptr) == dctSuccess);
  // After all that, a forward and one backward work; a second backward does not.
  REQUIRE(dctSparseAlltoall(plan, send.data(), recv.data(), nullptr) == dctSuccess);
  CHECK(dctSparseAlltoallBackward(plan, grad.data(), back.data(), nullptr) == dctSuccess);
  CHECK(dctSparseAlltoallBackward(plan, grad.data(), back.data(), nullptr) == dctInvalidUsage);
  for (float x : back) CHECK((x == 0.0f || x == 2.0f));
  dctAlltoallPlanDestroy(other);
  dctAlltoallPlanDestroy(plan);
}
