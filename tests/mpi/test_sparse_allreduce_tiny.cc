// dctSparseAllreduce's small steps, whose allgather-plan messages ride in
// the header allgather's slots (algo/gather_slot.h): two collectives (the
// headers, the exchange vote) where the allgatherv path takes four, and
// every step's result, residual, tau and statistics bit for bit those of
// the allgatherv path (forced with a slot of 0, unchunked), over several
// steps, in every tensor type, with Sum and Avg, in place and out, with a
// rank whose gradient is zero; one message over its slot sends every rank
// the allgatherv way; a transport fault at any operation of a small step,
// on one rank or all, fails every rank with nothing committed, and the
// retry is exact.
#include <doctest/doctest.h>
#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "../common/typed_values.h"
#include "algo/gather_slot.h"
#include "core/compressor.h"
#include "fault_util.h"
#include "mpi_util.h"
#include "base/dtype.h"
#include "transport/comm.h"
#include "transport/fault_injection.h"

using namespace dcttest;

namespace {

constexpr size_t kSlot = 16 << 10;
constexpr int kSteps = 3;
const dctDataType_t kTypes[] = {dctFloat32, dctFloat64, dctFloat16, dctBFloat16};

struct Case {
  size_t count = 1001;
  dctDataType_t type = dctFloat32;
  dctRedOp_t op = dctSum;
  bool inPlace = false;
  double density = 0.02;
};

// Rank 1's gradient is zero (its message empty at the first step); the
// others' normal values, whose sums' bits depend on the additions' order.
std::vector<char> gradient(int rank, int step, const Case& c) {
  std::vector<char> g(c.count * typeSize(c.type));
  std::mt19937_64 rng(31 + 7 * rank + 1000 * step + c.count);
  std::normal_distribution<double> normal(0, 1);
  for (size_t i = 0; i < c.count; i++) store(c.type, g.data() + i * typeSize(c.type), rank == 1 ? 0.0 : normal(rng));
  return g;
}

struct Steps {
  std::vector<char> outputs;    // every step's result, one after the other
  std::vector<char> residual;   // after the last step
  std::vector<dctStats_t> stats;
  std::vector<uint64_t> ops;    // transport operations per step (fault seam)
  std::vector<int> failures;    // failed attempts per step
  bool bufferIntact = true;     // every failed attempt left recvbuf (in place: sendbuf) as it was
};

dctCompressor_t makeCompressor(const World& w, const Case& c) {
  Settings s;
  s.density = c.density;
  const dctConfig_t cfg = explicitConfig(s);
  dctCompressor_t comp = nullptr;
  REQUIRE(dctCompressorCreate(w.comm, c.count, c.type, &cfg, &comp) == dctSuccess);
  return comp;
}

// kSteps steps on a fresh compressor; with victim >= -1, the fault armed
// at transport operation `n` of the first attempt of step `faultStep`.
Steps run(const World& w, const Case& c, int faultStep = -1, uint64_t n = 0, int victim = -2) {
  dctCompressor_t comp = makeCompressor(w, c);
  const size_t bytes = c.count * typeSize(c.type);
  Steps r;
  for (int step = 0; step < kSteps; step++) {
    const std::vector<char> g = gradient(w.rank, step, c);
    std::vector<char> send = g, out(bytes, 0x5a);
    int failures = 0;
    for (int attempt = 0;; attempt++) {
      REQUIRE(attempt < 2);
      if (c.inPlace) out = g;
      const std::vector<char> before = out;
      const bool armed = step == faultStep && attempt == 0 && victim >= -1;
      if (armed) dct::armFault(w.comm, n, victim);
      const uint64_t ops0 = dct::transportOps(w.comm);
      const dctResult_t res =
          dctSparseAllreduce(c.inPlace ? out.data() : send.data(), out.data(), c.count, c.type, c.op, comp, w.comm,
                             nullptr);
      const uint64_t ops = dct::transportOps(w.comm) - ops0;
      if (armed) dct::disarmFault(w.comm);
      REQUIRE(allRanksAgree(res == dctSuccess));
      if (res == dctSuccess) {
        r.ops.push_back(ops);
        break;
      }
      failures++;
      CHECK(std::strlen(dctGetLastError(w.comm)) > 0);
      r.bufferIntact = r.bufferIntact && out == before;
      dctStats_t stats{};
      REQUIRE(dctCompressorGetStats(comp, &stats) == dctSuccess);
      CHECK(stats.step == static_cast<uint64_t>(step));  // nothing committed
    }
    r.failures.push_back(failures);
    r.outputs.insert(r.outputs.end(), out.begin(), out.end());
    dctStats_t stats{};
    REQUIRE(dctCompressorGetStats(comp, &stats) == dctSuccess);
    r.stats.push_back(stats);
  }
  const char* residual = static_cast<const char*>(comp->residual());
  r.residual.assign(residual, residual + c.count * dct::dtypeSize(comp->accType));
  dctCompressorDestroy(comp);
  return r;
}

void requireSame(const Steps& a, const Steps& b) {
  CHECK(a.outputs == b.outputs);
  CHECK(a.residual == b.residual);
  REQUIRE(a.stats.size() == b.stats.size());
  for (size_t i = 0; i < a.stats.size(); i++) {
    CAPTURE(i);
    CHECK(a.stats[i].step == b.stats[i].step);
    CHECK(a.stats[i].nnz == b.stats[i].nnz);
    CHECK(a.stats[i].bytesSent == b.stats[i].bytesSent);
    CHECK(a.stats[i].bytesReceived == b.stats[i].bytesReceived);
    CHECK(std::memcmp(&a.stats[i].threshold, &b.stats[i].threshold, sizeof(double)) == 0);
  }
}

// The slot for the next steps; without one, also unchunked steps (a
// one-chunk pipelined step counts its slot's padding as sent): the
// allgatherv path the slots' results must equal.
void setSlot(dctComm_t comm, size_t slot) {
  REQUIRE(dct::setGatherSlot(comm, slot) == dctSuccess);
  comm->settings.pipeline = slot > 0;
}

// Transport operations of a step in the slots: the result's prepare, the
// header allgather and the exchange vote (a single rank votes with no
// one), and the late vote of a step whose result is converted.
uint64_t tinyOps(int size, bool lateVote = false) { return (size > 1 ? 3 : 2) + (lateVote && size > 1 ? 1 : 0); }
// What the slots save: the agreement's vote, the gather buffer's prepare
// and the allgatherv.
uint64_t savedOps(int size) { return size > 1 ? 3 : 2; }

}  // namespace

