// The 1-bit allreduce queued on the stream (algo/onebit_step.cc), run on
// the CPU twin told to report as a device twin does
// (StreamSetup::asyncForTesting): after the first synchronous step the
// steps queue, and give bit for bit the outputs, errors and statistics of
// the synchronous path on every rank; a step that fails after its call
// returned (a rank's bad argument, ranks whose calls differ, a transport
// fault) changes nothing on any rank and sets every rank's sticky error;
// later steps run but change nothing; a saved state continues on a new
// comm.
#include <cmath>
#include <cstring>
#include <vector>

#include "fault_util.h"
#include "onebit_util.h"
#include "transport/fault_injection.h"

using namespace dcttest;

namespace {

constexpr int kSteps = 5;

dctCompressor_t make(dctComm_t comm, size_t n, dctDataType_t type, int warmup, bool queued) {
  dctConfig_t cfg = onebitConfig(warmup);
  dctCompressor_t c = nullptr;
  REQUIRE(dctCompressorCreate(comm, n, type, &cfg, &c) == dctSuccess);
  c->stream.asyncForTesting = queued;
  return c;
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

// One step of c on rank `rank`'s input at `step` (a NaN at `nanAt` when >= 0).
template <typename T>
dctResult_t step(dctCompressor_t c, dctComm_t comm, int k, dctRedOp_t op, bool inPlace, std::vector<T>& out,
                 bool nullSend = false, long nanAt = -1) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::vector<T> g = onebitInput<T>(c->count, rank, k, 19);
  if (nanAt >= 0) g[static_cast<size_t>(nanAt)] = Value<T>::store(NAN);
  const dctDataType_t type = c->dtype;
  if (inPlace) {
    out = g;
    return dctSparseAllreduce(nullSend ? nullptr : out.data(), out.data(), c->count, type, op, c, comm, nullptr);
  }
  out.assign(c->count, Value<T>::store(7.0f));
  return dctSparseAllreduce(nullSend ? nullptr : g.data(), out.data(), c->count, type, op, c, comm, nullptr);
}

template <typename T>
void sameAsSynchronous(size_t n, dctDataType_t type, int warmup, dctRedOp_t op, bool inPlace, long nanStep) {
  World w;
  dctCompressor_t sync = make(w.comm, n, type, warmup, false), queued = make(w.comm, n, type, warmup, true);
  using A = typename Value<T>::Acc;
  for (int k = 0; k < kSteps; k++) {
    const long nanAt = k == nanStep && w.rank == w.size - 1 ? static_cast<long>(n / 2) : -1;
    std::vector<T> a, b;
    REQUIRE(step(sync, w.comm, k, op, inPlace, a, false, nanAt) == dctSuccess);
    REQUIRE(step(queued, w.comm, k, op, inPlace, b, false, nanAt) == dctSuccess);
    CAPTURE(k);
    CHECK(sameBytes(a, b));
    CHECK(identicalOnAllRanks(b.data(), b.size() * sizeof(T)));
    if (k == nanStep) CHECK(std::isnan(static_cast<double>(Value<T>::load(b[0]))));
  }
  CHECK(queued->stream.live);  // the steps past the first did queue
  dctStats_t sa{}, sb{};
  REQUIRE(dctCompressorGetStats(sync, &sa) == dctSuccess);
  REQUIRE(dctCompressorGetStats(queued, &sb) == dctSuccess);
  CHECK(sa.step == sb.step);
  CHECK(sameBytes(std::vector<double>{sa.threshold}, std::vector<double>{sb.threshold}));
  CHECK(sa.nonFinite == sb.nonFinite);
  CHECK(sa.nnz == sb.nnz);
  CHECK(sa.algorithm == sb.algorithm);
  CHECK(sa.bytesSent == sb.bytesSent);
  CHECK(sa.totalBytesSent == sb.totalBytesSent);
  CHECK(sa.totalBytesReceived == sb.totalBytesReceived);
  CHECK(sa.totalDenseBytes == sb.totalDenseBytes);
  CHECK(sameBytes(workerError<A>(sync), workerError<A>(queued)));
  const size_t mine = dct::OnebitChunks(n, w.size).length(w.rank);
  CHECK(sameBytes(serverError<A>(sync, mine), serverError<A>(queued, mine)));
  CHECK(asyncError(w.comm) == dctSuccess);
  dctCompressorDestroy(queued);
  dctCompressorDestroy(sync);
}

constexpr size_t kCount = 1001;

// Two good steps, then the failing one `fail` queues; then the contract:
// nothing changed on any rank, the comm stays failed, a new comm continues.
template <typename Fail>
void failAndContinue(Fail&& fail, dctResult_t expected) {
  World w;
  dctCompressor_t a = make(w.comm, kCount, dctFloat32, 0, true);
  std::vector<float> out;
  for (int k = 0; k < 2; k++) REQUIRE(step(a, w.comm, k, dctAvg, false, out) == dctSuccess);
  CHECK(asyncError(w.comm) == dctSuccess);
  const std::vector<unsigned char> before = saved(a);
  fail(a, w);
  CHECK(allTrue(asyncError(w.comm) == expected));
  CHECK(saved(a) == before);
  for (int k = 2; k < 4; k++) {
    std::vector<float> o;
    CHECK(allTrue(step(a, w.comm, k, dctAvg, false, o) == expected));
    CHECK(o == std::vector<float>(kCount, 7.0f));  // recvbuf untouched
  }
  CHECK(saved(a) == before);
  dctComm_t fresh = nullptr;
  REQUIRE(dctCommInitMpi(MPI_COMM_WORLD, &fresh) == dctSuccess);
  dctCompressor_t b = make(fresh, kCount, dctFloat32, 0, true), ref = make(fresh, kCount, dctFloat32, 0, false);
  const std::vector<unsigned char> after = saved(a);
  REQUIRE(dctCompressorLoadState(b, after.data(), after.size(), nullptr) == dctSuccess);
  REQUIRE(dctCompressorLoadState(ref, before.data(), before.size(), nullptr) == dctSuccess);
  for (int k = 2; k < 6; k++) {
    std::vector<float> ob, oref;
    REQUIRE(step(b, fresh, k, dctAvg, k % 2 == 0, ob) == dctSuccess);
    REQUIRE(step(ref, fresh, k, dctAvg, k % 2 == 0, oref) == dctSuccess);
    CHECK(sameBytes(ob, oref));
    CHECK(identicalOnAllRanks(ob.data(), kCount * sizeof(float)));
  }
  CHECK(sameBytes(workerError<float>(b), workerError<float>(ref)));
  CHECK(asyncError(fresh) == dctSuccess);
  dctCompressorDestroy(ref);
  dctCompressorDestroy(b);
  dctCommDestroy(fresh);
  dctCompressorDestroy(a);
}

}  // namespace

