// Out of host memory on one rank, or on all, at any allocation of a call:
// every entry point either succeeds everywhere with the result of a run that
// never failed, or fails on every rank with an error that says memory,
// nothing changed (compressor or plan state, the caller's inputs), and the
// retry is exact. Each case counts its call's allocations (the most of any
// rank) and fails each one in turn (alloc_fault.h); DCT_ALLOC_FAULT_SAMPLE
// caps how many of them a case tries (evenly spread, first and last kept;
// 20 unless set, 0: every one);
// DCT_ALLOC_FAULT_TRACE prints where each failing allocation was made.
// Device allocations do not pass through the seam (no GPU here).
#include <doctest/doctest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "alloc_case.h"
#include "alloc_fault.h"
#include "core/alltoall_plan.h"
#include "core/compressor.h"
#include "des_util.h"
#include "fault_util.h"
#include "mpi_util.h"

using namespace dcttest;

namespace {

// --- dctSparseAllreduce: every plan, 1-bit, hierarchical ---

constexpr size_t kCount = 1001;

std::vector<float> gradient(int rank, int step) {
  std::mt19937 rng(100 * rank + step + 1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> g(kCount);
  for (float& x : g) x = dist(rng);
  return g;
}

struct AllreduceSetup {
  Settings settings;
  bool onebit = false;
  bool inPlace = false;
};

// A fresh compressor's first step (what it allocates once included), or
// with chunks its second (the pipeline sizes its slots from the first).
Case allreduceCase(const std::string& name, World& w, AllreduceSetup a) {
  struct St {
    dctCompressor_t c = nullptr;
    std::vector<float> send, out;
    std::unique_ptr<ScopedChunking> chunking;
  };
  auto st = std::make_shared<St>();
  Case k;
  k.name = name;
  k.comm = w.comm;
  k.setUp = [st, a, &w] {
    dctConfig_t cfg = explicitConfig(a.settings);
    if (a.onebit) cfg.compressor = dctCompressorOnebit;
    st->chunking = std::make_unique<ScopedChunking>(w.comm, a.settings.chunkElems);
    REQUIRE(dctCompressorCreate(w.comm, kCount, dctFloat32, &cfg, &st->c) == dctSuccess);
    if (a.settings.chunkElems > 0) {
      std::vector<float> first = gradient(w.rank, 0), out(kCount);
      REQUIRE(dctSparseAllreduce(first.data(), out.data(), kCount, dctFloat32, dctAvg, st->c, w.comm, nullptr) ==
              dctSuccess);
    }
    st->send = gradient(w.rank, 1);
    st->out.assign(kCount, 0.0f);
  };
  k.call = [st, a, &w] {
    if (a.inPlace) st->out = st->send;
    return dctSparseAllreduce(a.inPlace ? st->out.data() : st->send.data(), st->out.data(), kCount, dctFloat32,
                              dctAvg, st->c, w.comm, nullptr);
  };
  // The residual (global top-k's owner part included) and the statistics.
  // (Not the saved state string: a failed first 1-bit step leaves its zero
  // server error set up, which the string shows and nothing else does.)
  auto state = [st] {
    Bytes b;
    std::vector<float> residual(kCount);
    REQUIRE(dctCompressorGetResidual(st->c, residual.data(), nullptr) == dctSuccess);
    put(b, residual);
    dctStats_t stats{};
    REQUIRE(dctCompressorGetStats(st->c, &stats) == dctSuccess);
    put(b, &stats.step, 1);
    put(b, &stats.nnz, 1);
    put(b, &stats.algorithm, 1);
    put(b, &stats.threshold, 1);
    put(b, &stats.totalBytesSent, 1);
    put(b, &stats.totalBytesReceived, 1);
    return b;
  };
  k.state = state;
  k.inputs = [st] { return Bytes(reinterpret_cast<const unsigned char*>(st->send.data()),
                                 reinterpret_cast<const unsigned char*>(st->send.data() + kCount)); };
  k.result = [st, state] {
    Bytes b;
    put(b, st->out);
    const Bytes after = state();
    b.insert(b.end(), after.begin(), after.end());
    return b;
  };
  k.tearDown = [st] {
    dctCompressorDestroy(st->c);
    st->c = nullptr;
    st->chunking.reset();
  };
  return k;
}

Settings withAlgorithm(dctAlgorithm_t algorithm) {
  Settings s;
  s.algorithm = algorithm;
  return s;
}

}  // namespace

TEST_CASE("sparse allreduce: out of memory at any allocation fails every rank, the retry is exact") {
  World w;
  runCase(allreduceCase("allgather", w, {withAlgorithm(dctAlgoAllgather)}));
  runCase(allreduceCase("allgather, in place", w, {withAlgorithm(dctAlgoAllgather), false, true}));
  runCase(allreduceCase("split", w, {withAlgorithm(dctAlgoSplit)}));
  runCase(allreduceCase("dense", w, {withAlgorithm(dctAlgoDense)}));
  runCase(allreduceCase("global top-k", w, {withAlgorithm(dctAlgoGlobalTopk)}));
  runCase(allreduceCase("auto", w, {withAlgorithm(dctAlgoAuto)}));
  Settings pipelined = withAlgorithm(dctAlgoAllgather);
  pipelined.chunkElems = 300;
  runCase(allreduceCase("pipelined", w, {pipelined}));
  runCase(allreduceCase("1-bit", w, {withAlgorithm(dctAlgoAllgather), true}));
}

TEST_CASE("hierarchical allreduce: out of memory at any allocation fails every rank, the retry is exact") {
  World w(2);
  runCase(allreduceCase("hierarchical allgather", w, {withAlgorithm(dctAlgoAllgather)}));
  runCase(allreduceCase("hierarchical split", w, {withAlgorithm(dctAlgoSplit)}));
}

namespace {

// --- the all-to-all: plan creation, forward (unchunked and pipelined), backward ---

constexpr size_t kRowLength = 64;


struct AlltoallSetup {
  int chunks = 0;          // > 0: the forward forced into chunks (more than one rank)
  bool armCreate = false;  // the call is the plan's creation
  bool armBackward = false;
};

std::vector<size_t> rowsTo(int me, int P) {
  std::vector<size_t> rows(P);
  for (int q = 0; q < P; q++) rows[q] = static_cast<size_t>((me + q) % 3 + 2);
  return rows;
}

std::vector<float> rowsOf(int rank, size_t rows, int step) {
  std::mt19937 rng(1000 * rank + step + 7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(rows * kRowLength);
  for (float& x : v) x = dist(rng);
  return v;
}

Case alltoallCase(const std::string& name, World& w, AlltoallSetup a) {
  struct St {
    dctAlltoallPlan_t plan = nullptr;
    std::vector<size_t> rows;
    size_t sendRows = 0;
    std::vector<float> send, out, grad, back;
  };
  auto st = std::make_shared<St>();
  Case k;
  k.name = name;
  k.comm = w.comm;
  auto create = [st, a, &w] {
    dctConfig_t cfg = explicitConfig(Settings{});
    cfg.density = 0.1;
    const dctResult_t res = dctAlltoallPlanCreate(w.comm, st->rows.data(), st->rows.data(), kRowLength, dctFloat32,
                                                  &cfg, &st->plan);
    if (res == dctSuccess && a.chunks > 0 && w.size > 1) st->plan->chunks = a.chunks;
    return res;
  };
  auto forward = [st] { return dctSparseAlltoall(st->plan, st->send.data(), st->out.data(), nullptr); };
  auto backward = [st] { return dctSparseAlltoallBackward(st->plan, st->grad.data(), st->back.data(), nullptr); };
  auto outputs = [st] { return concat(st->out, st->back); };
  PlanCalls calls{create, forward, backward, outputs, [st] { return planStats(st->plan, dctAlltoallPlanGetStats); }, a.armCreate,
                  a.armBackward};
  calls.into(k);
  k.setUp = [st, &w, calls] {
    st->rows = rowsTo(w.rank, w.size);
    st->sendRows = 0;
    for (size_t r : st->rows) st->sendRows += r;
    st->send = rowsOf(w.rank, st->sendRows, 0);
    st->out.assign(st->sendRows * kRowLength, 0.0f);
    st->grad = rowsOf(w.rank, st->sendRows, 50);
    st->back.assign(st->sendRows * kRowLength, 0.0f);
    if (calls.runBefore()) st->send = rowsOf(w.rank, st->sendRows, 1);
  };
  k.inputs = [st] { return concat(st->rows, st->send, st->grad); };
  k.tearDown = [st] {
    dctAlltoallPlanDestroy(st->plan);
    st->plan = nullptr;
  };
  return k;
}

}  // namespace

TEST_CASE("all-to-all: out of memory at any allocation fails every rank, the retry is exact") {
  World w;
  runCase(alltoallCase("all-to-all plan create", w, {0, true, false}));
  runCase(alltoallCase("all-to-all forward", w, {}));
  runCase(alltoallCase("all-to-all backward", w, {0, false, true}));
  runCase(alltoallCase("all-to-all plan create, chunked", w, {2, true, false}));
  runCase(alltoallCase("all-to-all forward, chunked", w, {3}));
  runCase(alltoallCase("all-to-all backward, chunked", w, {2, false, true}));
}

namespace {

// --- DES: plan creation, forward, backward; exact and thinned ---

constexpr size_t kDesRowLength = 16;

struct DesSetup {
  bool thinned = false;
  bool armCreate = false;
  bool armBackward = false;
};

Case desCase(const std::string& name, World& w, DesSetup a) {
  struct St {
    dctDesPlan_t plan = nullptr;
    std::vector<size_t> rows;
    size_t all = 0, mine = 0;
    std::vector<float> partials, summed, grad, back;
  };
  auto st = std::make_shared<St>();
  Case k;
  k.name = name;
  k.comm = w.comm;
  auto create = [st, a, &w] {
    dctConfig_t cfg = DCT_CONFIG_INITIALIZER;
    cfg.density = 0.5;
    cfg.rowSelection = dctRowThreshold;
    cfg.thresholdInterval = 2;
    cfg.thresholdMethod = dctThresholdExact;
    return dctDesPlanCreate(w.comm, st->rows.data(), kDesRowLength, dctFloat32, a.thinned ? &cfg : nullptr,
                            &st->plan);
  };
  auto forward = [st] { return dctDesReduceScatter(st->plan, st->partials.data(), st->summed.data(), nullptr); };
  auto backward = [st] { return dctDesReduceScatterBackward(st->plan, st->grad.data(), st->back.data(), nullptr); };
  auto outputs = [st] { return concat(st->summed, st->back); };
  PlanCalls calls{create, forward, backward, outputs, [st] { return planStats(st->plan, dctDesPlanGetStats); }, a.armCreate,
                  a.armBackward};
  calls.into(k);
  k.setUp = [st, &w, calls] {
    st->rows.assign(w.size, 0);
    st->all = 0;
    for (int q = 0; q < w.size; q++) st->all += st->rows[q] = static_cast<size_t>(q % 2 + 3);
    st->mine = st->rows[w.rank];
    st->partials = des::partials<dctFloat32>(w.rank, st->all, kDesRowLength, 11, 0.3);
    st->summed.assign(st->mine * kDesRowLength, 0.0f);
    st->grad.assign(st->mine * kDesRowLength, 0.5f + w.rank);
    st->back.assign(st->all * kDesRowLength, 0.0f);
    if (calls.runBefore()) st->partials = des::partials<dctFloat32>(w.rank, st->all, kDesRowLength, 12, 0.3);
  };
  k.inputs = [st] { return concat(st->rows, st->partials, st->grad); };
  k.tearDown = [st] {
    dctDesPlanDestroy(st->plan);
    st->plan = nullptr;
  };
  return k;
}

}  // namespace

TEST_CASE("DES: out of memory at any allocation fails every rank, the retry is exact") {
  World w;
  runCase(desCase("DES plan create", w, {false, true, false}));
  runCase(desCase("DES forward", w, {}));
  runCase(desCase("DES backward", w, {false, false, true}));
  runCase(desCase("DES thinned plan create", w, {true, true, false}));
  runCase(desCase("DES thinned forward", w, {true}));
  runCase(desCase("DES thinned backward", w, {true, false, true}));
}

namespace {

// --- collectives of sparse data: the sparse-input allreduce, the sparse allgather ---

constexpr size_t kSparseCount = 4000;

// Strictly ascending indices, about one in `every`, and their values.
void sparseInput(int rank, size_t every, std::vector<uint32_t>& idx, std::vector<float>& val) {
  std::mt19937 rng(31 * rank + 5);
  idx.clear();
  val.clear();
  for (uint32_t i = 0; i < kSparseCount; i++)
    if (rng() % every == 0) {
      idx.push_back(i);
      val.push_back(static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 64.0f);
    }
}

// The call's outputs are not compared on a failure: the caller's result
// buffers are another promise than the one under test here.
Case sparseInputCase(const std::string& name, World& w, dctAlgorithm_t algorithm, bool query) {
  struct St {
    std::vector<uint32_t> idx, outIdx;
    std::vector<float> val, dense, outVal;
    size_t nnz = 0;
  };
  auto st = std::make_shared<St>();
  Case k;
  k.name = name;
  k.comm = w.comm;
  k.setUp = [st, &w] {
    // Every try a first call: the comm's scratch is made anew.
    if (w.comm->sparseInput) dct::compressorDestroy(w.comm->sparseInput);
    w.comm->sparseInput = nullptr;
    sparseInput(w.rank, 7, st->idx, st->val);
    st->dense.assign(kSparseCount, 0.0f);
    st->outIdx.assign(kSparseCount, 0);
    st->outVal.assign(kSparseCount, 0.0f);
    st->nnz = 0;
  };
  k.call = [st, &w, algorithm, query] {
    return dctSparseInputAllreduce(st->idx.data(), st->val.data(), st->idx.size(), kSparseCount, dctFloat32, dctSum,
                                   algorithm, query ? nullptr : st->dense.data(), query ? nullptr : st->outIdx.data(),
                                   query ? nullptr : st->outVal.data(), kSparseCount, &st->nnz, nullptr, w.comm,
                                   nullptr);
  };
  k.state = [] { return Bytes{}; };
  k.inputs = [st] { return concat(st->idx, st->val); };
  k.result = [st] {
    Bytes b;
    put(b, st->dense);
    put(b, st->outIdx);
    put(b, st->outVal);
    put(b, &st->nnz, 1);
    return b;
  };
  k.tearDown = [] {};
  return k;
}

Case sparseAllgatherCase(const std::string& name, World& w, bool query) {
  struct St {
    std::vector<uint32_t> idx, outIdx;
    std::vector<float> val, outVal;
    std::vector<size_t> counts;
    size_t total = 0;
  };
  auto st = std::make_shared<St>();
  Case k;
  k.name = name;
  k.comm = w.comm;
  k.setUp = [st, &w] {
    sparseInput(w.rank, 11, st->idx, st->val);
    st->outIdx.assign(kSparseCount * w.size, 0);
    st->outVal.assign(kSparseCount * w.size, 0.0f);
    st->counts.assign(w.size, 0);
    st->total = 0;
  };
  k.call = [st, &w, query] {
    return dctSparseAllgather(st->val.data(), st->idx.data(), st->idx.size(), kSparseCount,
                              query ? nullptr : st->outVal.data(), query ? nullptr : st->outIdx.data(),
                              st->outIdx.size(), st->counts.data(), &st->total, dctFloat32, w.comm, nullptr);
  };
  k.state = [] { return Bytes{}; };
  k.inputs = [st] { return concat(st->idx, st->val); };
  k.result = [st] {
    Bytes b;
    put(b, st->outIdx);
    put(b, st->outVal);
    put(b, st->counts);
    put(b, &st->total, 1);
    return b;
  };
  k.tearDown = [] {};
  return k;
}

}  // namespace

TEST_CASE("sparse-input allreduce and sparse allgather: out of memory at any allocation fails every rank") {
  World w;
  runCase(sparseInputCase("sparse input, allgather", w, dctAlgoAllgather, false));
  runCase(sparseInputCase("sparse input, split", w, dctAlgoSplit, false));
  runCase(sparseInputCase("sparse input, dense", w, dctAlgoDense, false));
  runCase(sparseInputCase("sparse input, auto", w, dctAlgoAuto, false));
  runCase(sparseInputCase("sparse input, size query", w, dctAlgoAuto, true));
  runCase(sparseAllgatherCase("sparse allgather", w, false));
  runCase(sparseAllgatherCase("sparse allgather, counts query", w, true));
}

TEST_CASE("compressor creation and its state string: out of memory fails the call cleanly") {
  World w;
  const dctConfig_t cfg = explicitConfig(Settings{});
  long long N = 0;
  {
    dctCompressor_t c = nullptr;
    alloc::Armed counting(-1);
    const dctResult_t res = dctCompressorCreate(w.comm, kCount, dctFloat32, &cfg, &c);
    N = counting.stop();
    REQUIRE(res == dctSuccess);
    dctCompressorDestroy(c);
  }
  for (long long n = 0; n < N; n++) {
    CAPTURE(n);
    dctCompressor_t c = nullptr;
    dctResult_t res;
    {
      alloc::Armed armed(n);
      res = dctCompressorCreate(w.comm, kCount, dctFloat32, &cfg, &c);
    }
    CHECK((res == dctSuccess || res == dctOutOfMemory));
    CHECK((res == dctSuccess) == (c != nullptr));
    dctCompressorDestroy(c);
  }
  // Saving and loading a stepped compressor's state.
  dctCompressor_t c = nullptr;
  REQUIRE(dctCompressorCreate(w.comm, kCount, dctFloat32, &cfg, &c) == dctSuccess);
  std::vector<float> g = gradient(w.rank, 0), out(kCount);
  REQUIRE(dctSparseAllreduce(g.data(), out.data(), kCount, dctFloat32, dctSum, c, w.comm, nullptr) == dctSuccess);
  size_t bytes = 0;
  REQUIRE(dctCompressorSaveState(c, nullptr, &bytes, nullptr) == dctSuccess);
  Bytes saved(bytes);
  REQUIRE(dctCompressorSaveState(c, saved.data(), &bytes, nullptr) == dctSuccess);
  for (bool load : {false, true}) {
    long long count = 0;
    {
      Bytes again(bytes);
      size_t size = bytes;
      alloc::Armed counting(-1);
      REQUIRE((load ? dctCompressorLoadState(c, saved.data(), bytes, nullptr)
                    : dctCompressorSaveState(c, again.data(), &size, nullptr)) == dctSuccess);
      count = counting.stop();
    }
    for (long long n = 0; n < count; n++) {
      CAPTURE(load);
      CAPTURE(n);
      Bytes again(bytes);
      size_t size = bytes;
      dctResult_t res;
      {
        alloc::Armed armed(n);
        res = load ? dctCompressorLoadState(c, saved.data(), bytes, nullptr)
                   : dctCompressorSaveState(c, again.data(), &size, nullptr);
      }
      CHECK((res == dctSuccess || res == dctOutOfMemory));
      size = bytes;
      REQUIRE(dctCompressorSaveState(c, again.data(), &size, nullptr) == dctSuccess);
      CHECK(again == saved);  // a failed load changed nothing
    }
  }
  dctCompressorDestroy(c);
}
