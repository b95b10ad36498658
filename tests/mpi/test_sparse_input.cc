// dctSparseInputAllreduce under mpirun: every algorithm and datatype against
// a plain rank-order reference, dense and COO results, bit-identical on
// every rank, empty ranks, the size query, and bad input failing every rank
// with nothing written.
#include <algorithm>
#include <cmath>
#include <random>

#include "../common/typed_values.h"
#include "mpi_util.h"

using namespace dcttest;

namespace {

const dctDataType_t kTypes[] = {dctFloat32, dctFloat64, dctFloat16, dctBFloat16};
const dctAlgorithm_t kAlgorithms[] = {dctAlgoAuto, dctAlgoAllgather, dctAlgoSplit, dctAlgoDense,
                                      dctAlgoRecursiveDoubling};

struct Coo {
  std::vector<uint32_t> idx;
  std::vector<char> val;  // nnz values of the datatype
};

// Rank r's input: rank 1 empty, rank 0 about half the positions, the
// others a few; integer values (exact in any summation order) or real ones.
// `sparse`: every rank but 1 about 1% (split sums such ranges as the
// pieces' union, not merged dense).
Coo makeInput(int rank, size_t count, dctDataType_t t, bool integers, bool sparse = false) {
  Coo in;
  if (rank == 1) return in;
  std::mt19937_64 rng(1234 + 17 * rank + count);
  std::uniform_real_distribution<double> u(0, 1);
  const double p = sparse ? 0.006 + 0.002 * rank : rank == 0 ? 0.5 : 0.01 + 0.05 * rank;
  for (size_t i = 0; i < count; i++)
    if (u(rng) < p) in.idx.push_back(static_cast<uint32_t>(i));
  in.val.resize(in.idx.size() * typeSize(t));
  std::uniform_int_distribution<int> small(-4, 4);
  std::normal_distribution<double> normal(0, 1);
  for (size_t j = 0; j < in.idx.size(); j++)
    store(t, in.val.data() + j * typeSize(t), integers ? small(rng) : normal(rng));
  return in;
}

// The documented sum: every rank's values in rank order from +0, in fp32
// (fp64 for fp64), rounded once to the datatype.
std::vector<char> reference(const std::vector<Coo>& all, size_t count, dctDataType_t t) {
  std::vector<double> acc(count, 0.0);
  for (const Coo& in : all)
    for (size_t j = 0; j < in.idx.size(); j++) {
      const double v = load(t, in.val.data() + j * typeSize(t));
      double& a = acc[in.idx[j]];
      a = t == dctFloat64 ? a + v : static_cast<double>(static_cast<float>(a) + static_cast<float>(v));
    }
  std::vector<char> out(count * typeSize(t));
  for (size_t i = 0; i < count; i++) store(t, out.data() + i * typeSize(t), acc[i]);
  return out;
}

// Every rank's input, made locally (inputs are a function of rank alone).
std::vector<Coo> everyInput(int size, size_t count, dctDataType_t t, bool integers, bool sparse = false) {
  std::vector<Coo> all;
  for (int r = 0; r < size; r++) all.push_back(makeInput(r, count, t, integers, sparse));
  return all;
}

// The dense algorithm sums in the transport's order, recursive doubling in
// pairs: the others give the rank-order sum's bits on any values.
bool sumsInRankOrder(int algorithm) { return algorithm != dctAlgoDense && algorithm != dctAlgoRecursiveDoubling; }

void checkCall(const World& w, size_t count, dctDataType_t t, dctAlgorithm_t algo, bool integers, bool sparse = false) {
  CAPTURE(count);
  CAPTURE(static_cast<int>(t));
  CAPTURE(static_cast<int>(algo));
  CAPTURE(integers);
  CAPTURE(sparse);
  const size_t es = typeSize(t);
  const std::vector<Coo> all = everyInput(w.size, count, t, integers, sparse);
  const Coo& mine = all[w.rank];
  size_t bound = 0;
  REQUIRE(dctSparseInputAllreduce(mine.idx.data(), mine.val.data(), mine.idx.size(), count, t, dctSum, algo, nullptr,
                                  nullptr, nullptr, 0, &bound, nullptr, w.comm, nullptr) == dctSuccess);
  size_t total = 0;
  for (const Coo& in : all) total += in.idx.size();
  CHECK(bound == std::min(total, count));

  std::vector<char> dense(count * es, 0x5a);
  std::vector<uint32_t> idx(bound + 1, 0xdeadbeef);
  std::vector<char> val((bound + 1) * es, 0x5a);
  size_t nnz = 0;
  dctSparseInputInfo_t info{};
  REQUIRE(dctSparseInputAllreduce(mine.idx.data(), mine.val.data(), mine.idx.size(), count, t, dctSum, algo,
                                  dense.data(), idx.data(), val.data(), bound + 1, &nnz, &info, w.comm,
                                  nullptr) == dctSuccess);
  if (algo != dctAlgoAuto) CHECK(info.algorithm == algo);
  CHECK(info.inputNnz == total);
  CHECK(info.resultNnz == nnz);
  // Integers sum to the same bits in any order.
  auto inRankOrder = [&](int a) { return integers || sumsInRankOrder(a); };
  const bool exact = inRankOrder(info.algorithm);
  const std::vector<char> ref = reference(all, count, t);
  if (exact) CHECK(std::memcmp(dense.data(), ref.data(), ref.size()) == 0);
  CHECK(identicalOnAllRanks(dense.data(), dense.size()));
  // The COO lists exactly the sum's nonzeros, with the dense result's values.
  size_t expected = 0;
  for (size_t i = 0; i < count; i++) {
    const double v = load(t, dense.data() + i * es);
    if (v == 0) continue;
    REQUIRE(expected < nnz);
    CHECK(idx[expected] == i);
    CHECK(std::memcmp(val.data() + expected * es, dense.data() + i * es, es) == 0);
    expected++;
  }
  CHECK(nnz == expected);
  CHECK(idx[nnz] == 0xdeadbeef);  // nothing past the COO
  CHECK(identicalOnAllRanks(idx.data(), nnz * sizeof(uint32_t)));

  // The COO alone, and the dense result alone, give the same.
  std::vector<char> denseOnly(count * es, 0x33);
  REQUIRE(dctSparseInputAllreduce(mine.idx.data(), mine.val.data(), mine.idx.size(), count, t, dctSum, algo,
                                  denseOnly.data(), nullptr, nullptr, 0, &nnz, nullptr, w.comm, nullptr) == dctSuccess);
  if (exact) CHECK(denseOnly == dense);
  std::vector<uint32_t> idx2(bound + 1, 0);
  std::vector<char> val2((bound + 1) * es, 0);
  dctSparseInputInfo_t info2{};
  const dctResult_t cooOnly = dctSparseInputAllreduce(mine.idx.data(), mine.val.data(), mine.idx.size(), count, t, dctSum,
                                                      algo, nullptr, idx2.data(), val2.data(), bound + 1, &nnz, &info2,
                                                      w.comm, nullptr);
  INFO(std::string(dctGetLastError(w.comm)));
  REQUIRE(cooOnly == dctSuccess);
  CHECK(nnz == expected);
  // auto may plan the COO alone otherwise (it prices the COO's own passes).
  if (exact && inRankOrder(info2.algorithm)) {
    CHECK(std::memcmp(idx2.data(), idx.data(), nnz * sizeof(uint32_t)) == 0);
    CHECK(std::memcmp(val2.data(), val.data(), nnz * es) == 0);
  }
}

}  // namespace

