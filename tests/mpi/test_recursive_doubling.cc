// dctSparseInputAllreduce's recursive doubling (dctAlgoRecursiveDoubling)
// at any rank count: the result bit for bit as a simulation of its schedule
// computes it (fold in, pairwise rounds with the lower block's values first,
// the dense switch at the break-even, fold out) and the bytes each rank
// sends as it prices them, so a wrong merge order or switch fails; equal to
// the allgather plan wherever the sums are exact (integer values), every
// datatype, dense and COO results; empty ranks, all-dense inputs and single
// entries; past MPI's int counts; and a transport fault at any operation on
// any rank failing every rank with the outputs unchanged.
#include <doctest/doctest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "../common/typed_values.h"
#include "fault_util.h"
#include "mpi_util.h"
#include "transport/comm.h"
#include "transport/fault_injection.h"
#include "transport/mpi_limits.h"

using namespace dcttest;

namespace {

constexpr dctAlgorithm_t kRd = dctAlgoRecursiveDoubling;

struct Coo {
  std::vector<uint32_t> idx;
  std::vector<char> val;
};

// Fill of rank r's input by scenario (-1: a single entry).
double fillOf(int scenario, int rank) {
  static const double mixed[] = {0.3, 0.0, 0.2, -1, 1.0, 0.1, 0.25, 0.0};
  switch (scenario) {
    case 0: return mixed[rank % 8];
    case 1: return 0.0;   // every rank empty
    case 2: return 1.0;   // every rank dense
    case 3: return -1;    // one entry each
    case 4: return 0.02;  // never dense
    default: return 0.3;  // dense after a merge or two
  }
}

Coo makeInput(int scenario, int rank, size_t count, dctDataType_t t, bool integers) {
  Coo in;
  std::mt19937_64 rng(777 + 31 * rank + 7 * scenario + count);
  std::uniform_real_distribution<double> u(0, 1);
  const double p = fillOf(scenario, rank);
  if (p < 0) in.idx.push_back(static_cast<uint32_t>((rank * 5 + scenario) % count));
  else
    for (size_t i = 0; i < count; i++)
      if (p >= 1.0 || u(rng) < p) in.idx.push_back(static_cast<uint32_t>(i));
  in.val.resize(in.idx.size() * typeSize(t));
  std::uniform_int_distribution<int> small(-8, 8);
  std::normal_distribution<double> normal(0, 1);
  for (size_t j = 0; j < in.idx.size(); j++)
    store(t, in.val.data() + j * typeSize(t), integers ? small(rng) : normal(rng) * std::ldexp(1.0, small(rng)));
  return in;
}

// The plan as its header documents it, over every rank's input (V: the
// accumulation type, here the datatype: fp32 or fp64).
template <typename V>
struct Simulation {
  struct Part {
    bool dense = false;
    std::vector<uint32_t> idx;
    std::vector<V> val, d;
  };
  size_t count;
  uint64_t switchNnz;
  std::vector<size_t> sent;

  explicit Simulation(size_t n) : count(n), switchNnz((n * sizeof(V) + 4 + sizeof(V) - 1) / (4 + sizeof(V))) {}

