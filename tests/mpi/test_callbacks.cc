// dctCommInitCallbacks with callbacks backed by plain MPI on a duplicate of
// MPI_COMM_WORLD: the same results, bit for bit, and the same statistics as
// dctCommInitMpi for every algorithm and the 1-bit compressor; a callback
// that fails on one rank (after taking part) fails the call on every rank,
// commits nothing, and the retried run is exact.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstring>
#include <random>
#include <vector>

#include "mpi_util.h"

using namespace dcttest;

namespace {

struct MpiBackend {
  MPI_Comm comm = MPI_COMM_NULL;
  long failAt = -1;  // this rank's op that reports a failure (after taking part)
  long ops = 0;
};

int outcome(MpiBackend* b, int err) {
  const bool injected = b->ops++ == b->failAt;
  return err != MPI_SUCCESS ? 1 : injected ? 2 : 0;
}

std::vector<int> ints(const size_t* v, int n) { return std::vector<int>(v, v + n); }

int cbAllgather(const void* send, void* recv, size_t bytes, void* ctx, void*) {
  auto* b = static_cast<MpiBackend*>(ctx);
  const int n = static_cast<int>(bytes);
  return outcome(b, MPI_Allgather(send, n, MPI_BYTE, recv, n, MPI_BYTE, b->comm));
}

int cbAllgatherv(const void* send, size_t sendBytes, void* recv, const size_t* recvBytes, const size_t* recvOffsets,
                 void* ctx, void*) {
  auto* b = static_cast<MpiBackend*>(ctx);
  int P = 0;
  MPI_Comm_size(b->comm, &P);
  const std::vector<int> counts = ints(recvBytes, P), displs = ints(recvOffsets, P);
  return outcome(b, MPI_Allgatherv(send, static_cast<int>(sendBytes), MPI_BYTE, recv, counts.data(), displs.data(),
                                   MPI_BYTE, b->comm));
}

int cbAlltoallv(const void* send, const size_t* sendBytes, const size_t* sendOffsets, void* recv,
                const size_t* recvBytes, const size_t* recvOffsets, void* ctx, void*) {
  auto* b = static_cast<MpiBackend*>(ctx);
  int P = 0;
  MPI_Comm_size(b->comm, &P);
  const std::vector<int> sc = ints(sendBytes, P), sd = ints(sendOffsets, P), rc = ints(recvBytes, P),
                         rd = ints(recvOffsets, P);
  return outcome(b, MPI_Alltoallv(send, sc.data(), sd.data(), MPI_BYTE, recv, rc.data(), rd.data(), MPI_BYTE,
                                  b->comm));
}

int cbAllreduceSum(const void* send, void* recv, size_t count, dctDataType_t type, void* ctx, void*) {
  auto* b = static_cast<MpiBackend*>(ctx);
  const MPI_Datatype t = type == dctFloat64 ? MPI_DOUBLE : MPI_FLOAT;  // the tests send fp32 and fp64 only
  const void* in = send == recv ? MPI_IN_PLACE : send;
  return outcome(b, MPI_Allreduce(in, recv, static_cast<int>(count), t, MPI_SUM, b->comm));
}

// A vote that fails contributes dctTransportError (dct.h), so that the
// others see the failure too.
int cbVoteMax(int32_t mine, int32_t* max, void* ctx) {
  auto* b = static_cast<MpiBackend*>(ctx);
  const int32_t sent = b->ops == b->failAt && mine < dctTransportError ? dctTransportError : mine;
  return outcome(b, MPI_Allreduce(&sent, max, 1, MPI_INT32_T, MPI_MAX, b->comm));
}

struct CallbackComm {
  MpiBackend backend;
  dctComm_t comm = nullptr;
  explicit CallbackComm(bool withVote) {
    MPI_Comm_dup(MPI_COMM_WORLD, &backend.comm);
    dctCallbacks_t cb = DCT_CALLBACKS_INITIALIZER;
    MPI_Comm_rank(backend.comm, &cb.rank);
    MPI_Comm_size(backend.comm, &cb.nranks);
    cb.context = &backend;
    cb.allgather = cbAllgather;
    cb.allgatherv = cbAllgatherv;
    cb.alltoallv = cbAlltoallv;
    cb.allreduceSum = cbAllreduceSum;
    if (withVote) cb.voteMax = cbVoteMax;
    REQUIRE(dctCommInitCallbacks(&cb, &comm) == dctSuccess);
  }
  ~CallbackComm() {
    dctCommDestroy(comm);
    MPI_Comm_free(&backend.comm);
  }
};

struct Steps {
  std::vector<std::vector<float>> outputs;
  dctStats_t stats{};
  int failedCalls = 0;
};

// `steps` steps of one compressor on comm, each failed call retried.
Steps run(dctComm_t comm, const dctConfig_t& cfg, size_t n, int steps, bool inPlace) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  dctCompressor_t c = nullptr;
  REQUIRE(dctCompressorCreate(comm, n, dctFloat32, &cfg, &c) == dctSuccess);
  Steps out;
  for (int step = 0; step < steps; step++) {
    std::mt19937 rng(1000 * rank + step);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> g(n), r(n);
    for (float& x : g) x = dist(rng);
    for (int attempt = 0;; attempt++) {
      REQUIRE(attempt < 3);
      std::vector<float> in = g;
      float* recv = inPlace ? in.data() : r.data();
      const dctResult_t res = dctSparseAllreduce(in.data(), recv, n, dctFloat32, dctSum, c, comm, nullptr);
      REQUIRE(allTrue(res == dctSuccess) == (res == dctSuccess));  // every rank alike
      if (res != dctSuccess) {
        out.failedCalls++;
        continue;
      }
      out.outputs.emplace_back(recv, recv + n);
      break;
    }
  }
  dctCompressorGetStats(c, &out.stats);
  dctCompressorDestroy(c);
  return out;
}

