// Settings that shape the wire are agreed: a DCT_* variable or a config
// field that differs on one rank fails every rank with dctInvalidUsage and
// a message naming it (none hangs, nothing is written), while settings that
// only shape local work may differ. Each case hung, or mixed MPI types,
// before the agreement existed.
#include <doctest/doctest.h>
#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "../common/half_reference.h"
#include "mpi_util.h"

using namespace dcttest;

namespace {

// dctCommInitMpi with `name` set to `value` on the last rank only.
dctResult_t initWithOneRankSet(const World& w, const char* name, const char* value, dctComm_t* comm) {
  const bool set = w.rank == w.size - 1;
  if (set) setenv(name, value, 1);
  const dctResult_t res = dctCommInitMpi(MPI_COMM_WORLD, comm);
  if (set) unsetenv(name);
  return res;
}

bool mentions(const char* message, const char* what) { return std::strstr(message, what) != nullptr; }

// One step of a compressor whose config differs on the last rank.
dctResult_t stepWithOneRankEdited(const World& w, dctConfig_t cfg, void (*edit)(dctConfig_t&), size_t n) {
  if (w.rank == w.size - 1) edit(cfg);
  dctCompressor_t c = nullptr;
  REQUIRE(dctCompressorCreate(w.comm, n, dctFloat32, &cfg, &c) == dctSuccess);
  std::vector<float> in(n), out(n, 7.0f);
  for (size_t i = 0; i < n; i++) in[i] = static_cast<float>((i * 7919) % 1009) - 504.0f;
  const dctResult_t res = dctSparseAllreduce(in.data(), out.data(), n, dctFloat32, dctSum, c, w.comm, nullptr);
  dctStats_t stats{};
  dctCompressorGetStats(c, &stats);
  CHECK(stats.step == 0);  // nothing committed
  dctCompressorDestroy(c);
  return res;
}

}  // namespace

TEST_CASE("a wire-shaping DCT_* variable set on one rank fails dctCommInitMpi on every rank, naming it") {
  World w;
  if (w.size < 2) return;
  const char* const cases[][2] = {
      {"DCT_WIRE_TYPE", "fp16"}, {"DCT_COMPRESSOR", "onebit"}, {"DCT_ALGORITHM", "dense"},
      {"DCT_DENSITY", "0.05"},   {"DCT_WARMUP_STEPS", "3"},    {"DCT_PIPELINE", "0"},
      {"DCT_CHUNK_ELEMENTS", "999"}, {"DCT_LINK_GBPS", "9"},   {"DCT_ALPHA_US", "3"},
      {"DCT_SELECT_GBPS", "3"},  {"DCT_SCATTER_GBPS", "3"},    {"DCT_REDUCE_GBPS", "3"},
      {"DCT_HIERARCHY", "1"},    {"DCT_WIRE_TYPE", "banana"}, {"DCT_TUNE", "0-1M:dense"},
      {"DCT_CAPACITY_FACTOR", "2"}, {"DCT_GATHER_SLOTS", "0"}};
  for (const auto& k : cases) {
    const std::string name = k[0];
    CAPTURE(name);
    dctComm_t comm = nullptr;
    CHECK(initWithOneRankSet(w, k[0], k[1], &comm) == dctInvalidUsage);
    CHECK(comm == nullptr);
    const char* message = dctGetLastError(nullptr);
    CHECK(mentions(message, k[0]));
    CHECK(mentions(message, "rank"));
  }
}

TEST_CASE("a malformed agreed setting on one rank fails every rank") {
  World w;
  if (w.rank == w.size - 1) setenv("DCT_HIERARCHY", "yes", 1);
  dctComm_t comm = nullptr;
  const dctResult_t res = dctCommInitMpi(MPI_COMM_WORLD, &comm);
  unsetenv("DCT_HIERARCHY");
  CHECK(res != dctSuccess);
  CHECK(comm == nullptr);
  if (w.rank == w.size - 1) CHECK(mentions(dctGetLastError(nullptr), "DCT_HIERARCHY='yes'"));
}