  size_t bytes(const Part& p) const {
    if (p.dense) return 8 + count * sizeof(V);
    return 8 + ((p.idx.size() * 4 + 7) & ~size_t(7)) + p.idx.size() * sizeof(V);
  }
  void densify(Part& p) const {
    p.d.assign(count, V(0));
    for (size_t j = 0; j < p.idx.size(); j++) p.d[p.idx[j]] += p.val[j];
    p.dense = true;
  }
  Part input(const Coo& in) const {
    Part p;
    p.idx = in.idx;
    for (size_t j = 0; j < in.idx.size(); j++) {
      V v;
      std::memcpy(&v, in.val.data() + j * sizeof(V), sizeof(V));
      p.val.push_back(v);
    }
    if (p.idx.size() >= switchNnz) densify(p);
    return p;
  }
  // a is the lower block's.
  Part combine(const Part& a, const Part& b) const {
    Part o;
    o.dense = true;
    if (a.dense && b.dense) {
      o.d.resize(count);
      for (size_t i = 0; i < count; i++) o.d[i] = a.d[i] + b.d[i];
    } else if (a.dense) {
      o.d = a.d;
      for (size_t j = 0; j < b.idx.size(); j++) o.d[b.idx[j]] = o.d[b.idx[j]] + b.val[j];
    } else if (b.dense) {
      o.d = b.d;
      for (size_t j = 0; j < a.idx.size(); j++) o.d[a.idx[j]] = a.val[j] + o.d[a.idx[j]];
    } else {
      o.dense = false;
      size_t x = 0, y = 0;
      while (x < a.idx.size() || y < b.idx.size()) {
        if (y == b.idx.size() || (x < a.idx.size() && a.idx[x] < b.idx[y])) {
          o.idx.push_back(a.idx[x]), o.val.push_back(a.val[x++]);
        } else if (x == a.idx.size() || b.idx[y] < a.idx[x]) {
          o.idx.push_back(b.idx[y]), o.val.push_back(b.val[y++]);
        } else {
          o.idx.push_back(a.idx[x]), o.val.push_back(a.val[x++] + b.val[y++]);
        }
      }
      if (o.idx.size() >= switchNnz) {  // +0 + a + b
        Part da = a;
        densify(da);
        o.d = da.d;
        for (size_t j = 0; j < b.idx.size(); j++) o.d[b.idx[j]] = o.d[b.idx[j]] + b.val[j];
        o.dense = true;
      }
    }
    return o;
  }
  // The sum every rank ends with; sent[r]: the bytes rank r sends.
  std::vector<V> run(const std::vector<Coo>& all) {
    const int P = static_cast<int>(all.size());
    int p2 = 1;
    while (p2 * 2 <= P) p2 *= 2;
    sent.assign(P, 0);
    std::vector<Part> parts;
    for (const Coo& in : all) parts.push_back(input(in));
    for (int j = 0; j + p2 < P; j++) {
      sent[j + p2] += bytes(parts[j + p2]);
      parts[j] = combine(parts[j], parts[j + p2]);
    }
    for (int len = 1; len < p2; len *= 2) {
      std::vector<Part> next(p2);
      for (int r = 0; r < p2; r++) {
        const int peer = r ^ len;
        sent[r] += bytes(parts[r]);
        next[r] = r < peer ? combine(parts[r], parts[peer]) : combine(parts[peer], parts[r]);
      }
      for (int r = 0; r < p2; r++) parts[r] = next[r];
    }
    for (int j = 0; j + p2 < P; j++) sent[j] += bytes(parts[j]);
    Part result = parts[0];
    if (!result.dense) densify(result);
    return result.d;
  }
};

struct Out {
  std::vector<char> dense;
  std::vector<uint32_t> idx;
  std::vector<char> val;
  size_t nnz = 0;
  dctSparseInputInfo_t info{};
};

// Both results, or (withDense false) the COO alone.
Out call(const World& w, const Coo& mine, size_t count, dctDataType_t t, dctAlgorithm_t algo, dctRedOp_t op = dctSum,
         bool withDense = true) {
  const size_t es = typeSize(t);
  Out o;
  o.dense.assign(count * es, 0x5a);
  o.idx.assign(count + 1, 0xdeadbeef);
  o.val.assign((count + 1) * es, 0x5a);
  const dctResult_t res = dctSparseInputAllreduce(mine.idx.data(), mine.val.data(), mine.idx.size(), count, t, op,
                                                  algo, withDense ? o.dense.data() : nullptr, o.idx.data(),
                                                  o.val.data(), count + 1, &o.nnz, &o.info, w.comm, nullptr);
  INFO(std::string(dctGetLastError(w.comm)));
  REQUIRE(res == dctSuccess);
  return o;
}

// The COO lists exactly the dense result's nonzeros, with its bits.
void checkCoo(const Out& o, size_t count, dctDataType_t t) {
  const size_t es = typeSize(t);
  const std::vector<char> zero(es, 0);
  size_t n = 0;
  for (size_t i = 0; i < count; i++) {
    const char* v = o.dense.data() + i * es;
    const bool nonzero = t == dctFloat64   ? *reinterpret_cast<const double*>(v) != 0
                         : t == dctFloat32 ? *reinterpret_cast<const float*>(v) != 0
                                           : (*reinterpret_cast<const uint16_t*>(v) & 0x7fff) != 0;
    if (!nonzero) continue;
    REQUIRE(n < o.nnz);
    CHECK(o.idx[n] == i);
    CHECK(std::memcmp(o.val.data() + n * es, v, es) == 0);
    n++;
  }
  CHECK(n == o.nnz);
  CHECK(o.idx[o.nnz] == 0xdeadbeef);
}

template <typename V>
void checkAgainstSimulation(const World& w, int scenario, size_t count, dctDataType_t t) {
  CAPTURE(scenario);
  CAPTURE(count);
  CAPTURE(static_cast<int>(t));
  std::vector<Coo> all;
  for (int r = 0; r < w.size; r++) all.push_back(makeInput(scenario, r, count, t, false));
  Simulation<V> sim(count);
  const std::vector<V> expected = sim.run(all);
  const Out o = call(w, all[w.rank], count, t, kRd);
  CHECK(o.info.algorithm == kRd);
  CHECK(std::memcmp(o.dense.data(), expected.data(), count * sizeof(V)) == 0);
  CHECK(o.info.bytesSent == sim.sent[w.rank]);
  CHECK(identicalOnAllRanks(o.dense.data(), o.dense.size()));
  checkCoo(o, count, t);
}

}  // namespace

