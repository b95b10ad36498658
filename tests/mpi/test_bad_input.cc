// Bad input gets a clear error on every rank, nobody hangs, nothing is lost.
#include <cmath>
#include <string>

#include "mpi_util.h"

using namespace dcttest;

namespace {

bool hasMessage(dctComm_t comm) { return std::strlen(dctGetLastError(comm)) > 0; }

struct Fixture : World {
  static constexpr size_t n = 1001;
  dctCompressor_t c = nullptr;
  std::vector<float> in = std::vector<float>(n, 1.0f), out = std::vector<float>(n, 0.0f);
  Fixture() {
    for (size_t i = 0; i < n; i++) in[i] = static_cast<float>(i % 13) - 6.0f;
    REQUIRE(dctCompressorCreate(comm, n, dctFloat32, nullptr, &c) == dctSuccess);
  }
  ~Fixture() { dctCompressorDestroy(c); }
  dctResult_t call(const void* s, void* r, size_t count, dctDataType_t t, dctRedOp_t op) {
    return dctSparseAllreduce(s, r, count, t, op, c, comm, nullptr);
  }
  uint64_t step() {
    dctStats_t st;
    REQUIRE(dctCompressorGetStats(c, &st) == dctSuccess);
    return st.step;
  }
};

}  // namespace

TEST_CASE("errors have names; version is reported") {
  for (int r = 0; r < dctNumResults; r++) CHECK(std::strlen(dctGetErrorString(static_cast<dctResult_t>(r))) > 0);
  CHECK(std::string(dctGetErrorString(dctNumResults)) == "unknown result code");
  int v = 0;
  CHECK(dctGetVersion(&v) == dctSuccess);
  CHECK(v == DCT_VERSION_CODE);
  CHECK(dctGetVersion(nullptr) == dctInvalidArgument);
}

TEST_CASE("null and bogus handles") {
  dctComm_t comm = nullptr;
  CHECK(dctCommInitMpi(MPI_COMM_WORLD, nullptr) == dctInvalidArgument);
  CHECK(dctCommInitMpi(MPI_COMM_NULL, &comm) == dctInvalidArgument);
  CHECK(comm == nullptr);
  int x = 0;
  CHECK(dctCommRank(nullptr, &x) == dctInvalidArgument);
  CHECK(dctCommSize(nullptr, &x) == dctInvalidArgument);
  CHECK(hasMessage(nullptr));
  float buf[4] = {};
  CHECK(dctSparseAllreduce(buf, buf, 4, dctFloat32, dctSum, nullptr, nullptr, nullptr) == dctInvalidArgument);
  dctCompressor_t c = nullptr;
  CHECK(dctCompressorCreate(nullptr, 4, dctFloat32, nullptr, &c) == dctInvalidArgument);
  CHECK(dctCompressorDestroy(nullptr) == dctSuccess);
  CHECK(dctCommDestroy(nullptr) == dctSuccess);
  dctStats_t st;
  CHECK(dctCompressorGetStats(nullptr, &st) == dctInvalidArgument);
}

TEST_CASE("compressor creation rejects bad types and configs") {
  World w;
  dctCompressor_t c = nullptr;
  CHECK(dctCompressorCreate(w.comm, 10, static_cast<dctDataType_t>(42), nullptr, &c) == dctInvalidArgument);
  CHECK(dctCompressorCreate(w.comm, 10, static_cast<dctDataType_t>(-1), nullptr, &c) == dctInvalidArgument);
  for (dctDataType_t half : {dctFloat16, dctBFloat16}) {  // supported since 0.3
    REQUIRE(dctCompressorCreate(w.comm, 10, half, nullptr, &c) == dctSuccess);
    CHECK(dctCompressorDestroy(c) == dctSuccess);
  }
  for (int wire : {-2, 4, 99}) {
    dctConfig_t cfg = DCT_CONFIG_INITIALIZER;
    cfg.wireType = wire;
    CHECK(dctCompressorCreate(w.comm, 10, dctFloat32, &cfg, &c) == dctInvalidArgument);
    CHECK(hasMessage(w.comm));
  }
  CHECK(dctCompressorCreate(w.comm, 10, dctFloat32, nullptr, nullptr) == dctInvalidArgument);
  for (double d : {0.0, -1.0, 1.0000001, 2.0, static_cast<double>(NAN), static_cast<double>(INFINITY)}) {
    dctConfig_t cfg = DCT_CONFIG_INITIALIZER;
    cfg.density = d;
    CAPTURE(d);
    CHECK(dctCompressorCreate(w.comm, 10, dctFloat32, &cfg, &c) == dctInvalidArgument);
    CHECK(hasMessage(w.comm));
  }
  dctConfig_t garbage;
  std::memset(&garbage, 0x5a, sizeof(garbage));
  CHECK(dctCompressorCreate(w.comm, 10, dctFloat32, &garbage, &c) == dctInvalidArgument);
  dctConfig_t cfg = DCT_CONFIG_INITIALIZER;
  cfg.algorithm = 17;
  CHECK(dctCompressorCreate(w.comm, 10, dctFloat32, &cfg, &c) == dctInvalidArgument);
  CHECK(c == nullptr);
}

