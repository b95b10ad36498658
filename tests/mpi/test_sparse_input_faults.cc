// dctSparseInputAllreduce under injected faults: whatever transport
// operation fails, on one rank or on all, and whichever scratch allocation
// fails on one rank, every rank returns an error, the caller's buffers are
// untouched, and the retry gives exactly the clean result. The dense-only
// calls too, whose sum once lived in the caller's buffer during the call.
#include <doctest/doctest.h>
#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "core/compressor.h"
#include "fault_util.h"
#include "mpi_util.h"
#include "transport/comm.h"
#include "transport/fault_injection.h"

using namespace dcttest;

namespace {

constexpr size_t kCount = 2003;

struct Result {
  std::vector<float> dense;
  std::vector<uint32_t> idx;
  std::vector<float> val;
  size_t nnz = 0;
  int failedCalls = 0;
};

// Rank 1 (if any) gives nothing; the others a few hundred entries.
void input(int rank, std::vector<uint32_t>& idx, std::vector<float>& val) {
  idx.clear();
  val.clear();
  if (rank == 1) return;
  std::mt19937 rng(99 + rank);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (uint32_t i = rank; i < kCount; i += 7 + rank) {
    idx.push_back(i);
    val.push_back(dist(rng));
  }
}

// One call with dense and COO results (or the COO alone), retried until it
// succeeds; every failed attempt fails every rank and leaves the caller's
// buffers as they were.
Result run(dctComm_t comm, dctAlgorithm_t algo, bool withDense = true) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  REQUIRE(resetGatherSlots(comm));  // the same operations on every run
  std::vector<uint32_t> idx;
  std::vector<float> val;
  input(rank, idx, val);
  Result r;
  r.dense.assign(kCount, 3.0f);
  r.idx.assign(kCount, 7u);
  r.val.assign(kCount, 3.0f);
  for (int attempt = 0;; attempt++) {
    REQUIRE(attempt < 4);  // one armed fault: at most one retry
    const dctResult_t res = dctSparseInputAllreduce(idx.data(), val.data(), idx.size(), kCount, dctFloat32, dctSum, algo,
                                                    withDense ? r.dense.data() : nullptr, r.idx.data(), r.val.data(),
                                                    kCount, &r.nnz, nullptr, comm, nullptr);
    REQUIRE(allRanksAgree(res == dctSuccess));
    if (res == dctSuccess) break;
    CHECK(std::strlen(dctGetLastError(comm)) > 0);
    CHECK(std::count(r.dense.begin(), r.dense.end(), 3.0f) == static_cast<long>(kCount));
    CHECK(std::count(r.idx.begin(), r.idx.end(), 7u) == static_cast<long>(kCount));
    r.failedCalls++;
    // A rank with fewer operations than the armed one still holds its fault:
    // the retry runs clean.
    if (comm->faultSeam) dct::disarmFault(comm);
  }
  return r;
}

void requireSame(const Result& a, const Result& b, bool dense = true) {
  REQUIRE(a.nnz == b.nnz);
  if (dense) REQUIRE(std::memcmp(a.dense.data(), b.dense.data(), kCount * sizeof(float)) == 0);
  REQUIRE(std::memcmp(a.idx.data(), b.idx.data(), a.nnz * sizeof(uint32_t)) == 0);
  REQUIRE(std::memcmp(a.val.data(), b.val.data(), a.nnz * sizeof(float)) == 0);
}

const dctAlgorithm_t kAlgorithms[] = {dctAlgoAllgather, dctAlgoSplit, dctAlgoDense, dctAlgoRecursiveDoubling};