TEST_CASE("every algorithm and datatype gives the rank-order sum, dense and as COO, on every rank") {
  World w;
  for (size_t count : {size_t(1), size_t(3), size_t(11), size_t(100003)})
    for (dctDataType_t t : kTypes)
      for (dctAlgorithm_t algo : kAlgorithms)
        for (bool integers : {true, false}) checkCall(w, count, t, algo, integers);
}

TEST_CASE("sparse inputs: split's ranges summed as unions give the rank-order sum") {
  World w;
  for (size_t count : {size_t(100003), size_t(1000003)})
    for (dctDataType_t t : kTypes)
      for (dctAlgorithm_t algo : {dctAlgoSplit, dctAlgoAllgather})
        for (bool integers : {true, false}) checkCall(w, count, t, algo, integers, true);
}

TEST_CASE("dctAvg divides the sum by the rank count; NaN reaches every rank") {
  World w;
  const size_t count = 1001;
  const std::vector<Coo> all = everyInput(w.size, count, dctFloat32, false);
  std::vector<float> sum(count), avg(count);
  size_t nnz = 0;
  for (dctAlgorithm_t algo : kAlgorithms) {
    const Coo& mine = all[w.rank];
    REQUIRE(dctSparseInputAllreduce(mine.idx.data(), mine.val.data(), mine.idx.size(), count, dctFloat32, dctSum,
                                    algo, sum.data(), nullptr, nullptr, 0, &nnz, nullptr, w.comm, nullptr) == dctSuccess);
    REQUIRE(dctSparseInputAllreduce(mine.idx.data(), mine.val.data(), mine.idx.size(), count, dctFloat32, dctAvg,
                                    algo, avg.data(), nullptr, nullptr, 0, &nnz, nullptr, w.comm, nullptr) == dctSuccess);
    for (size_t i = 0; i < count; i++) CHECK(avg[i] == doctest::Approx(sum[i] / w.size).epsilon(1e-6));
    CHECK(identicalOnAllRanks(avg.data(), count * sizeof(float)));
  }
  // The COO alone (split: from the gathered ranges, packed and, where every
  // rank fills them, dense) lists the averaged dense result's nonzeros.
  for (size_t n : {count, size_t(13)})
    for (dctAlgorithm_t algo : kAlgorithms) {
      CAPTURE(n);
      CAPTURE(static_cast<int>(algo));
      Coo mine = all[w.rank];
      if (n == 13) {  // every entry on every rank: the ranges travel dense
        mine.idx.resize(n);
        mine.val.resize(n * sizeof(float));
        for (uint32_t i = 0; i < n; i++) {
          const float v = 0.1f * static_cast<float>(i + 1) + static_cast<float>(w.rank);
          mine.idx[i] = i;
          std::memcpy(mine.val.data() + i * sizeof(float), &v, sizeof(float));
        }
      }
      std::vector<float> dense(n);
      dctSparseInputInfo_t denseInfo{}, cooInfo{};
      REQUIRE(dctSparseInputAllreduce(mine.idx.data(), mine.val.data(), mine.idx.size(), n, dctFloat32, dctAvg, algo,
                                      dense.data(), nullptr, nullptr, 0, &nnz, &denseInfo, w.comm,
                                      nullptr) == dctSuccess);
      std::vector<uint32_t> outIdx(n + 1, 0xdeadbeef);
      std::vector<float> outVal(n + 1, 0);
      REQUIRE(dctSparseInputAllreduce(mine.idx.data(), mine.val.data(), mine.idx.size(), n, dctFloat32, dctAvg, algo,
                                      nullptr, outIdx.data(), outVal.data(), n, &nnz, &cooInfo, w.comm,
                                      nullptr) == dctSuccess);
      // Auto may plan the COO alone otherwise (it prices the COO's own
      // passes, against a link probe that moves with the machine's load):
      // the same bits where both plans sum in rank order.
      const bool sameBits = sumsInRankOrder(denseInfo.algorithm) && sumsInRankOrder(cooInfo.algorithm);
      CAPTURE(denseInfo.algorithm);
      CAPTURE(cooInfo.algorithm);
      size_t expected = 0;
      for (size_t i = 0; i < n; i++) {
        if (dense[i] == 0) continue;
        REQUIRE(expected < nnz);
        CHECK(outIdx[expected] == i);
        if (sameBits) CHECK(std::memcmp(&outVal[expected], &dense[i], sizeof(float)) == 0);
        else CHECK(outVal[expected] == doctest::Approx(dense[i]).epsilon(1e-6));
        expected++;
      }
      CHECK(nnz == expected);
      CHECK(outIdx[nnz] == 0xdeadbeef);
    }
  // The last rank puts a NaN at 7: every rank's result has it, dense and COO.
  for (dctAlgorithm_t algo : kAlgorithms) {
    std::vector<uint32_t> idx = {7};
    std::vector<float> val = {w.rank == w.size - 1 ? NAN : 1.0f};
    std::vector<float> dense(count, 5.0f);
    std::vector<uint32_t> outIdx(4, 0);
    std::vector<float> outVal(4, 0);
    REQUIRE(dctSparseInputAllreduce(idx.data(), val.data(), 1, count, dctFloat32, dctSum, algo, dense.data(),
                                    outIdx.data(), outVal.data(), 4, &nnz, nullptr, w.comm, nullptr) == dctSuccess);
    CHECK(std::isnan(dense[7]));
    CHECK(dense[6] == 0.0f);
    REQUIRE(nnz == 1);
    CHECK(outIdx[0] == 7);
    CHECK(std::isnan(outVal[0]));
  }
}