TEST_CASE("bad allreduce arguments on every rank") {
  Fixture f;
  CHECK(f.call(nullptr, f.out.data(), f.n, dctFloat32, dctSum) == dctInvalidArgument);
  CHECK(f.call(f.in.data(), nullptr, f.n, dctFloat32, dctSum) == dctInvalidArgument);
  CHECK(f.call(f.in.data(), f.out.data(), f.n, static_cast<dctDataType_t>(-1), dctSum) == dctInvalidArgument);
  CHECK(f.call(f.in.data(), f.out.data(), f.n, dctFloat32, static_cast<dctRedOp_t>(7)) == dctInvalidArgument);
  CHECK(f.call(f.in.data(), f.out.data(), f.n, dctFloat64, dctSum) == dctInvalidArgument);
  CHECK(f.call(f.in.data(), f.out.data(), f.n - 1, dctFloat32, dctSum) == dctInvalidArgument);
  // Misaligned by one byte.
  auto* odd = reinterpret_cast<float*>(reinterpret_cast<char*>(f.out.data()) + 1);
  CHECK(f.call(f.in.data(), odd, 10, dctFloat32, dctSum) == dctInvalidArgument);
  CHECK(hasMessage(f.comm));
  CHECK(f.step() == 0);  // nothing ran, no state touched
  for (float x : f.out) REQUIRE(x == 0.0f);
}

TEST_CASE("count 0 is a no-op success") {
  Fixture f;
  CHECK(f.call(nullptr, nullptr, 0, dctFloat32, dctSum) == dctSuccess);
  CHECK(dctSparseAllreduce(nullptr, nullptr, 0, dctFloat32, dctSum, nullptr, f.comm, nullptr) == dctSuccess);
  CHECK(f.step() == 0);
}

TEST_CASE("a bad argument on one rank fails every rank without a hang") {
  Fixture f;
  const int bad = f.size - 1;
  const void* send = f.rank == bad ? nullptr : f.in.data();
  dctResult_t res = f.call(send, f.out.data(), f.n, dctFloat32, dctSum);
  CHECK(res == (f.rank == bad ? dctInvalidArgument : dctInvalidUsage));
  CHECK(hasMessage(f.comm));
  CHECK(f.step() == 0);
  // And the next good call works on every rank.
  CHECK(f.call(f.in.data(), f.out.data(), f.n, dctFloat32, dctSum) == dctSuccess);
  CHECK(f.step() == 1);
}

// Whatever the others planned (allgather, dense, split, auto, pipelined), a
// rank that rejected its arguments is matched.
TEST_CASE("a bad argument on one rank, against every algorithm's agreement, fails every rank") {
  const size_t n = 100003;
  for (long long chunk : {0, 997}) {
    const ScopedEnv chunking("DCT_CHUNK_ELEMENTS", chunk);
    World w;  // reads DCT_CHUNK_ELEMENTS
    for (dctAlgorithm_t algo : {dctAlgoAllgather, dctAlgoDense, dctAlgoSplit, dctAlgoAuto}) {
      CAPTURE(algo);
      CAPTURE(chunk);
      Settings s;
      s.algorithm = algo;
      const dctConfig_t cfg = explicitConfig(s);
      dctCompressor_t c = nullptr;
      REQUIRE(dctCompressorCreate(w.comm, n, dctFloat32, &cfg, &c) == dctSuccess);
      std::vector<float> in(n), out(n);
      for (size_t i = 0; i < n; i++) in[i] = static_cast<float>((i * 7919) % 1009) - 504.0f;
      for (int step = 0; step < 3; step++) {  // the second and third may run pipelined
        const bool bad = step > 0 && w.rank == w.size - 1;
        const dctResult_t res = dctSparseAllreduce(in.data(), bad ? nullptr : out.data(), n, dctFloat32, dctSum, c,
                                                   w.comm, nullptr);
        if (step == 0) REQUIRE(res == dctSuccess);
        else CHECK(res == (bad ? dctInvalidArgument : dctInvalidUsage));
      }
      dctCompressorDestroy(c);
    }
  }
}