TEST_CASE("queued 1-bit steps equal the synchronous path bit for bit on every rank") {
  for (size_t n : {size_t(1001), size_t(40)})
    for (int warmup : {0, 1})
      for (dctRedOp_t op : {dctSum, dctAvg})
        for (bool inPlace : {false, true}) {
          CAPTURE(n);
          CAPTURE(warmup);
          CAPTURE(inPlace);
          sameAsSynchronous<float>(n, dctFloat32, warmup, op, inPlace, -1);
        }
  sameAsSynchronous<double>(777, dctFloat64, 0, dctAvg, false, -1);
  sameAsSynchronous<BFloat16>(555, dctBFloat16, 0, dctSum, true, -1);
  sameAsSynchronous<Half>(555, dctFloat16, 1, dctAvg, false, -1);
}

TEST_CASE("a non-finite queued step outputs NaN and keeps the errors, as the synchronous one") {
  sameAsSynchronous<float>(1001, dctFloat32, 0, dctSum, false, 2);
  sameAsSynchronous<float>(1001, dctFloat32, 0, dctAvg, true, 2);
}

TEST_CASE("a rank that rejects its arguments still queues the step; every rank fails asynchronously") {
  failAndContinue(
      [](dctCompressor_t a, World& w) {
        const bool bad = w.rank == w.size - 1;
        std::vector<float> out;
        CHECK(step(a, w.comm, 2, dctAvg, false, out, bad) == (bad ? dctInvalidArgument : dctSuccess));
        CHECK(out == std::vector<float>(kCount, 7.0f));  // nothing decoded
      },
      dctInvalidArgument);
}

TEST_CASE("ranks whose queued calls differ (the slots' digests) fail every rank asynchronously") {
  World probe;
  if (probe.size == 1) return;  // one rank's call cannot differ from another's
  failAndContinue(
      [](dctCompressor_t a, World& w) {
        std::vector<float> out;  // the last rank sums where the others average
        CHECK(step(a, w.comm, 2, w.rank == w.size - 1 ? dctSum : dctAvg, false, out) == dctSuccess);
        CHECK(out == std::vector<float>(kCount, 7.0f));  // nothing decoded
      },
      dctInvalidUsage);
}

TEST_CASE("an in-place queued step that fails leaves sendbuf as it was") {
  failAndContinue(
      [](dctCompressor_t a, World& w) {
        const bool bad = w.rank == 0;
        std::vector<float> out;
        int rank = w.rank;
        const dctResult_t res = step(a, w.comm, 2, dctAvg, true, out, bad);
        CHECK(res == (bad ? dctInvalidArgument : dctSuccess));
        CHECK(sameBytes(out, onebitInput<float>(kCount, rank, 2, 19)));
      },
      dctInvalidArgument);
}

TEST_CASE("a transport fault in a queued step fails every rank asynchronously, nothing committed") {
  // The ops of a queued step: alltoallv, allgather, vote (none at 1 rank).
  World probe;
  const uint64_t ops = probe.size > 1 ? 3 : 2;
  for (uint64_t n = 0; n < ops; n++)
    for (int victim : {-1, probe.size - 1}) {
      CAPTURE(n);
      CAPTURE(victim);
      failAndContinue(
          [&](dctCompressor_t a, World& w) {
            REQUIRE(dct::installFaultSeam(w.comm) == dctSuccess);
            dct::armFault(w.comm, n, victim);
            std::vector<float> out;
            const dctResult_t res = step(a, w.comm, 2, dctAvg, false, out);
            CHECK(!dct::faultArmed(w.comm));
            CHECK((res == dctSuccess || res == dctTransportError));
            CHECK(out == std::vector<float>(kCount, 7.0f));
          },
          dctTransportError);
    }
}