TEST_CASE("recursive doubling computes its documented tree and sends what its switch says, at any rank count") {
  World w;
  for (int scenario = 0; scenario < 6; scenario++)
    for (size_t count : {size_t(1), size_t(7), size_t(1000), size_t(4099)}) {
      checkAgainstSimulation<float>(w, scenario, count, dctFloat32);
      checkAgainstSimulation<double>(w, scenario, count, dctFloat64);
    }
}

TEST_CASE("recursive doubling equals the allgather plan bit for bit where the sums are exact") {
  World w;
  for (dctDataType_t t : {dctFloat32, dctFloat64, dctFloat16, dctBFloat16})
    for (int scenario = 0; scenario < 6; scenario++)
      for (size_t count : {size_t(3), size_t(1000)}) {
        CAPTURE(static_cast<int>(t));
        CAPTURE(scenario);
        CAPTURE(count);
        const Coo mine = makeInput(scenario, w.rank, count, t, true);
        const Out rd = call(w, mine, count, t, kRd);
        const Out ag = call(w, mine, count, t, dctAlgoAllgather);
        CHECK(rd.dense == ag.dense);
        REQUIRE(rd.nnz == ag.nnz);
        CHECK(std::memcmp(rd.idx.data(), ag.idx.data(), rd.nnz * 4) == 0);
        CHECK(std::memcmp(rd.val.data(), ag.val.data(), rd.nnz * typeSize(t)) == 0);
        checkCoo(rd, count, t);
        CHECK(identicalOnAllRanks(rd.dense.data(), rd.dense.size()));
      }
}

// The COO alone comes from the sparse result itself (no dense sum is
// built while it stays sparse): the same entries and bits as beside a
// dense result, averaged too.
TEST_CASE("recursive doubling's COO alone equals its COO beside the dense result, summed or averaged") {
  World w;
  for (dctRedOp_t op : {dctSum, dctAvg})
    for (dctDataType_t t : {dctFloat32, dctFloat64, dctFloat16, dctBFloat16})
      for (int scenario = 0; scenario < 6; scenario++)
        for (size_t count : {size_t(7), size_t(4099)}) {
          CAPTURE(static_cast<int>(op));
          CAPTURE(static_cast<int>(t));
          CAPTURE(scenario);
          CAPTURE(count);
          Coo mine = makeInput(scenario, w.rank, count, t, false);
          if (!mine.idx.empty()) store(t, mine.val.data(), -0.0);  // a -0 that some sums keep alone: not listed
          const Out both = call(w, mine, count, t, kRd, op, true);
          const Out alone = call(w, mine, count, t, kRd, op, false);
          REQUIRE(alone.nnz == both.nnz);
          CHECK(std::memcmp(alone.idx.data(), both.idx.data(), alone.nnz * 4) == 0);
          CHECK(std::memcmp(alone.val.data(), both.val.data(), alone.nnz * typeSize(t)) == 0);
          CHECK(alone.idx[alone.nnz] == 0xdeadbeef);
          CHECK(identicalOnAllRanks(alone.val.data(), alone.nnz * typeSize(t)));
        }
}