TEST_CASE("small steps take two collectives and match the allgatherv path bit for bit") {
  World w;
  REQUIRE(dct::installFaultSeam(w.comm) == dctSuccess);
  for (size_t count : {size_t(1), size_t(7), size_t(1001), size_t(4099)})
    for (dctDataType_t t : kTypes)
      for (dctRedOp_t op : {dctSum, dctAvg})
        for (bool inPlace : {false, true}) {
          CAPTURE(count);
          CAPTURE(static_cast<int>(t));
          CAPTURE(static_cast<int>(op));
          CAPTURE(inPlace);
          const Case c{count, t, op, inPlace, count < 10 ? 0.3 : 0.02};
          setSlot(w.comm, kSlot);
          const Steps tiny = run(w, c);
          setSlot(w.comm, 0);
          const Steps gathered = run(w, c);
          for (int s = 0; s < kSteps; s++) {
            CAPTURE(s);
            CHECK(tiny.ops[s] <= tinyOps(w.size, true));
            CHECK(gathered.ops[s] == tiny.ops[s] + savedOps(w.size));
          }
          requireSame(tiny, gathered);
          CHECK(identicalOnAllRanks(tiny.outputs.data(), tiny.outputs.size()));
        }
  setSlot(w.comm, kSlot);
}

TEST_CASE("one message over its slot sends every rank the allgatherv way, with the same bits") {
  World w;
  REQUIRE(dct::installFaultSeam(w.comm) == dctSuccess);
  const Case c{3001, dctFloat32, dctSum, false, 0.03};
  setSlot(w.comm, 0);
  const Steps gathered = run(w, c);
  uint64_t mine = 0, most = 0;
  for (const dctStats_t& s : gathered.stats) mine = std::max<uint64_t>(mine, s.bytesSent);
  MPI_Allreduce(&mine, &most, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  setSlot(w.comm, (most + 7) & ~uint64_t(7));  // every step's largest fits
  const Steps fits = run(w, c);
  for (int s = 0; s < kSteps; s++) CHECK(fits.ops[s] + savedOps(w.size) == gathered.ops[s]);
  requireSame(fits, gathered);
  setSlot(w.comm, (most & ~uint64_t(7)) - 8);  // the largest does not, at least once
  w.comm->settings.pipeline = false;  // after it: unchunked, not one pipelined chunk
  const Steps over = run(w, c);
  bool someGathered = false;
  for (int s = 0; s < kSteps; s++) someGathered = someGathered || over.ops[s] == gathered.ops[s];
  CHECK(someGathered);
  requireSame(over, gathered);
  setSlot(w.comm, kSlot);
}

TEST_CASE("a fault at either collective of a small step, on one rank or all, fails every rank; the retry is exact") {
  World w;
  REQUIRE(dct::installFaultSeam(w.comm) == dctSuccess);
  setSlot(w.comm, kSlot);
  for (dctDataType_t t : {dctFloat32, dctFloat16})
    for (bool inPlace : {false, true}) {
      const Case c{2003, t, dctAvg, inPlace, 0.02};
      const Steps clean = run(w, c);
      REQUIRE(clean.ops[1] <= tinyOps(w.size, true));
      for (uint64_t n = 0; n < clean.ops[1]; n++)
        for (int victim = -1; victim < w.size; victim++) {
          CAPTURE(static_cast<int>(t));
          CAPTURE(inPlace);
          CAPTURE(n);
          CAPTURE(victim);
          const Steps faulty = run(w, c, 1, n, victim);
          CHECK(faulty.failures[1] == 1);
          // Up to the exchange vote nothing is written in place; a converted
          // result's late vote comes after (sparse_allreduce.cc).
          if (inPlace && n < tinyOps(w.size)) CHECK(faulty.bufferIntact);
          requireSame(faulty, clean);
        }
    }
}

TEST_CASE("ranks making different calls of the allreduce family fail together instead of overrunning") {
  // Every CallHeader gather carries the comm's slot (agree.h), whatever the
  // call: a small top-K step, a 1-bit step and a sparse-input call on
  // different ranks meet in one allgather of one shape and fail its check.
  World w;
  if (w.size == 1) return;
  setSlot(w.comm, kSlot);
  const Case c{1001, dctFloat32, dctSum, false, 0.02};
  dctCompressor_t topk = makeCompressor(w, c);
  Settings s;
  dctConfig_t onebitCfg = explicitConfig(s);
  onebitCfg.compressor = dctCompressorOnebit;
  dctCompressor_t onebit = nullptr;
  REQUIRE(dctCompressorCreate(w.comm, c.count, c.type, &onebitCfg, &onebit) == dctSuccess);
  const std::vector<char> g = gradient(w.rank, 0, c);
  std::vector<char> out(g.size());
  const std::vector<uint32_t> idx{3, 70, 999};
  const std::vector<float> val{1.f, 2.f, 3.f};
  for (int odd = 0; odd < 2; odd++) {
    CAPTURE(odd);
    dctResult_t res = dctSuccess;
    if (w.rank != w.size - 1) {
      res = dctSparseAllreduce(g.data(), out.data(), c.count, c.type, c.op, topk, w.comm, nullptr);
    } else if (odd == 0) {
      res = dctSparseAllreduce(g.data(), out.data(), c.count, c.type, c.op, onebit, w.comm, nullptr);
    } else {
      size_t nnz = 0;
      res = dctSparseInputAllreduce(idx.data(), val.data(), idx.size(), c.count, c.type, c.op, dctAlgoAllgather,
                                    out.data(), nullptr, nullptr, 0, &nnz, nullptr, w.comm, nullptr);
    }
    CHECK(allRanksAgree(res != dctSuccess));
    CHECK(res != dctSuccess);
    dctStats_t stats{};
    REQUIRE(dctCompressorGetStats(topk, &stats) == dctSuccess);
    CHECK(stats.step == 0);
  }
  // Agreed again, the small step goes on in the slots.
  CHECK(dctSparseAllreduce(g.data(), out.data(), c.count, c.type, c.op, topk, w.comm, nullptr) == dctSuccess);
  dctCompressorDestroy(onebit);
  dctCompressorDestroy(topk);
}
