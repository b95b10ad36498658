// The lies an adversarial peer (adversary.h) once got into memory, each
// aimed at its op and field: every rank must fail, and say why, before
// anything is written; a clean call after must work. The seeded fuzz over
// every entry point is test_adversarial_peer.cc.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "adversary.h"
#include "mpi_util.h"

using namespace dcttest;
using namespace dcttest::adversary;

namespace {

// The attack on `op` of rank `victim`: the word at `offset` set to `value`.
Attack lie(int victim, long op, uint64_t offset, uint64_t value, bool wide = true) {
  Attack a;
  a.rank = victim;
  a.op = op;
  a.kind = wide ? Kind::Word64 : Kind::Word32;
  a.offset = offset;
  a.exact = true;
  a.value = value;
  return a;
}

bool lastErrorSays(dctComm_t comm, const char* words) {
  return std::strstr(dctGetLastError(comm), words) != nullptr;
}

}  // namespace

TEST_CASE("a peer announcing more DES rows than the owner has fails every rank before anything is written") {
  Adversary adv;
  const int P = adv.size, me = adv.rank;
  if (P < 2) return;
  const size_t L = 16;
  std::vector<size_t> rows(P, 4);
  dctConfig_t cfg = DCT_CONFIG_INITIALIZER;
  cfg.density = 0.25;
  cfg.rowSelection = dctRowTopK;
  dctDesPlan_t plan = nullptr;
  REQUIRE(dctDesPlanCreate(adv.comm(), rows.data(), L, dctFloat32, &cfg, &plan) == dctSuccess);
  const std::vector<float> partials = gradient(4 * P * L, 5, me, 0);
  std::vector<float> summed(4 * L), again(4 * L);
  // Op 1 is the allgather of the flagged-row counts: rank 0's count for owner 1.
  adv.arm(lie(0, 1, 8 * 1, uint64_t(1) << 20));
  const dctResult_t res = dctDesReduceScatter(plan, partials.data(), summed.data(), nullptr);
  CHECK(adv.fired() == (me == 0));
  CHECK(allTrue(res != dctSuccess));
  if (me == 1) CHECK(lastErrorSays(adv.comm(), "announced"));
  adv.arm(Attack{});
  CHECK(dctDesReduceScatter(plan, partials.data(), again.data(), nullptr) == dctSuccess);
  dctDesPlanDestroy(plan);
}

TEST_CASE("a message size no message can have is refused before the allgather plan gathers anything") {
  Adversary adv;
  const int P = adv.size, me = adv.rank;
  const size_t n = 1000;
  Settings s;
  s.density = 0.05;
  const dctConfig_t cfg = explicitConfig(s);
  dctCompressor_t c = nullptr;
  REQUIRE(dctCompressorCreate(adv.comm(), n, dctFloat32, &cfg, &c) == dctSuccess);
  for (uint64_t bytes : {uint64_t(0), uint64_t(8), uint64_t(1) << 63}) {
    CAPTURE(bytes);
    std::vector<float> g = gradient(n, 9, me, 0), out(n);
    // Op 0 is the header allgather: the last rank's message bytes (offset 24).
    adv.arm(lie(P - 1, 0, 24, bytes));
    const dctResult_t res = dctSparseAllreduce(g.data(), out.data(), n, dctFloat32, dctSum, c, adv.comm(), nullptr);
    CHECK(adv.fired() == (me == P - 1));
    CHECK(allTrue(res != dctSuccess));
    CHECK(lastErrorSays(adv.comm(), "announced a malformed message"));
  }
  dctCompressorDestroy(c);
}

TEST_CASE("dctSparseAllgather: announced counts that wrap the total, and indices out of range, fail every rank") {
  Adversary adv;
  const int P = adv.size, me = adv.rank;
  const size_t count = 100, capacity = 64;
  std::vector<uint32_t> idx = {1u + static_cast<uint32_t>(me), 50};
  std::vector<float> val = {1.0f, 2.0f}, outVal(capacity);
  std::vector<uint32_t> outIdx(capacity);
  std::vector<size_t> counts(P);
  size_t total = 0;
  // Op 0 is the header allgather: rank 0's nnz (offset 8) made 2^64 - 1.
  adv.arm(lie(0, 0, 8, UINT64_MAX));
  dctResult_t res = dctSparseAllgather(val.data(), idx.data(), idx.size(), count, outVal.data(), outIdx.data(),
                                       capacity, counts.data(), &total, dctFloat32, adv.comm(), nullptr);
  CHECK(allTrue(res != dctSuccess));
  // Op 1 is the indices' allgatherv: rank 0's first index made count + 7.
  adv.arm(lie(0, 1, 0, count + 7, false));
  res = dctSparseAllgather(val.data(), idx.data(), idx.size(), count, outVal.data(), outIdx.data(), capacity,
                           counts.data(), &total, dctFloat32, adv.comm(), nullptr);
  CHECK(allTrue(res != dctSuccess));
  CHECK(lastErrorSays(adv.comm(), "out of range"));
  adv.arm(Attack{});
  CHECK(dctSparseAllgather(val.data(), idx.data(), idx.size(), count, outVal.data(), outIdx.data(), capacity,
                           counts.data(), &total, dctFloat32, adv.comm(), nullptr) == dctSuccess);
  CHECK(total == 2 * size_t(P));
}

TEST_CASE("split: a malformed piece fails every rank, whether its owner merges the range or walks the union") {
  Adversary adv;
  const int P = adv.size, me = adv.rank;
  if (P < 2) return;
  const size_t n = 4096;
  // Sparse inputs (about 1%: an owner walks its pieces' union) and dense-ish
  // ones (half: it merges the range), every rank's touching range 0.
  for (double density : {0.01, 0.5}) {
    CAPTURE(density);
    std::mt19937_64 rng(77 + static_cast<uint64_t>(me));
    std::vector<uint32_t> idx = {0};
    for (uint32_t i = 1; i < n; i++)
      if (std::uniform_real_distribution<double>()(rng) < density) idx.push_back(i);
    std::vector<float> val(idx.size(), 1.0f + static_cast<float>(me));
    std::vector<float> dense(n);
    size_t nnz = 0;
    auto call = [&] {
      return dctSparseInputAllreduce(idx.data(), val.data(), idx.size(), n, dctFloat32, dctSum, dctAlgoSplit,
                                     dense.data(), nullptr, nullptr, 0, &nnz, nullptr, adv.comm(), nullptr);
    };
    adv.arm(Attack{});
    INFO(std::string(dctGetLastError(adv.comm())));
    REQUIRE(call() == dctSuccess);
    // The data ops: the header allgather, the piece sizes' alltoall, then the
    // pieces' alltoallv. Rank 1's piece for owner 0 starts its send buffer:
    // its first group's base index made past the range.
    adv.arm(lie(1, 2, 0, uint64_t(1) << 30, false));
    const dctResult_t res = call();
    CHECK(adv.fired() == (me == 1));
    CHECK(allTrue(res != dctSuccess));
    if (me == 0) CHECK(lastErrorSays(adv.comm(), "malformed piece from rank 1"));
    adv.arm(Attack{});
    CHECK(call() == dctSuccess);
  }
}