dctConfig_t configFor(dctAlgorithm_t algo, bool onebit) {
  Settings s;
  s.algorithm = algo;
  s.density = 0.05;
  dctConfig_t cfg = explicitConfig(s);
  if (onebit) cfg.compressor = dctCompressorOnebit;
  return cfg;
}

}  // namespace

TEST_CASE("callbacks over MPI give dctCommInitMpi's results and statistics, bit for bit") {
  // The callbacks have no nonblocking allgather, so no pipelined steps: the
  // MPI comm runs without them too (their chunk headers add bytes). Nor
  // sendrecv, so split's reduce-scatter is pairwise: recursive halving,
  // which sums in another order, stays off the MPI comm too.
  setenv("DCT_PIPELINE", "0", 1);
  setenv("DCT_SPLIT_EXCHANGE", "pairwise", 1);
  World w;
  unsetenv("DCT_PIPELINE");
  unsetenv("DCT_SPLIT_EXCHANGE");
  for (bool withVote : {true, false}) {
    CallbackComm cb(withVote);
    for (int variant = 0; variant < 5; variant++) {
      const bool onebit = variant == 3;
      const dctAlgorithm_t algo = variant == 1   ? dctAlgoDense
                                  : variant == 2 ? dctAlgoSplit
                                  : variant == 4 ? dctAlgoGlobalTopk
                                                 : dctAlgoAllgather;
      for (size_t n : {size_t(1), size_t(7), size_t(20011)})
        for (bool inPlace : {false, true}) {
          CAPTURE(withVote);
          CAPTURE(variant);
          CAPTURE(n);
          CAPTURE(inPlace);
          dctConfig_t cfg = configFor(algo, onebit);
          if (variant == 4) {  // fixed pieces: the callbacks have no alltoall, MPI has (the alltoallv fallback)
            cfg.capacityFactor = 1.25;
            cfg.thresholdMethod = dctThresholdSampled;
          }
          const Steps viaMpi = run(w.comm, cfg, n, 4, inPlace), viaCallbacks = run(cb.comm, cfg, n, 4, inPlace);
          REQUIRE(viaCallbacks.outputs.size() == viaMpi.outputs.size());
          for (size_t i = 0; i < viaMpi.outputs.size(); i++) {
            CHECK(std::memcmp(viaCallbacks.outputs[i].data(), viaMpi.outputs[i].data(), n * sizeof(float)) == 0);
            CHECK(identicalOnAllRanks(viaCallbacks.outputs[i].data(), n * sizeof(float)));
          }
          CHECK(viaCallbacks.stats.step == viaMpi.stats.step);
          CHECK(viaCallbacks.stats.nnz == viaMpi.stats.nnz);
          CHECK(viaCallbacks.stats.totalBytesSent == viaMpi.stats.totalBytesSent);
        }
    }
  }
}