TEST_CASE("settings that only shape local work may differ between ranks") {
  World w;
  const char* const cases[][2] = {{"DCT_SEED", "7"},
                                  {"DCT_THRESHOLD_METHOD", "exact"},
                                  {"DCT_NUM_THREADS", "1"},
                                  {"DCT_THRESHOLD_INTERVAL", "5"},
                                  {"DCT_ERROR_FEEDBACK", "0"},
                                  {"DCT_ROW_SELECTION", "threshold"}};
  for (const auto& k : cases) {
    const std::string name = k[0];
    CAPTURE(name);
    dctComm_t comm = nullptr;
    REQUIRE(initWithOneRankSet(w, k[0], k[1], &comm) == dctSuccess);
    dctCommDestroy(comm);
  }
}

TEST_CASE("a config field that shapes the wire, different on one rank, fails the step on every rank") {
  World w;
  if (w.size < 2) return;
  const size_t n = 20011;
  for (dctAlgorithm_t algo : {dctAlgoAllgather, dctAlgoDense, dctAlgoSplit, dctAlgoAuto}) {
    CAPTURE(algo);
    Settings s;
    s.algorithm = algo;
    const dctConfig_t cfg = explicitConfig(s);
    dctResult_t res = stepWithOneRankEdited(w, cfg, [](dctConfig_t& c) { c.wireType = dctFloat16; }, n);
    CHECK(res == dctInvalidUsage);
    CHECK(mentions(dctGetLastError(w.comm), "wireType"));
    res = stepWithOneRankEdited(w, cfg, [](dctConfig_t& c) { c.density = 0.02; }, n);
    CHECK(res == dctInvalidUsage);
    CHECK(mentions(dctGetLastError(w.comm), "density"));
    res = stepWithOneRankEdited(w, cfg, [](dctConfig_t& c) { c.warmupSteps = 1; }, n);
    CHECK(res == dctInvalidUsage);
    CHECK(mentions(dctGetLastError(w.comm), "warmupSteps"));
    res = stepWithOneRankEdited(w, cfg, [](dctConfig_t& c) { c.compressor = dctCompressorOnebit; }, n);
    CHECK(res == dctInvalidUsage);
    CHECK(mentions(dctGetLastError(w.comm), "path"));
    res = stepWithOneRankEdited(w, cfg, [](dctConfig_t& c) { c.autoGlobalTopk = 1; }, n);
    CHECK(res == dctInvalidUsage);
    CHECK(mentions(dctGetLastError(w.comm), "autoGlobalTopk"));
    res = stepWithOneRankEdited(w, cfg, [](dctConfig_t& c) { c.ownerReturn = 1; }, n);
    CHECK(res == dctInvalidUsage);
    CHECK(mentions(dctGetLastError(w.comm), "ownerReturn"));
    res = stepWithOneRankEdited(w, cfg, [](dctConfig_t& c) { c.algorithm = dctAlgoGlobalTopk; }, n);
    CHECK(res == dctInvalidUsage);
  }
  // A dense warm-up step on every rank, wire types apart: the call
  // header alone used to carry the datatype, and the dense allreduce ran
  // with two MPI types.
  Settings s;
  s.warmup = 2;
  const dctResult_t res =
      stepWithOneRankEdited(w, explicitConfig(s), [](dctConfig_t& c) { c.wireType = dctBFloat16; }, n);
  CHECK(res == dctInvalidUsage);
}