TEST_CASE("bad input, a short COO buffer or disagreeing ranks fail every rank and write nothing") {
  World w;
  const size_t count = 101;
  std::vector<uint32_t> idx = {3, 9, 50};
  std::vector<float> val = {1, 2, 3};
  std::vector<float> dense(count, 7.0f);
  std::vector<uint32_t> outIdx(count, 9);
  std::vector<float> outVal(count, 7.0f);
  size_t nnz = 0;
  auto call = [&](const void* i, const void* v, size_t n, size_t cnt, int type, int op, int algo, size_t capacity) {
    return dctSparseInputAllreduce(i, v, n, cnt, static_cast<dctDataType_t>(type), static_cast<dctRedOp_t>(op),
                                   static_cast<dctAlgorithm_t>(algo), dense.data(), outIdx.data(), outVal.data(),
                                   capacity, &nnz, nullptr, w.comm, nullptr);
  };
  const bool last = w.rank == w.size - 1;  // the rank that goes wrong
  std::vector<uint32_t> unsorted = {9, 3, 50}, duplicate = {3, 9, 9}, outOfRange = {3, 9, 101};
  struct Case {
    const char* what;
    dctResult_t res;
  };
  const Case cases[] = {
      {"unsorted", call(last ? unsorted.data() : idx.data(), val.data(), 3, count, 0, 0, 0, count)},
      {"duplicate", call(last ? duplicate.data() : idx.data(), val.data(), 3, count, 0, 0, 0, count)},
      {"index >= count", call(last ? outOfRange.data() : idx.data(), val.data(), 3, count, 0, 0, 0, count)},
      {"NULL indices", call(last ? nullptr : idx.data(), val.data(), 3, count, 0, 0, 0, count)},
      {"misaligned values", call(idx.data(), last ? static_cast<const void*>(reinterpret_cast<const char*>(val.data()) + 1) : val.data(), 3, count,
                                 0, 0, 0, count)},
      {"nnz > count", call(idx.data(), val.data(), 3, last ? 2 : count, 0, 0, 0, count)},
      // One rank alone never disagrees: these repeat a bad case there.
      {"count differs", call(idx.data(), val.data(), 3, last && w.size > 1 ? count + 1 : 2, 0, 0, 0, count)},
      {"bad datatype", call(idx.data(), val.data(), 3, count, last ? 9 : 0, 0, 0, count)},
      {"bad op", call(idx.data(), val.data(), 3, count, 0, last ? 5 : 0, 0, count)},
      {"bad algorithm", call(idx.data(), val.data(), 3, count, 0, 0, last ? 4 : 0, count)},
      {"algorithm differs",
       call(idx.data(), val.data(), 3, w.size > 1 ? count : 2, 0, 0, last ? dctAlgoDense : dctAlgoSplit, count)},
      {"COO too short", call(idx.data(), val.data(), 3, count, 0, 0, dctAlgoAllgather, last ? 2 : count)},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    CHECK(c.res != dctSuccess);
    CHECK(allTrue(c.res != dctSuccess));
    CHECK(std::strlen(dctGetLastError(w.comm)) > 0);
  }
  CHECK(std::count(dense.begin(), dense.end(), 7.0f) == static_cast<long>(count));
  CHECK(std::count(outIdx.begin(), outIdx.end(), 9u) == static_cast<long>(count));
  CHECK(std::count(outVal.begin(), outVal.end(), 7.0f) == static_cast<long>(count));
  // And the comm still works.
  REQUIRE(call(idx.data(), val.data(), 3, count, 0, 0, 0, count) == dctSuccess);
  CHECK(dense[9] == 2.0f * w.size);
  CHECK(nnz == 3);
}
