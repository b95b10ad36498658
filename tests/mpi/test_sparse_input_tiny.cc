// dctSparseInputAllreduce's small calls, whose messages ride in the header
// allgather's slots (algo/gather_slot.h): two collectives, results bit for
// bit those of the allgatherv path (forced with a slot of 0) at odd sizes,
// every datatype, both ops, dense and COO results and empty ranks; one
// message over its slot sends every rank the allgatherv way; disagreeing
// calls, transport faults at either collective and allocation failures
// fail every rank with nothing written, and a retry is exact.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "../common/typed_values.h"
#include "algo/gather_slot.h"
#include "core/compressor.h"
#include "fault_util.h"
#include "mpi_util.h"
#include "transport/comm.h"
#include "transport/fault_injection.h"

using namespace dcttest;

namespace {

constexpr size_t kSlot = 16 << 10;
const dctDataType_t kTypes[] = {dctFloat32, dctFloat64, dctFloat16, dctBFloat16};

struct Input {
  std::vector<uint32_t> idx;
  std::vector<char> val;
};

// Rank 1 empty; the others a random few percent of the positions, real
// values (their sum's bits depend on the order of the additions).
Input makeInput(int rank, size_t count, dctDataType_t t, double density) {
  Input in;
  if (rank == 1) return in;
  std::mt19937_64 rng(77 + 13 * rank + count);
  std::uniform_real_distribution<double> u(0, 1);
  std::normal_distribution<double> normal(0, 1);
  for (size_t i = 0; i < count; i++)
    if (u(rng) < density * (1 + rank)) in.idx.push_back(static_cast<uint32_t>(i));
  in.val.resize(in.idx.size() * typeSize(t));
  for (size_t j = 0; j < in.idx.size(); j++) store(t, in.val.data() + j * typeSize(t), normal(rng));
  return in;
}

enum Outputs { kDense = 1, kCoo = 2, kBoth = 3 };

struct Result {
  dctResult_t res = dctSuccess;
  std::vector<char> dense, val;
  std::vector<uint32_t> idx;
  size_t nnz = 0;
  dctSparseInputInfo_t info{};
  uint64_t ops = 0;  // transport operations (with the fault seam installed)
};

struct Call {
  size_t count = 0;
  dctDataType_t type = dctFloat32;
  dctRedOp_t op = dctSum;
  dctAlgorithm_t algo = dctAlgoAllgather;
  int outputs = kBoth;
  double density = 0.02;
};

// One call; the outputs start as a fill pattern, so a failed call must
// leave that pattern.
Result run(dctComm_t comm, const Call& c, const Input& in) {
  Result r;
  const size_t vb = typeSize(c.type);
  r.dense.assign(c.count * vb, 0x5a);
  r.val.assign(c.count * vb, 0x3c);
  r.idx.assign(c.count, 0xdeadbeefu);
  const bool dense = c.outputs & kDense, coo = c.outputs & kCoo;
  const uint64_t before = comm->faultSeam ? dct::transportOps(comm) : 0;
  r.res = dctSparseInputAllreduce(in.idx.data(), in.val.data(), in.idx.size(), c.count, c.type, c.op, c.algo,
                                  dense ? r.dense.data() : nullptr, coo ? r.idx.data() : nullptr,
                                  coo ? r.val.data() : nullptr, coo ? c.count : 0, &r.nnz, &r.info, comm, nullptr);
  if (comm->faultSeam) r.ops = dct::transportOps(comm) - before;
  return r;
}

bool untouched(const Result& r) {
  for (char b : r.dense)
    if (b != 0x5a) return false;
  for (char b : r.val)
    if (b != 0x3c) return false;
  for (uint32_t i : r.idx)
    if (i != 0xdeadbeefu) return false;
  return true;
}

void requireSame(const Result& a, const Result& b) {
  REQUIRE(a.res == dctSuccess);
  REQUIRE(b.res == dctSuccess);
  REQUIRE(a.nnz == b.nnz);
  CHECK(a.dense == b.dense);
  CHECK(a.idx == b.idx);
  CHECK(a.val == b.val);
  CHECK(a.info.algorithm == b.info.algorithm);
  CHECK(a.info.inputNnz == b.info.inputNnz);
  CHECK(a.info.resultNnz == b.info.resultNnz);
  CHECK(a.info.bytesSent == b.info.bytesSent);
  CHECK(a.info.bytesReceived == b.info.bytesReceived);
}

void setSlot(dctComm_t comm, size_t slot) { REQUIRE(dct::setGatherSlot(comm, slot) == dctSuccess); }

// The ranks' largest message in this call's form, from a call's info.
uint64_t largestMessage(const Result& r) {
  uint64_t mine = r.info.bytesSent, most = 0;
  MPI_Allreduce(&mine, &most, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  return most;
}

// Collectives of a call in the slots: the header allgather and one vote (a
// single rank votes with no one).
uint64_t tinyOps(int size) { return size > 1 ? 2 : 1; }

}  // namespace

TEST_CASE("the slot: priced from the links, a multiple of 8, capped, none where the link is unknown") {
  const dct::CostParams shm{10.0, 5.0, 2.0, 4.0};
  const size_t s4 = dct::gatherSlotBytes(shm, 4);
  CHECK(s4 % 8 == 0);
  CHECK(s4 == 65536);  // 2 x 3 latencies x 10 us x 5 GB/s = 300 kB, capped at 256 KiB, over 4 ranks
  CHECK(dct::gatherSlotBytes(shm, 2) == 50000);  // 2 latencies: 100 kB over 2 ranks
  CHECK(dct::gatherSlotBytes(shm, 1024) == 256);
  CHECK(dct::gatherSlotBytes(shm, 100000) == 0);  // under 64 bytes a rank: none
  const dct::CostParams slow{50.0, 0.125, 2.0, 4.0};  // 1 Gbit/s
  CHECK(dct::gatherSlotBytes(slow, 4) == 9368);
  CHECK(dct::gatherSlotBytes(dct::CostParams{NAN, 1.0, 2.0, 4.0}, 4) == 0);
  CHECK(dct::gatherSlotBytes(dct::CostParams{1e30, 1e30, 2.0, 4.0}, 4) == dct::kMaxGatherSlot);
}

TEST_CASE("a small call takes two collectives and matches the allgatherv path bit for bit") {
  World w;
  REQUIRE(dct::installFaultSeam(w.comm) == dctSuccess);
  for (size_t count : {size_t(1), size_t(7), size_t(1001), size_t(4099)})
    for (dctDataType_t t : kTypes)
      for (dctRedOp_t op : {dctSum, dctAvg})
        for (int outputs : {kDense, kCoo, kBoth})
          for (dctAlgorithm_t algo : {dctAlgoAuto, dctAlgoAllgather}) {
            CAPTURE(count);
            CAPTURE(static_cast<int>(t));
            CAPTURE(static_cast<int>(op));
            CAPTURE(outputs);
            CAPTURE(static_cast<int>(algo));
            const Call c{count, t, op, algo, outputs, count < 10 ? 0.3 : 0.02};
            const Input in = makeInput(w.rank, count, t, c.density);
            setSlot(w.comm, kSlot);
            const Result tiny = run(w.comm, c, in);
            setSlot(w.comm, 0);
            Call normal = c;
            normal.algo = dctAlgoAllgather;  // the plan whose results the slots' must be
            const Result gathered = run(w.comm, normal, in);
            REQUIRE(largestMessage(tiny) <= kSlot);
            CHECK(tiny.ops == tinyOps(w.size));
            CHECK(gathered.ops > tiny.ops);
            requireSame(tiny, gathered);
            CHECK(tiny.info.algorithm == dctAlgoAllgather);
            CHECK(identicalOnAllRanks(tiny.dense.data(), tiny.dense.size()));
            CHECK(identicalOnAllRanks(tiny.val.data(), tiny.nnz * typeSize(t)));
          }
  setSlot(w.comm, kSlot);
}

TEST_CASE("one message over its slot sends every rank the allgatherv way, with the same bits") {
  World w;
  REQUIRE(dct::installFaultSeam(w.comm) == dctSuccess);
  for (dctDataType_t t : kTypes)
    for (int outputs : {kDense, kCoo, kBoth}) {
      CAPTURE(static_cast<int>(t));
      CAPTURE(outputs);
      const Call c{3001, t, dctSum, dctAlgoAllgather, outputs, 0.03};
      const Input in = makeInput(w.rank, c.count, t, c.density);
      setSlot(w.comm, 0);
      const Result gathered = run(w.comm, c, in);
      const uint64_t most = largestMessage(gathered);
      setSlot(w.comm, most);  // the largest just fits
      const Result fits = run(w.comm, c, in);
      CHECK(fits.ops == tinyOps(w.size));
      requireSame(fits, gathered);
      setSlot(w.comm, most - 8);  // the largest (rank 0's, or the only) does not
      const Result over = run(w.comm, c, in);
      CHECK(over.ops == gathered.ops);
      requireSame(over, gathered);
    }
  setSlot(w.comm, kSlot);
}

TEST_CASE("small calls that disagree, or a rank with a bad argument, fail every rank with nothing written") {
  World w;
  setSlot(w.comm, kSlot);
  const Call base{1001, dctFloat32, dctSum, dctAlgoAllgather, kBoth, 0.02};
  const Input in = makeInput(w.rank, base.count, base.type, base.density);
  const Result clean = run(w.comm, base, in);
  REQUIRE(clean.res == dctSuccess);
  const int odd = w.size - 1;  // the rank that differs
  for (int what = 0; what < 5; what++) {
    CAPTURE(what);
    Call c = base;
    Input mine = in;
    if (w.rank == odd) {
      if (what == 0) c.count = base.count + 1;
      if (what == 1) c.op = dctAvg;
      if (what == 2) c.algo = dctAlgoAuto;
      if (what == 3 && !mine.idx.empty()) mine.idx.back() = static_cast<uint32_t>(base.count);  // out of range
      if (what == 3 && mine.idx.empty()) c.count = 0;
      if (what == 4) {
        c.type = dctFloat64;
        mine.val.resize(mine.idx.size() * 8);
      }
    }
    if (w.size == 1 && what != 3) continue;  // a single rank cannot disagree with itself
    const Result r = run(w.comm, c, mine);
    CHECK(allRanksAgree(r.res != dctSuccess));
    CHECK(r.res != dctSuccess);
    CHECK(untouched(r));
    requireSame(run(w.comm, base, in), clean);  // the next call is exact
  }
}

TEST_CASE("a fault at either collective of a small call, on one rank or all, fails every rank; a retry is exact") {
  World w;
  REQUIRE(dct::installFaultSeam(w.comm) == dctSuccess);
  setSlot(w.comm, kSlot);
  for (dctDataType_t t : {dctFloat32, dctFloat16})
    for (int outputs : {kDense, kCoo, kBoth}) {
      const Call c{2003, t, dctAvg, dctAlgoAuto, outputs, 0.02};
      const Input in = makeInput(w.rank, c.count, t, c.density);
      const Result clean = run(w.comm, c, in);
      REQUIRE(clean.res == dctSuccess);
      REQUIRE(clean.ops == tinyOps(w.size));
      for (uint64_t n = 0; n < clean.ops; n++)
        for (int victim = -1; victim < w.size; victim++) {
          CAPTURE(static_cast<int>(t));
          CAPTURE(outputs);
          CAPTURE(n);
          CAPTURE(victim);
          dct::armFault(w.comm, n, victim);
          const Result faulty = run(w.comm, c, in);
          dct::disarmFault(w.comm);
          CHECK(allRanksAgree(faulty.res != dctSuccess));
          CHECK(faulty.res != dctSuccess);
          CHECK(untouched(faulty));
          CHECK(std::strlen(dctGetLastError(w.comm)) > 0);
          requireSame(run(w.comm, c, in), clean);
        }
    }
}

TEST_CASE("an allocation failure on one rank during a small call fails every rank; a retry is exact") {
  World w;
  setSlot(w.comm, kSlot);
  for (int outputs : {kDense, kCoo, kBoth}) {
    const Call c{2003, dctFloat16, dctSum, dctAlgoAllgather, outputs, 0.02};
    const Input in = makeInput(w.rank, c.count, c.type, c.density);
    const Result clean = run(w.comm, c, in);
    REQUIRE(clean.res == dctSuccess);
    for (int victim = 0; victim < w.size; victim++)
      for (int n = 0; n < 6; n++) {
        CAPTURE(outputs);
        CAPTURE(victim);
        CAPTURE(n);
        // Fresh buffers from a twin whose n-th allocation fails on the victim.
        REQUIRE(dct::bindOps(w.comm->sparseInput, failingOps(), "test", false) == dctSuccess);
        allocationsLeft = w.rank == victim ? n : -1;
        const Result faulty = run(w.comm, c, in);
        allocationsLeft = -1;
        CHECK(allRanksAgree(faulty.res == dctSuccess));
        if (faulty.res != dctSuccess) CHECK(untouched(faulty));
        if (faulty.res == dctSuccess) requireSame(faulty, clean);
        if (n == 0) CHECK(faulty.res != dctSuccess);  // fresh buffers: the first allocation always comes
        requireSame(run(w.comm, c, in), clean);
      }
  }
}

TEST_CASE("the slot follows the last calls' largest message, alike on every rank; a failed call leaves it") {
  World w;
  REQUIRE(dct::installFaultSeam(w.comm) == dctSuccess);
  setSlot(w.comm, kSlot);
  const Call small{4001, dctFloat32, dctSum, dctAlgoAllgather, kBoth, 0.005};  // pinned: auto follows the link probe
  const Call large{4001, dctFloat32, dctSum, dctAlgoAllgather, kBoth, 0.05};
  const Input a = makeInput(w.rank, small.count, small.type, small.density);
  const Input b = makeInput(w.rank, large.count, large.type, large.density);
  const Result first = run(w.comm, small, a);
  REQUIRE(first.ops == tinyOps(w.size));
  const uint64_t most = largestMessage(first);
  CHECK(w.comm->gatherSlot == ((most + most / 32 + 64 + 7) & ~uint64_t(7)));
  CHECK(identicalOnAllRanks(&w.comm->gatherSlot, sizeof(size_t)));
  const size_t learned = w.comm->gatherSlot;
  // A larger message than the learned slot (within the bound): the
  // allgatherv way once, then in the slots.
  const Result over = run(w.comm, large, b);
  REQUIRE(largestMessage(over) > learned);
  REQUIRE(largestMessage(over) <= kSlot);
  CHECK(over.ops > tinyOps(w.size));
  const Result again = run(w.comm, large, b);
  CHECK(again.ops == tinyOps(w.size));
  requireSame(again, over);
  // The window keeps the larger one: the small call stays in the slots.
  const size_t grown = w.comm->gatherSlot;
  CHECK(run(w.comm, small, a).ops == tinyOps(w.size));
  CHECK(w.comm->gatherSlot == grown);
  // A failed call learns nothing.
  dct::armFault(w.comm, 0, -1);
  CHECK(run(w.comm, large, a).res != dctSuccess);
  dct::disarmFault(w.comm);
  CHECK(w.comm->gatherSlot == grown);
  // Past the bound: the bound, never more.
  setSlot(w.comm, 64);
  const Result bounded = run(w.comm, large, b);
  CHECK(bounded.ops > tinyOps(w.size));
  CHECK(w.comm->gatherSlot == 64);
  setSlot(w.comm, kSlot);
}