// On a hierarchical comm (nodes of two ranks) the top-K step starts in the
// node and the 1-bit step on the whole comm: the path must come from
// agreed facts, or a rank with no compressor (the preload shim's after a
// failed create) or a different kind waits in another collective.
TEST_CASE("hierarchical comm: 1-bit compressors with one rank's missing or top-K fail every rank") {
  World w(2);
  const size_t n = 4099;
  std::vector<float> in(n, 1.0f), out(n, 0.0f);
  for (int variant = 0; variant < 2; variant++) {
    CAPTURE(variant);
    dctConfig_t cfg = DCT_CONFIG_INITIALIZER;
    cfg.compressor = dctCompressorOnebit;
    const bool odd = w.size > 1 && w.rank == 1;
    if (odd && variant == 1) cfg.compressor = dctCompressorTopk;
    dctCompressor_t c = nullptr;
    if (!(odd && variant == 0)) REQUIRE(dctCompressorCreate(w.comm, n, dctFloat32, &cfg, &c) == dctSuccess);
    const dctResult_t res = dctSparseAllreduce(in.data(), out.data(), n, dctFloat32, dctSum, c, w.comm, nullptr);
    if (w.size == 1) CHECK(res == dctSuccess);
    else if (odd && variant == 0) CHECK(res == dctInvalidArgument);
    else CHECK(res == dctInvalidUsage);
    CHECK(allTrue(true));  // every rank got here
    dctCompressorDestroy(c);
  }
  // And the comm still works for a matched step afterwards.
  dctConfig_t cfg = DCT_CONFIG_INITIALIZER;
  cfg.compressor = dctCompressorOnebit;
  dctCompressor_t c = nullptr;
  REQUIRE(dctCompressorCreate(w.comm, n, dctFloat32, &cfg, &c) == dctSuccess);
  CHECK(dctSparseAllreduce(in.data(), out.data(), n, dctFloat32, dctSum, c, w.comm, nullptr) == dctSuccess);
  dctCompressorDestroy(c);
}

TEST_CASE("DCT_CHUNK_ELEMENTS=1 is raised to a bounded chunk count and gives the unchunked result") {
  const size_t n = 300007;
  Settings s;
  s.density = 0.05;
  s.interval = 1000;
  auto run = [&](long long chunk) {
    const ScopedEnv chunking("DCT_CHUNK_ELEMENTS", chunk);
    World w;
    const dctConfig_t cfg = explicitConfig(s);
    dctCompressor_t c = nullptr;
    REQUIRE(dctCompressorCreate(w.comm, n, dctFloat32, &cfg, &c) == dctSuccess);
    std::vector<float> g(n), out(n);
    for (int step = 0; step < 3; step++) {
      for (size_t i = 0; i < n; i++) g[i] = static_cast<float>(((i + 31 * step) * 7919 + w.rank) % 1009) - 504.0f;
      REQUIRE(dctSparseAllreduce(g.data(), out.data(), n, dctFloat32, dctSum, c, w.comm, nullptr) == dctSuccess);
    }
    dctCompressorDestroy(c);
    return out;
  };
  const std::vector<float> chunked = run(1), whole = run(0);
  CHECK(std::memcmp(chunked.data(), whole.data(), n * sizeof(float)) == 0);
}

// A step's late vote (its result converted after the exchange vote, in
// place) follows the headers: a rank that called out of place votes too.
TEST_CASE("in place on one rank, out of place on the others, with a converted result: every rank completes") {
  World w;
  const size_t n = 20011;
  for (dctAlgorithm_t algo : {dctAlgoAllgather, dctAlgoDense}) {
    CAPTURE(algo);
    Settings s;
    s.algorithm = algo;
    dctConfig_t cfg = explicitConfig(s);
    if (algo == dctAlgoDense) cfg.wireType = dctFloat32;  // dense: the sum in another type than the tensor's
    const dctDataType_t type = algo == dctAlgoDense ? dctFloat64 : dctFloat16;
    const size_t es = algo == dctAlgoDense ? 8 : 2;
    dctCompressor_t c = nullptr;
    REQUIRE(dctCompressorCreate(w.comm, n, type, &cfg, &c) == dctSuccess);
    std::vector<unsigned char> in(n * es, 0), out(n * es, 0);
    for (int step = 0; step < 3; step++) {
      for (size_t i = 0; i < n; i++) {  // small integers: exact in every type
        const double v = static_cast<double>((i * 7 + step + w.rank) % 13) - 6.0;
        if (es == 8) std::memcpy(&in[i * 8], &v, 8);
        else {
          const uint16_t h = refFloatToHalf(static_cast<float>(v));
          std::memcpy(&in[i * 2], &h, 2);
        }
      }
      const bool inPlace = w.rank == 0;
      void* recv = inPlace ? in.data() : out.data();
      REQUIRE(dctSparseAllreduce(in.data(), recv, n, type, dctSum, c, w.comm, nullptr) == dctSuccess);
      CHECK(identicalOnAllRanks(recv, n * es));
    }
    dctCompressorDestroy(c);
  }
}
