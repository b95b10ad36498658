// DCT_TUNE fixes auto's choice by tensor size and density, on every rank
// alike; steps no rule covers stay auto's, an explicit algorithm is never
// overridden, and a malformed string refuses the comm on every rank.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mpi_util.h"

using namespace dcttest;

namespace {

constexpr const char* kRules = "0-8K:dense,8K-@-0.05:split,8K-1M@0.05-:allgather";

// dctCommInitMpi with DCT_TUNE set on every rank.
dctComm_t tunedComm(const char* rules) {
  setenv("DCT_TUNE", rules, 1);
  dctComm_t comm = nullptr;
  const dctResult_t res = dctCommInitMpi(MPI_COMM_WORLD, &comm);
  unsetenv("DCT_TUNE");
  REQUIRE(res == dctSuccess);
  return comm;
}

// The algorithm two steps of an n-element fp32 tensor ran, checking that
// every rank holds the same sum.
int algorithmRun(dctComm_t comm, size_t n, double density, dctAlgorithm_t configured, int autoGlobalTopk = 0) {
  Settings s;
  s.density = density;
  s.algorithm = configured;
  dctConfig_t cfg = explicitConfig(s);
  cfg.autoGlobalTopk = autoGlobalTopk;
  dctCompressor_t c = nullptr;
  REQUIRE(dctCompressorCreate(comm, n, dctFloat32, &cfg, &c) == dctSuccess);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::vector<float> in(n), out(n);
  for (size_t i = 0; i < n; i++) in[i] = static_cast<float>((i * 7919 + 31 * rank) % 1009) - 504.0f;
  for (int step = 0; step < 2; step++)
    REQUIRE(dctSparseAllreduce(in.data(), out.data(), n, dctFloat32, dctSum, c, comm, nullptr) == dctSuccess);
  CHECK(identicalOnAllRanks(out.data(), n * sizeof(float)));
  dctStats_t stats{};
  dctCompressorGetStats(c, &stats);
  dctCompressorDestroy(c);
  return stats.algorithm;
}

}  // namespace

TEST_CASE("the first rule covering a step's size and density decides auto's algorithm") {
  dctComm_t comm = tunedComm(kRules);
  CHECK(algorithmRun(comm, 1000, 0.01, dctAlgoAuto) == dctAlgoDense);           // 4000 bytes
  CHECK(algorithmRun(comm, 100003, 0.01, dctAlgoAuto) == dctAlgoSplit);         // 400 KB, 1%
  CHECK(algorithmRun(comm, 100003, 0.1, dctAlgoAuto) == dctAlgoAllgather);      // 400 KB, 10%
  CHECK(algorithmRun(comm, 1000, 0.01, dctAlgoAllgather) == dctAlgoAllgather);  // explicit wins
  dctCommDestroy(comm);
}

TEST_CASE("a step no rule covers is auto's") {
  dctComm_t comm = tunedComm("0-8K:dense");
  const int chosen = algorithmRun(comm, 300007, 0.01, dctAlgoAuto);
  CHECK((chosen == dctAlgoAllgather || chosen == dctAlgoDense || chosen == dctAlgoSplit));
  dctCommDestroy(comm);
}

TEST_CASE("the sparse-input allreduce's auto follows the rules, by the ranks' mean density") {
  dctComm_t comm = tunedComm("*@-0.5:split,*@0.5-:dense");
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const size_t n = 1001;
  std::vector<uint32_t> idx;
  std::vector<float> val;
  for (uint32_t i = rank; i < n; i += 10) {
    idx.push_back(i);
    val.push_back(1.0f + static_cast<float>(i));
  }
  std::vector<float> dense(n);
  dctSparseInputInfo_t info{};
  size_t outNnz = 0;
  const dctResult_t res = dctSparseInputAllreduce(idx.data(), val.data(), idx.size(), n, dctFloat32, dctSum,
                                                  dctAlgoAuto, dense.data(), nullptr, nullptr, 0, &outNnz, &info,
                                                  comm, nullptr);
  const std::string why = dctGetLastError(comm);
  CAPTURE(why);
  REQUIRE(res == dctSuccess);
  CHECK(info.algorithm == (size == 1 ? dctAlgoAllgather : dctAlgoSplit));
  CHECK(identicalOnAllRanks(dense.data(), n * sizeof(float)));
  dctCommDestroy(comm);
}

TEST_CASE("a rule naming globaltopk is auto's pick only where the config opts in") {
  dctComm_t comm = tunedComm("*:globaltopk");
  // autoGlobalTopk = 0: the rule cannot change the result; the model decides.
  const int chosen = algorithmRun(comm, 100003, 0.01, dctAlgoAuto, 0);
  CHECK(chosen != dctAlgoGlobalTopk);
  CHECK((chosen == dctAlgoAllgather || chosen == dctAlgoDense || chosen == dctAlgoSplit));
  CHECK(algorithmRun(comm, 100003, 0.01, dctAlgoAuto, 1) == dctAlgoGlobalTopk);
  dctCommDestroy(comm);
}

TEST_CASE("a rule naming globaltopk never reaches the lossless sparse-input allreduce (fp32, fp16)") {
  dctComm_t comm = tunedComm("*:globaltopk");
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const size_t n = 1000;
  // Each rank gives 1.0 at its own index: the sum is 1.0 at 0..size-1.
  const uint32_t idx = static_cast<uint32_t>(rank);
  for (dctDataType_t dtype : {dctFloat32, dctFloat16}) {
    CAPTURE(static_cast<int>(dtype));
    const uint16_t oneHalf = 0x3c00;
    const float oneFloat = 1.0f;
    const void* value = dtype == dctFloat16 ? static_cast<const void*>(&oneHalf) : &oneFloat;
    const size_t bytes = dtype == dctFloat16 ? 2 : 4;
    std::vector<unsigned char> dense(n * bytes, 0xff), expected(n * bytes, 0);
    for (int r = 0; r < size; r++) std::memcpy(&expected[r * bytes], value, bytes);
    std::vector<uint32_t> outIdx(n);
    std::vector<unsigned char> outVal(n * bytes);
    dctSparseInputInfo_t info{};
    size_t outNnz = 0;
    const dctResult_t res = dctSparseInputAllreduce(&idx, value, 1, n, dtype, dctSum, dctAlgoAuto, dense.data(),
                                                    outIdx.data(), outVal.data(), n, &outNnz, &info, comm, nullptr);
    const std::string why = dctGetLastError(comm);
    CAPTURE(why);
    REQUIRE(res == dctSuccess);
    CHECK(info.algorithm != dctAlgoGlobalTopk);
    CHECK(std::memcmp(dense.data(), expected.data(), n * bytes) == 0);
    REQUIRE(outNnz == static_cast<size_t>(size));
    for (int r = 0; r < size; r++) {
      CHECK(outIdx[r] == static_cast<uint32_t>(r));
      CHECK(std::memcmp(&outVal[r * bytes], value, bytes) == 0);
    }
  }
  dctCommDestroy(comm);
}

TEST_CASE("a malformed DCT_TUNE refuses the comm on every rank, saying what is wrong") {
  setenv("DCT_TUNE", "0-256K:fast", 1);
  dctComm_t comm = nullptr;
  const dctResult_t res = dctCommInitMpi(MPI_COMM_WORLD, &comm);
  unsetenv("DCT_TUNE");
  CHECK(res == dctInvalidArgument);
  CHECK(comm == nullptr);
  CHECK(std::strstr(dctGetLastError(nullptr), "DCT_TUNE='0-256K:fast'") != nullptr);
}