TEST_CASE("NaNs with a payload per rank: a NaN on every rank, the same bits everywhere") {
  // Which payload survives a + b of two NaNs is the compiler's choice of
  // operand order (IEEE leaves it open): only that every rank agrees.
  World w;
  const size_t count = 64;
  Coo mine;
  mine.idx = {5};
  mine.val.resize(4);
  const uint32_t nan = 0x7fc00000u | static_cast<uint32_t>(w.rank + 1);
  std::memcpy(mine.val.data(), &nan, 4);
  const Out rd = call(w, mine, count, dctFloat32, kRd);
  float v = 0;
  std::memcpy(&v, rd.dense.data() + 5 * 4, 4);
  CHECK(std::isnan(v));
  CHECK(identicalOnAllRanks(rd.dense.data(), rd.dense.size()));
  REQUIRE(rd.nnz == 1);
  CHECK(rd.idx[0] == 5);
}

TEST_CASE("recursive doubling past MPI's int counts gives the same bits") {
  World w;
  for (int scenario : {0, 5}) {
    const size_t count = 1000;
    const Coo mine = makeInput(scenario, w.rank, count, dctFloat32, false);
    const Out plain = call(w, mine, count, dctFloat32, kRd);
    dct::setMpiCountLimitForTesting(40);
    const Out pieces = call(w, mine, count, dctFloat32, kRd);
    dct::setMpiCountLimitForTesting(0);
    CHECK(plain.dense == pieces.dense);
    CHECK(plain.info.bytesSent == pieces.info.bytesSent);
  }
}

TEST_CASE("a transport fault at any operation of recursive doubling fails every rank, outputs unchanged") {
  World w;
  REQUIRE(dct::installFaultSeam(w.comm) == dctSuccess);
  const size_t count = 401;
  for (int scenario : {0, 3, 5}) {
    CAPTURE(scenario);
    const Coo mine = makeInput(scenario, w.rank, count, dctFloat32, false);
    const uint64_t before = dct::transportOps(w.comm);
    const Out clean = call(w, mine, count, dctFloat32, kRd);
    const std::vector<uint64_t> ops = opsOnEveryRank(dct::transportOps(w.comm) - before);
    for (uint64_t n = 0; n < mostOps(ops); n++)
      for (int victim = -1; victim < w.size; victim++) {
        CAPTURE(n);
        CAPTURE(victim);
        const bool fires = faultFires(ops, n, victim);
        dct::armFault(w.comm, n, victim);
        std::vector<char> dense(count * 4, 0x11), val(count * 4, 0x22);
        std::vector<uint32_t> idx(count, 0x33);
        size_t nnz = 0;
        const dctResult_t res =
            dctSparseInputAllreduce(mine.idx.data(), mine.val.data(), mine.idx.size(), count, dctFloat32, dctSum, kRd,
                                    dense.data(), idx.data(), val.data(), count, &nnz, nullptr, w.comm, nullptr);
        dct::disarmFault(w.comm);
        CHECK(allRanksAgree(res == dctSuccess));
        CHECK((res != dctSuccess) == fires);
        if (res != dctSuccess) {
          CHECK(std::count(dense.begin(), dense.end(), char(0x11)) == static_cast<long>(dense.size()));
          CHECK(std::count(val.begin(), val.end(), char(0x22)) == static_cast<long>(val.size()));
          CHECK(std::count(idx.begin(), idx.end(), 0x33u) == static_cast<long>(idx.size()));
          CHECK(std::strlen(dctGetLastError(w.comm)) > 0);
        }
        const Out retry = call(w, mine, count, dctFloat32, kRd);  // exact after any failure
        CHECK(retry.dense == clean.dense);
        CHECK(retry.nnz == clean.nnz);
      }
  }
}