// A dense-only result (fp32 or fp16), retried until it succeeds; every
// failed attempt fails every rank and leaves `dense` bit for bit as it was.
std::vector<unsigned char> runDense(dctComm_t comm, dctAlgorithm_t algo, dctDataType_t dtype, int* failedCalls) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  REQUIRE(resetGatherSlots(comm));  // the same operations on every run
  std::vector<uint32_t> idx;
  std::vector<float> val;
  input(rank, idx, val);
  const size_t bytes = dtype == dctFloat16 ? 2 : 4;
  std::vector<uint16_t> half(val.size(), 0x3c00);  // 1.0: exact in any rank order
  const void* values = dtype == dctFloat16 ? static_cast<const void*>(half.data()) : val.data();
  std::vector<unsigned char> dense(kCount * bytes);
  for (size_t i = 0; i < dense.size(); i++) dense[i] = static_cast<unsigned char>(i * 37 + 11);
  const std::vector<unsigned char> before = dense;
  *failedCalls = 0;
  for (int attempt = 0;; attempt++) {
    REQUIRE(attempt < 4);
    size_t nnz = 0;
    const dctResult_t res = dctSparseInputAllreduce(idx.data(), values, idx.size(), kCount, dtype, dctSum, algo,
                                                    dense.data(), nullptr, nullptr, 0, &nnz, nullptr, comm, nullptr);
    REQUIRE(allRanksAgree(res == dctSuccess));
    if (res == dctSuccess) break;
    CHECK(std::memcmp(dense.data(), before.data(), dense.size()) == 0);
    ++*failedCalls;
    if (comm->faultSeam) dct::disarmFault(comm);
  }
  return dense;
}

// A CPU twin whose n-th conversion (counted from arming) fails on this rank.
int convertsLeft = -1;

dctResult_t failingConvert(dct::KernelContext* ctx, void* dst, dctDataType_t dstType, const void* src,
                           dctDataType_t srcType, size_t n, double factor, void* stream) {
  if (convertsLeft == 0) {
    convertsLeft = -1;
    return dctInternalError;
  }
  if (convertsLeft > 0) convertsLeft--;
  return dct::cpuKernelOps().convert(ctx, dst, dstType, src, srcType, n, factor, stream);
}

const dct::KernelOps& failingConvertOps() {
  static const dct::KernelOps ops = [] {
    dct::KernelOps o = dct::cpuKernelOps();
    o.name = "cpu (failing conversions)";
    o.convert = failingConvert;
    return o;
  }();
  return ops;
}

}  // namespace

// Every transport op of a call, failed on each rank and on all, under every
// algorithm: the dense and COO results, or the COO alone.
static void everyTransportFault(World& w, bool withDense) {
  REQUIRE(dct::installFaultSeam(w.comm) == dctSuccess);
  for (dctAlgorithm_t algo : kAlgorithms) {
    const uint64_t before = dct::transportOps(w.comm);
    const Result clean = run(w.comm, algo, withDense);
    const std::vector<uint64_t> ops = opsOnEveryRank(dct::transportOps(w.comm) - before);
    REQUIRE(clean.failedCalls == 0);
    if (!withDense) requireSame(clean, run(w.comm, algo), false);  // the COO of the call with both
    for (uint64_t n = 0; n < mostOps(ops); n++)
      for (int victim = -1; victim < w.size; victim++) {
        CAPTURE(static_cast<int>(algo));
        CAPTURE(n);
        CAPTURE(victim);
        dct::armFault(w.comm, n, victim);
        const Result faulty = run(w.comm, algo, withDense);
        dct::disarmFault(w.comm);
        CHECK(faulty.failedCalls == (faultFires(ops, n, victim) ? 1 : 0));
        requireSame(clean, faulty);
      }
  }
}

TEST_CASE("a transport fault at any operation, on any rank or all, fails every rank and a retry is exact") {
  World w;
  everyTransportFault(w, true);
}

TEST_CASE("a COO-only result (split: from the gathered ranges): a transport fault fails every rank, a retry is exact") {
  World w;
  everyTransportFault(w, false);
}

TEST_CASE("an allocation failure on one rank fails every rank and a retry is exact") {
  World w;
  for (dctAlgorithm_t algo : kAlgorithms) {
    const Result clean = run(w.comm, algo);
    for (int victim = 0; victim < w.size; victim++)
      for (int n = 0; n < 8; n++) {
        CAPTURE(static_cast<int>(algo));
        CAPTURE(victim);
        CAPTURE(n);
        // Fresh buffers from a twin whose n-th allocation fails on the victim.
        REQUIRE(dct::bindOps(w.comm->sparseInput, failingOps(), "test", false) == dctSuccess);
        allocationsLeft = w.rank == victim ? n : -1;
        const Result faulty = run(w.comm, algo);
        allocationsLeft = -1;
        if (n == 0) CHECK(faulty.failedCalls == 1);  // fresh buffers: the first allocation always comes
        requireSame(clean, faulty);
      }
  }
}

