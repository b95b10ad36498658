// The fixed-capacity step's asynchronous contract, run on the CPU twin made
// to report as a device twin does (StreamSetup::asyncForTesting): a step
// that fails after its call returned changes no rank's state and sets the
// comm's sticky error; every later step still runs its collectives (no rank
// waits) but changes nothing and returns the error; the compressors' saved
// states continue bit for bit on a new comm.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/compressor.h"
#include "dct/dct_mpi.h"
#include "mpi_util.h"

using namespace dcttest;

namespace {

constexpr size_t kCount = 3001;

std::vector<float> gradient(int rank, int step) {
  std::mt19937 rng(101u * static_cast<unsigned>(step) + static_cast<unsigned>(rank));
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> g(kCount);
  for (float& x : g) x = normal(rng);
  return g;
}

// The plan under test: the allgather of slots, or global top-k's fixed pieces.
dctAlgorithm_t plan = dctAlgoAllgather;

dctCompressor_t make(dctComm_t comm) {
  Settings s;
  s.algorithm = plan;
  s.method = dctThresholdSampled;
  s.interval = 2;
  s.density = 0.05;
  s.capacity = 1.5;
  dctConfig_t cfg = explicitConfig(s);
  dctCompressor_t c = nullptr;
  REQUIRE(dctCompressorCreate(comm, kCount, dctFloat32, &cfg, &c) == dctSuccess);
  c->stream.asyncForTesting = true;
  return c;
}

dctResult_t step(dctCompressor_t c, dctComm_t comm, int k, dctRedOp_t op, bool nullSend, std::vector<float>& out) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::vector<float> g = gradient(rank, k);
  out.assign(kCount, 0.f);
  return dctSparseAllreduce(nullSend ? nullptr : g.data(), out.data(), kCount, dctFloat32, op, c, comm, nullptr);
}

std::vector<unsigned char> saved(dctCompressor_t c) {
  size_t bytes = 0;
  REQUIRE(dctCompressorSaveState(c, nullptr, &bytes, nullptr) == dctSuccess);
  std::vector<unsigned char> blob(bytes);
  REQUIRE(dctCompressorSaveState(c, blob.data(), &bytes, nullptr) == dctSuccess);
  return blob;
}

dctResult_t asyncError(dctComm_t comm) {
  dctResult_t e = dctInternalError;
  REQUIRE(dctCommGetAsyncError(comm, &e) == dctSuccess);
  return e;
}

// Two good steps, then the failing one `fail` queues on A; then the
// contract: nothing changed, the comm stays failed, a new comm continues.
template <typename Fail>
void failAndContinue(Fail&& fail, dctResult_t expected) {
  World w;
  dctCompressor_t a = make(w.comm);
  std::vector<float> out;
  for (int k = 0; k < 2; k++) REQUIRE(step(a, w.comm, k, dctAvg, false, out) == dctSuccess);
  CHECK(asyncError(w.comm) == dctSuccess);
  const std::vector<unsigned char> before = saved(a);
  fail(a, w.comm);
  CHECK(allTrue(asyncError(w.comm) == expected));
  CHECK(saved(a) == before);  // nothing committed anywhere
  // Later steps run (collectives and all) but change nothing, and say why.
  for (int k = 2; k < 4; k++) CHECK(allTrue(step(a, w.comm, k, dctAvg, false, out) == expected));
  CHECK(saved(a) == before);
  // A new comm: the saved state continues exactly as a state saved before
  // the failure does.
  dctComm_t fresh = nullptr;
  REQUIRE(dctCommInitMpi(MPI_COMM_WORLD, &fresh) == dctSuccess);
  dctCompressor_t b = make(fresh), ref = make(fresh);
  const std::vector<unsigned char> after = saved(a);
  REQUIRE(dctCompressorLoadState(b, after.data(), after.size(), nullptr) == dctSuccess);
  REQUIRE(dctCompressorLoadState(ref, before.data(), before.size(), nullptr) == dctSuccess);
  for (int k = 2; k < 5; k++) {
    std::vector<float> ob, oref;
    REQUIRE(step(b, fresh, k, dctAvg, false, ob) == dctSuccess);
    REQUIRE(step(ref, fresh, k, dctAvg, false, oref) == dctSuccess);
    CHECK(ob == oref);
    CHECK(identicalOnAllRanks(ob.data(), kCount * sizeof(float)));
  }
  CHECK(asyncError(fresh) == dctSuccess);
  dctCompressorDestroy(ref);
  dctCompressorDestroy(b);
  dctCommDestroy(fresh);
  dctCompressorDestroy(a);
}

}  // namespace

TEST_CASE("a call that differs on one rank: every call returns, the step fails later on every rank") {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) return;
  for (dctAlgorithm_t algorithm : {dctAlgoAllgather, dctAlgoGlobalTopk}) {
    CAPTURE(algorithm);
    plan = algorithm;
    failAndContinue(
        [](dctCompressor_t a, dctComm_t comm) {
          int rank = 0;
          MPI_Comm_rank(MPI_COMM_WORLD, &rank);
          std::vector<float> out;
          // Queued on every rank: the outcome is not the call's.
          CHECK(step(a, comm, 2, rank == 0 ? dctSum : dctAvg, false, out) == dctSuccess);
        },
        dctInvalidUsage);
  }
}

TEST_CASE("a rank that rejects its arguments still queues the step; the others learn of it asynchronously") {
  for (dctAlgorithm_t algorithm : {dctAlgoAllgather, dctAlgoGlobalTopk}) {
    CAPTURE(algorithm);
    plan = algorithm;
    failAndContinue(
        [](dctCompressor_t a, dctComm_t comm) {
          int rank = 0, size = 1;
          MPI_Comm_rank(MPI_COMM_WORLD, &rank);
          MPI_Comm_size(MPI_COMM_WORLD, &size);
          std::vector<float> out;
          const bool bad = rank == size - 1;
          const dctResult_t res = step(a, comm, 2, dctAvg, bad, out);
          CHECK(res == (bad ? dctInvalidArgument : dctSuccess));
        },
        dctInvalidArgument);
  }
}
