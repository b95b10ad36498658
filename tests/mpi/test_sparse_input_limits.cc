// dctSparseInputAllreduce at sizes past memory: hashed 64-bit feature ids
// give counts like 2^62, where count x element size wraps size_t. Every
// rank fails with a clear error (never a short buffer and a crash), the
// size query still answers, and the next ordinary call is exact.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fault_util.h"
#include "mpi_util.h"

using namespace dcttest;

namespace {

// A COO-only call over `count` (> 2^32: 64-bit indices): each rank gives one
// entry, at its own index far apart.
dctResult_t cooOnly(dctComm_t comm, size_t count, dctDataType_t dtype, dctAlgorithm_t algo, size_t* outNnz) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const uint64_t idx = (static_cast<uint64_t>(rank) << 40) + 5;
  const double value[1] = {1.0};  // 8 bytes: room for any datatype's 1 entry
  std::vector<uint64_t> outIdx(16, 7);
  std::vector<double> outVal(16, 3.0);
  const dctResult_t res = dctSparseInputAllreduce(&idx, value, 1, count, dtype, dctSum, algo, nullptr, outIdx.data(),
                                                  outVal.data(), outIdx.size(), outNnz, nullptr, comm, nullptr);
  for (uint64_t i : outIdx) CHECK(i == 7u);  // a failed call writes nothing
  return res;
}

// An ordinary call after the failures: the exact sum, every rank alike.
void ordinaryCallIsExact(dctComm_t comm) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const size_t n = 100;
  const uint32_t idx = static_cast<uint32_t>(rank);
  const float one = 1.0f;
  std::vector<float> dense(n, 5.0f);
  size_t outNnz = 0;
  REQUIRE(dctSparseInputAllreduce(&idx, &one, 1, n, dctFloat32, dctSum, dctAlgoAuto, dense.data(), nullptr, nullptr, 0,
                                  &outNnz, nullptr, comm, nullptr) == dctSuccess);
  for (size_t i = 0; i < n; i++) CHECK(dense[i] == (i < static_cast<size_t>(size) ? 1.0f : 0.0f));
}

}  // namespace

TEST_CASE("a count whose bytes wrap size_t fails every rank with dctInvalidArgument, nothing written") {
  World w;
  const size_t huge = size_t(1) << 62;
  for (dctDataType_t dtype : {dctFloat32, dctFloat64, dctFloat16, dctBFloat16})
    for (dctAlgorithm_t algo : {dctAlgoAuto, dctAlgoAllgather, dctAlgoSplit, dctAlgoDense}) {
      CAPTURE(static_cast<int>(dtype));
      CAPTURE(static_cast<int>(algo));
      size_t outNnz = 12345;
      const dctResult_t res = cooOnly(w.comm, huge, dtype, algo, &outNnz);
      const std::string why = dctGetLastError(w.comm);
      CAPTURE(why);
      CHECK(allRanksAgree(res == dctSuccess));
      CHECK(res == dctInvalidArgument);
      CHECK(outNnz == 12345u);
      CHECK(!why.empty());
    }
  ordinaryCallIsExact(w.comm);
}

TEST_CASE("a count whose bytes fit but cannot be had fails every rank with dctOutOfMemory") {
  World w;
  const size_t large = size_t(1) << 50;  // 4 PiB of fp32: past any address space
  size_t outNnz = 12345;
  const dctResult_t res = cooOnly(w.comm, large, dctFloat32, dctAlgoAuto, &outNnz);
  const std::string why = dctGetLastError(w.comm);
  CAPTURE(why);
  CHECK(allRanksAgree(res == dctSuccess));
  CHECK(res != dctSuccess);
  // Every rank ran out itself; its own message says which buffer.
  CHECK(res == dctOutOfMemory);
  CHECK(why.find("memory") != std::string::npos);
  CHECK(outNnz == 12345u);
  ordinaryCallIsExact(w.comm);
}

TEST_CASE("the size query of a huge count answers, and its dense bytes saturate") {
  World w;
  const size_t huge = size_t(1) << 62;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const uint64_t idx = (static_cast<uint64_t>(rank) << 40) + 5;
  const float one = 1.0f;
  size_t outNnz = 0;
  dctSparseInputInfo_t info{};
  REQUIRE(dctSparseInputAllreduce(&idx, &one, 1, huge, dctFloat32, dctSum, dctAlgoAuto, nullptr, nullptr, nullptr, 0,
                                  &outNnz, &info, w.comm, nullptr) == dctSuccess);
  CHECK(outNnz == static_cast<size_t>(w.size));
  CHECK(info.denseBytes == UINT64_MAX);
}
