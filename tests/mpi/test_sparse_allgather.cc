// dctSparseAllgather under mpirun: variable (and zero) counts per rank, the
// two-phase query, and rejection of bad input on every rank before writing.
#include <random>

#include "mpi_util.h"

using namespace dcttest;

namespace {

const size_t kCount = 100003;

// Rank r contributes 37*r entries (rank 0 none), indices may repeat.
template <typename T>
void makeInput(int rank, std::vector<uint32_t>& idx, std::vector<T>& val) {
  std::mt19937_64 rng(77 + rank);
  std::uniform_int_distribution<uint32_t> pos(0, kCount - 1);
  idx.resize(37 * rank);
  val.resize(idx.size());
  for (size_t j = 0; j < idx.size(); j++) {
    idx[j] = pos(rng);
    val[j] = static_cast<T>(rank * 1000 + j);
  }
}

template <typename T>
void checkGather() {
  World w;
  const dctDataType_t dt = sizeof(T) == 8 ? dctFloat64 : dctFloat32;
  std::vector<uint32_t> idx;
  std::vector<T> val;
  makeInput(w.rank, idx, val);
  std::vector<size_t> counts(w.size, 999);
  size_t total = 0;
  REQUIRE(dctSparseAllgather(val.data(), idx.data(), idx.size(), kCount, nullptr, nullptr, 0,
                             counts.data(), &total, dt, w.comm, nullptr) == dctSuccess);
  size_t expected = 0;
  for (int r = 0; r < w.size; r++) {
    CHECK(counts[r] == size_t(37 * r));
    expected += 37 * r;
  }
  CHECK(total == expected);
  std::vector<uint32_t> gotIdx(total + 1, 0xdeadbeef);
  std::vector<T> gotVal(total + 1, T(-1));
  REQUIRE(dctSparseAllgather(val.data(), idx.data(), idx.size(), kCount, gotVal.data(),
                             gotIdx.data(), total + 1, counts.data(), &total, dt, w.comm,
                             nullptr) == dctSuccess);
  std::vector<uint32_t> refIdx;
  std::vector<T> refVal;
  gatherMessages(idx, val, idx.size(), refIdx, refVal);
  REQUIRE(refIdx.size() == total);
  for (size_t j = 0; j < total; j++) {
    REQUIRE(gotIdx[j] == refIdx[j]);
    REQUIRE(gotVal[j] == refVal[j]);
  }
  CHECK(gotIdx[total] == 0xdeadbeef);
  CHECK(identicalOnAllRanks(gotIdx.data(), total * sizeof(uint32_t)));
}

}  // namespace

TEST_CASE("gathers variable and empty contributions in rank order") {
  checkGather<float>();
  checkGather<double>();
}

TEST_CASE("an out-of-range index on one rank fails every rank, nothing written") {
  World w;
  const int bad = w.size - 1;
  std::vector<uint32_t> idx = {1, 2, 3};
  std::vector<float> val = {1, 2, 3};
  if (w.rank == bad) idx[1] = kCount;  // one past the end
  std::vector<uint32_t> gotIdx(64, 7);
  std::vector<float> gotVal(64, 7.0f);
  std::vector<size_t> counts(w.size, 5);
  size_t total = 5;
  dctResult_t res = dctSparseAllgather(val.data(), idx.data(), 3, kCount, gotVal.data(),
                                       gotIdx.data(), 64, counts.data(), &total, dctFloat32,
                                       w.comm, nullptr);
  CHECK(res == (w.rank == bad ? dctInvalidArgument : dctInvalidUsage));
  CHECK(std::strlen(dctGetLastError(w.comm)) > 0);
  for (size_t j = 0; j < 64; j++) REQUIRE((gotIdx[j] == 7 && gotVal[j] == 7.0f));
  CHECK(total == 5);
  // The comm still works afterwards.
  idx[1] = 2;
  CHECK(dctSparseAllgather(val.data(), idx.data(), 3, kCount, gotVal.data(), gotIdx.data(), 64,
                           counts.data(), &total, dctFloat32, w.comm, nullptr) == dctSuccess);
  CHECK(total == size_t(3 * w.size));
}

TEST_CASE("too little receive capacity on one rank fails every rank") {
  World w;
  std::vector<uint32_t> idx = {4, 5};
  std::vector<float> val = {1, 2};
  std::vector<uint32_t> gotIdx(64, 7);
  std::vector<float> gotVal(64, 7.0f);
  std::vector<size_t> counts(w.size);
  size_t total = 0;
  size_t capacity = w.rank == 0 ? 1 : 64;
  dctResult_t res = dctSparseAllgather(val.data(), idx.data(), 2, 10, gotVal.data(), gotIdx.data(),
                                       capacity, counts.data(), &total, dctFloat32, w.comm, nullptr);
  CHECK(res == (w.rank == 0 ? dctInvalidArgument : dctInvalidUsage));
  for (size_t j = 0; j < 64; j++) REQUIRE(gotIdx[j] == 7);
}

TEST_CASE("query on one rank and fetch on another is refused everywhere") {
  World w;
  if (w.size == 1) return;
  std::vector<uint32_t> idx = {4};
  std::vector<float> val = {1};
  std::vector<uint32_t> gotIdx(64);
  std::vector<float> gotVal(64);
  std::vector<size_t> counts(w.size);
  size_t total = 0;
  bool query = w.rank == 0;
  dctResult_t res = dctSparseAllgather(val.data(), idx.data(), 1, 10, query ? nullptr : gotVal.data(),
                                       query ? nullptr : gotIdx.data(), 64, counts.data(), &total,
                                       dctFloat32, w.comm, nullptr);
  CHECK(res == dctInvalidUsage);
}