TEST_CASE("a dense-only result: a transport fault after the ready step leaves the caller's buffer bit-identical") {
  World w;
  REQUIRE(dct::installFaultSeam(w.comm) == dctSuccess);
  for (dctDataType_t dtype : {dctFloat32, dctFloat16})
    for (dctAlgorithm_t algo : kAlgorithms) {
      CAPTURE(static_cast<int>(dtype));
      CAPTURE(static_cast<int>(algo));
      int failed = 0;
      const uint64_t before = dct::transportOps(w.comm);
      const std::vector<unsigned char> clean = runDense(w.comm, algo, dtype, &failed);
      const std::vector<uint64_t> ops = opsOnEveryRank(dct::transportOps(w.comm) - before);
      REQUIRE(failed == 0);
      for (uint64_t n = 0; n < mostOps(ops); n++)
        for (int victim = -1; victim < w.size; victim++) {
          CAPTURE(n);
          CAPTURE(victim);
          dct::armFault(w.comm, n, victim);
          const std::vector<unsigned char> faulty = runDense(w.comm, algo, dtype, &failed);
          dct::disarmFault(w.comm);
          CHECK(failed == (faultFires(ops, n, victim) ? 1 : 0));
          CHECK(faulty == clean);
        }
    }
}

TEST_CASE("a failed conversion of the result on one rank fails every rank, buffers untouched") {
  World w;
  for (dctDataType_t dtype : {dctFloat16, dctBFloat16})
    for (dctAlgorithm_t algo : kAlgorithms)
      for (int victim = 0; victim < w.size; victim++)
        for (int n = 0; n < 4; n++) {
          CAPTURE(static_cast<int>(dtype));
          CAPTURE(static_cast<int>(algo));
          CAPTURE(victim);
          CAPTURE(n);
          std::vector<uint32_t> idx;
          std::vector<float> val;
          input(w.rank, idx, val);
          std::vector<uint16_t> half(idx.size(), dtype == dctFloat16 ? 0x3c00 : 0x3f80);  // 1.0
          std::vector<uint16_t> dense(kCount, 0x1234), outVal(kCount, 0x4321);
          std::vector<uint32_t> outIdx(kCount, 7u);
          size_t nnz = 0;
          // The comm's scratch for this datatype, then its twin swapped.
          REQUIRE(dctSparseInputAllreduce(idx.data(), half.data(), idx.size(), kCount, dtype, dctSum, algo, nullptr,
                                          nullptr, nullptr, 0, &nnz, nullptr, w.comm, nullptr) == dctSuccess);
          std::vector<uint16_t> scratch(kCount);
          REQUIRE(dctSparseInputAllreduce(idx.data(), half.data(), idx.size(), kCount, dtype, dctSum, algo,
                                          scratch.data(), nullptr, nullptr, 0, &nnz, nullptr, w.comm,
                                          nullptr) == dctSuccess);
          REQUIRE(dct::bindOps(w.comm->sparseInput, failingConvertOps(), "test", false) == dctSuccess);
          convertsLeft = w.rank == victim ? n : -1;
          const dctResult_t res =
              dctSparseInputAllreduce(idx.data(), half.data(), idx.size(), kCount, dtype, dctSum, algo, dense.data(),
                                      outIdx.data(), outVal.data(), kCount, &nnz, nullptr, w.comm, nullptr);
          convertsLeft = -1;
          CHECK(allRanksAgree(res == dctSuccess));
          if (res != dctSuccess) {
            CHECK(std::count(dense.begin(), dense.end(), uint16_t(0x1234)) == static_cast<long>(kCount));
            CHECK(std::count(outIdx.begin(), outIdx.end(), 7u) == static_cast<long>(kCount));
            CHECK(std::count(outVal.begin(), outVal.end(), uint16_t(0x4321)) == static_cast<long>(kCount));
          }
        }
}