TEST_CASE("the sparse-input allreduce over callbacks gives dctCommInitMpi's result, bit for bit") {
  World w;
  CallbackComm cb(true);
  const size_t n = 20011;
  std::mt19937 rng(5 + w.rank);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<uint32_t> idx;
  std::vector<float> val;
  for (uint32_t i = w.rank; i < n; i += 3 + w.rank) {
    idx.push_back(i);
    val.push_back(dist(rng));
  }
  // (auto may differ: each comm priced its links with its own probe)
  for (dctAlgorithm_t algo : {dctAlgoAllgather, dctAlgoSplit, dctAlgoDense}) {
    CAPTURE(static_cast<int>(algo));
    std::vector<float> viaMpi(n), viaCallbacks(n);
    size_t nnz = 0;
    dctSparseInputInfo_t a{}, b{};
    REQUIRE(dctSparseInputAllreduce(idx.data(), val.data(), idx.size(), n, dctFloat32, dctSum, algo, viaMpi.data(),
                                    nullptr, nullptr, 0, &nnz, &a, w.comm, nullptr) == dctSuccess);
    REQUIRE(dctSparseInputAllreduce(idx.data(), val.data(), idx.size(), n, dctFloat32, dctSum, algo,
                                    viaCallbacks.data(), nullptr, nullptr, 0, &nnz, &b, cb.comm, nullptr) == dctSuccess);
    CHECK(a.algorithm == b.algorithm);
    CHECK(a.bytesSent == b.bytesSent);
    CHECK(std::memcmp(viaMpi.data(), viaCallbacks.data(), n * sizeof(float)) == 0);
  }
}

TEST_CASE("a callback that fails on one rank fails the call on every rank, and the retry is exact") {
  World w;
  CallbackComm cb(true);
  const size_t n = 4099;
  for (int variant = 0; variant < 4; variant++) {
    const dctConfig_t cfg = configFor(variant == 1 ? dctAlgoDense : variant == 2 ? dctAlgoSplit : dctAlgoAllgather,
                                      variant == 3);
    cb.backend.ops = 0;
    const Steps clean = run(cb.comm, cfg, n, 3, false);
    REQUIRE(clean.failedCalls == 0);
    long ops = cb.backend.ops;
    MPI_Allreduce(MPI_IN_PLACE, &ops, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    for (long at = 0; at < ops; at++)
      for (int victim = 0; victim < w.size; victim++) {
        CAPTURE(variant);
        CAPTURE(at);
        CAPTURE(victim);
        cb.backend.ops = 0;
        cb.backend.failAt = w.rank == victim ? at : -1;
        const Steps faulty = run(cb.comm, cfg, n, 3, false);
        cb.backend.failAt = -1;
        // The victim reached op `at`: exactly one call failed, on every rank.
        int fired = w.rank == victim && cb.backend.ops > at;
        MPI_Allreduce(MPI_IN_PLACE, &fired, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        CHECK(faulty.failedCalls == fired);
        REQUIRE(faulty.outputs.size() == clean.outputs.size());
        for (size_t i = 0; i < clean.outputs.size(); i++)
          CHECK(std::memcmp(faulty.outputs[i].data(), clean.outputs[i].data(), n * sizeof(float)) == 0);
        CHECK(faulty.stats.step == clean.stats.step);
        CHECK(faulty.stats.totalBytesSent == clean.stats.totalBytesSent);
      }
  }
}

TEST_CASE("dctCommInitCallbacks: bad tables are refused, and hierarchical steps fail every rank") {
  World w;
  dctComm_t comm = nullptr;
  CHECK(dctCommInitCallbacks(nullptr, &comm) == dctInvalidArgument);
  dctCallbacks_t bad = DCT_CALLBACKS_INITIALIZER;
  CHECK(dctCommInitCallbacks(&bad, &comm) == dctInvalidArgument);  // rank -1
  bad.rank = 0;
  bad.nranks = 1;
  CHECK(dctCommInitCallbacks(&bad, &comm) == dctInvalidArgument);  // no callbacks
  CHECK(std::strstr(dctGetLastError(nullptr), "required") != nullptr);
  bad.magic = 0;
  CHECK(dctCommInitCallbacks(&bad, &comm) == dctInvalidArgument);
  CHECK(comm == nullptr);
  const ScopedEnv hierarchy("DCT_HIERARCHY", 1);
  MpiBackend backend;
  MPI_Comm_dup(MPI_COMM_WORLD, &backend.comm);
  dctCallbacks_t cb = DCT_CALLBACKS_INITIALIZER;
  cb.rank = w.rank;
  cb.nranks = w.size;
  cb.context = &backend;
  cb.allgather = cbAllgather;
  cb.allgatherv = cbAllgatherv;
  cb.alltoallv = cbAlltoallv;
  cb.allreduceSum = cbAllreduceSum;
  CHECK(dctCommInitCallbacks(&cb, &comm) == dctNotSupported);
  CHECK(comm == nullptr);
  MPI_Comm_free(&backend.comm);
}