TEST_CASE("mismatched counts across ranks: every rank returns dctInvalidUsage") {
  World w;
  size_t n = 100 + w.rank;  // differs on every rank
  dctCompressor_t c = nullptr;
  REQUIRE(dctCompressorCreate(w.comm, n, dctFloat32, nullptr, &c) == dctSuccess);
  std::vector<float> in(n, 1.0f), out(n, 0.0f);
  dctResult_t res = dctSparseAllreduce(in.data(), out.data(), n, dctFloat32, dctSum, c, w.comm, nullptr);
  CHECK(res == (w.size == 1 ? dctSuccess : dctInvalidUsage));
  if (w.size > 1) CHECK(hasMessage(w.comm));
  // Mismatched ops too.
  dctRedOp_t op = w.rank == 0 ? dctSum : dctAvg;
  if (w.size > 1) {
    dctCompressor_t same = nullptr;
    REQUIRE(dctCompressorCreate(w.comm, 50, dctFloat32, nullptr, &same) == dctSuccess);
    CHECK(dctSparseAllreduce(in.data(), out.data(), 50, dctFloat32, op, same, w.comm, nullptr) == dctInvalidUsage);
    dctCompressorDestroy(same);
  }
  dctCompressorDestroy(c);
}

TEST_CASE("local calls reject bad input before writing") {
  World w;
  dctCompressor_t c = nullptr;
  REQUIRE(dctCompressorCreate(w.comm, 16, dctFloat32, nullptr, &c) == dctSuccess);
  float g[16] = {1}, vals[16];
  uint32_t idx[16];
  size_t nnz = 0;
  CHECK(dctCompress(c, g, idx, vals, 16, nullptr, nullptr) == dctInvalidArgument);
  CHECK(dctCompress(c, nullptr, idx, vals, 16, &nnz, nullptr) == dctInvalidArgument);
  CHECK(dctCompress(nullptr, g, idx, vals, 16, &nnz, nullptr) == dctInvalidArgument);
  CHECK(dctCompress(c, g, nullptr, vals, 16, &nnz, nullptr) == dctInvalidArgument);
  dctCompressorDestroy(c);
  float dense[8] = {};
  uint32_t bad[2] = {1, 8};
  float v[2] = {5, 6};
  CHECK(dctScatterAdd(dense, 8, bad, v, 2, dctFloat32, nullptr) == dctInvalidArgument);
  for (float x : dense) CHECK(x == 0.0f);
  bad[1] = 7;
  CHECK(dctScatterAdd(dense, 8, bad, v, 2, dctFloat32, nullptr) == dctSuccess);
  CHECK(dense[1] == 5.0f);
  CHECK(dense[7] == 6.0f);
}

// Sizes whose bytes pass SIZE_MAX (hashed 64-bit ids, rows x rowLength):
// refused with a message, on every rank for the collective calls, before
// anything is allocated or written.
TEST_CASE("sizes past the address space are refused, never wrapped") {
  World w;
  const size_t huge = size_t{1} << 62;  // x 4 bytes wraps to 0
  dctCompressor_t c = nullptr;
  CHECK(dctCompressorCreate(w.comm, huge, dctFloat32, nullptr, &c) == dctInvalidArgument);
  CHECK(c == nullptr);
  CHECK(hasMessage(w.comm));
  float dense[4] = {};
  uint32_t idx[1] = {1};
  float v[1] = {2};
  CHECK(dctScatterAdd(dense, huge, idx, v, 1, dctFloat32, nullptr) == dctInvalidArgument);
  CHECK(dense[1] == 0.0f);
  // 2^33 rows of 2^29 elements of 8 bytes: 2^65 bytes, on one rank or all.
  for (int liar : {0, -1}) {
    CAPTURE(liar);
    std::vector<size_t> rows(w.size, 1);
    if (liar < 0 || w.rank == liar) rows[0] = size_t{1} << 33;
    dctAlltoallPlan_t plan = nullptr;
    const dctResult_t a = dctAlltoallPlanCreate(w.comm, rows.data(), rows.data(), size_t{1} << 29, dctFloat64,
                                                nullptr, &plan);
    CHECK(a != dctSuccess);
    CHECK(plan == nullptr);
    dctDesPlan_t des = nullptr;
    CHECK(dctDesPlanCreate(w.comm, rows.data(), size_t{1} << 29, dctFloat64, nullptr, &des) != dctSuccess);
    CHECK(des == nullptr);
    CHECK(hasMessage(w.comm));
  }
}
