// Config resolution: defaults, env overrides, explicit fields, bad values.
// Every case starts from an environment without the DCT_* variables config
// reads, so the caller's environment cannot change an outcome.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "api/config.h"
#include "dct/dct.h"

using dct::resolveConfig;

namespace {

const char* const kConfigVars[] = {"DCT_DENSITY",        "DCT_THRESHOLD_INTERVAL", "DCT_ERROR_FEEDBACK",
                                   "DCT_WARMUP_STEPS",   "DCT_SEED",               "DCT_THRESHOLD_METHOD",
                                   "DCT_ALGORITHM",      "DCT_ROW_SELECTION",      "DCT_AUTO_GLOBAL_TOPK",
                                   "DCT_CAPACITY_FACTOR", "DCT_OWNER_RETURN"};

struct CleanEnv {
  CleanEnv() {
    for (const char* name : kConfigVars) unsetenv(name);
  }
};

}  // namespace

TEST_CASE_FIXTURE(CleanEnv, "defaults come from the brief") {
  dctConfig_t in = DCT_CONFIG_INITIALIZER, out;
  REQUIRE(resolveConfig(nullptr, dct::configEnvFromEnv(), &in, &out) == dctSuccess);
  CHECK(out.density == 0.01);
  CHECK(out.thresholdInterval == 1000);
  CHECK(out.errorFeedback == 1);
  CHECK(out.warmupSteps == 0);
  CHECK(out.thresholdMethod == dctThresholdSampled);
  CHECK(out.algorithm == dctAlgoAuto);
  CHECK(out.seed == 0);
  CHECK(out.rowSelection == dctRowTopK);
  CHECK(out.autoGlobalTopk == 0);
  CHECK(out.capacityFactor == 0.0);
  CHECK(out.ownerReturn == 0);
  dctConfig_t fromNull;
  REQUIRE(resolveConfig(nullptr, dct::configEnvFromEnv(), nullptr, &fromNull) == dctSuccess);
  CHECK(fromNull.density == out.density);
  CHECK(fromNull.thresholdInterval == out.thresholdInterval);
  CHECK(fromNull.algorithm == out.algorithm);
  CHECK(fromNull.seed == out.seed);
}

TEST_CASE_FIXTURE(CleanEnv, "env fills undefined fields; explicit fields win") {
  setenv("DCT_DENSITY", "0.05", 1);
  setenv("DCT_THRESHOLD_INTERVAL", "7", 1);
  setenv("DCT_ALGORITHM", "dense", 1);
  setenv("DCT_THRESHOLD_METHOD", "exact", 1);
  setenv("DCT_ROW_SELECTION", "threshold", 1);
  dctConfig_t in = DCT_CONFIG_INITIALIZER, out;
  REQUIRE(resolveConfig(nullptr, dct::configEnvFromEnv(), &in, &out) == dctSuccess);
  CHECK(out.rowSelection == dctRowThreshold);
  CHECK(out.density == 0.05);
  CHECK(out.thresholdInterval == 7);
  CHECK(out.algorithm == dctAlgoDense);
  CHECK(out.thresholdMethod == dctThresholdExact);
  in.density = 0.2;
  in.algorithm = dctAlgoAllgather;
  REQUIRE(resolveConfig(nullptr, dct::configEnvFromEnv(), &in, &out) == dctSuccess);
  CHECK(out.density == 0.2);
  CHECK(out.algorithm == dctAlgoAllgather);
  in.algorithm = dctAlgoSplit;  // the split algorithm is accepted like the others
  REQUIRE(resolveConfig(nullptr, dct::configEnvFromEnv(), &in, &out) == dctSuccess);
  CHECK(out.algorithm == dctAlgoSplit);
  setenv("DCT_ALGORITHM", "globaltopk", 1);
  setenv("DCT_AUTO_GLOBAL_TOPK", "1", 1);
  dctConfig_t fresh = DCT_CONFIG_INITIALIZER;
  REQUIRE(resolveConfig(nullptr, dct::configEnvFromEnv(), &fresh, &out) == dctSuccess);
  CHECK(out.algorithm == dctAlgoGlobalTopk);
  CHECK(out.autoGlobalTopk == 1);
  setenv("DCT_AUTO_GLOBAL_TOPK", "2", 1);
  CHECK(resolveConfig(nullptr, dct::configEnvFromEnv(), &fresh, &out) == dctInvalidArgument);
  setenv("DCT_AUTO_GLOBAL_TOPK", "1", 1);
  setenv("DCT_OWNER_RETURN", "1", 1);
  REQUIRE(resolveConfig(nullptr, dct::configEnvFromEnv(), &fresh, &out) == dctSuccess);
  CHECK(out.ownerReturn == 1);
  fresh.ownerReturn = 0;  // explicit wins
  REQUIRE(resolveConfig(nullptr, dct::configEnvFromEnv(), &fresh, &out) == dctSuccess);
  CHECK(out.ownerReturn == 0);
  fresh.ownerReturn = 2;
  CHECK(resolveConfig(nullptr, dct::configEnvFromEnv(), &fresh, &out) == dctInvalidArgument);
  CHECK(std::strstr(dctGetLastError(nullptr), "ownerReturn") != nullptr);
}

TEST_CASE_FIXTURE(CleanEnv, "the fixed-capacity mode: from the environment, and only where it can run") {
  setenv("DCT_CAPACITY_FACTOR", "1.5", 1);
  dctConfig_t in = DCT_CONFIG_INITIALIZER, out;
  REQUIRE(resolveConfig(nullptr, dct::configEnvFromEnv(), &in, &out) == dctSuccess);
  CHECK(out.capacityFactor == 1.5);
  in.capacityFactor = 0;  // explicit off wins
  REQUIRE(resolveConfig(nullptr, dct::configEnvFromEnv(), &in, &out) == dctSuccess);
  CHECK(out.capacityFactor == 0.0);
  in.capacityFactor = 2;
  in.compressor = dctCompressorOnebit;  // sizes already fixed: ignored, not refused
  CHECK(resolveConfig(nullptr, dct::configEnvFromEnv(), &in, &out) == dctSuccess);
  // Plans ignore the field; compressors are checked where they are made.
  in.compressor = dctCompressorTopk;
  in.thresholdMethod = dctThresholdBisect;
  REQUIRE(resolveConfig(nullptr, dct::configEnvFromEnv(), &in, &out) == dctSuccess);
  CHECK(dct::checkFixedCapacity(nullptr, out) == dctInvalidArgument);
  CHECK(std::strstr(dctGetLastError(nullptr), "sampl") != nullptr);
  in.thresholdMethod = dctThresholdSampled;
  in.algorithm = dctAlgoSplit;  // global top-k runs with fixed pieces; split does not
  REQUIRE(resolveConfig(nullptr, dct::configEnvFromEnv(), &in, &out) == dctSuccess);
  CHECK(dct::checkFixedCapacity(nullptr, out) == dctInvalidArgument);
  CHECK(std::strstr(dctGetLastError(nullptr), "allgather") != nullptr);
  in.algorithm = dctAlgoGlobalTopk;
  REQUIRE(resolveConfig(nullptr, dct::configEnvFromEnv(), &in, &out) == dctSuccess);
  CHECK(dct::checkFixedCapacity(nullptr, out) == dctSuccess);
  in.ownerReturn = 1;  // fixed owner slots keep their overflow: no return
  REQUIRE(resolveConfig(nullptr, dct::configEnvFromEnv(), &in, &out) == dctSuccess);
  CHECK(dct::checkFixedCapacity(nullptr, out) == dctInvalidArgument);
  CHECK(std::strstr(dctGetLastError(nullptr), "ownerReturn") != nullptr);
  in.ownerReturn = 0;
  in.algorithm = dctAlgoAuto;
  REQUIRE(resolveConfig(nullptr, dct::configEnvFromEnv(), &in, &out) == dctSuccess);
  CHECK(dct::checkFixedCapacity(nullptr, out) == dctSuccess);
  setenv("DCT_CAPACITY_FACTOR", "lots", 1);
  dctConfig_t fresh = DCT_CONFIG_INITIALIZER;
  CHECK(resolveConfig(nullptr, dct::configEnvFromEnv(), &fresh, &out) == dctInvalidArgument);
}

TEST_CASE_FIXTURE(CleanEnv, "bad fields are rejected with a message") {
  // The message names what was wrong (not just any earlier failure's text).
  auto rejects = [](void (*edit)(dctConfig_t&), dctResult_t expected, const char* names) {
    dctConfig_t in = DCT_CONFIG_INITIALIZER, out;
    edit(in);
    CAPTURE(names);
    CHECK(resolveConfig(nullptr, dct::configEnvFromEnv(), &in, &out) == expected);
    CHECK(std::strstr(dctGetLastError(nullptr), names) != nullptr);
  };
  rejects([](dctConfig_t& c) { c.density = 0.0; }, dctInvalidArgument, "density");
  rejects([](dctConfig_t& c) { c.density = 1.5; }, dctInvalidArgument, "density");
  rejects([](dctConfig_t& c) { c.density = -0.1; }, dctInvalidArgument, "density");
  rejects([](dctConfig_t& c) { c.density = NAN; }, dctInvalidArgument, "density");
  rejects([](dctConfig_t& c) { c.thresholdInterval = 0; }, dctInvalidArgument, "thresholdInterval");
  rejects([](dctConfig_t& c) { c.errorFeedback = 2; }, dctInvalidArgument, "errorFeedback");
  rejects([](dctConfig_t& c) { c.warmupSteps = -1; }, dctInvalidArgument, "warmupSteps");
  rejects([](dctConfig_t& c) { c.thresholdMethod = 9; }, dctInvalidArgument, "thresholdMethod");
  rejects([](dctConfig_t& c) { c.algorithm = -3; }, dctInvalidArgument, "algorithm");
  rejects([](dctConfig_t& c) { c.magic = 0; }, dctInvalidArgument, "DCT_CONFIG_INITIALIZER");
  rejects([](dctConfig_t& c) { c.size = 3; }, dctInvalidArgument, "DCT_CONFIG_INITIALIZER");
  rejects([](dctConfig_t& c) { c.seed = -5; }, dctInvalidArgument, "seed");
  rejects([](dctConfig_t& c) { c.rowSelection = 2; }, dctInvalidArgument, "rowSelection");
  rejects([](dctConfig_t& c) { c.autoGlobalTopk = 2; }, dctInvalidArgument, "autoGlobalTopk");
  rejects([](dctConfig_t& c) { c.algorithm = dctNumAlgorithms; }, dctInvalidArgument, "algorithm");
  rejects([](dctConfig_t& c) { c.capacityFactor = 0.5; }, dctInvalidArgument, "capacityFactor");
  rejects([](dctConfig_t& c) { c.capacityFactor = NAN; }, dctInvalidArgument, "capacityFactor");
  rejects([](dctConfig_t& c) { c.capacityFactor = 1e6; }, dctInvalidArgument, "capacityFactor");
  // An uninitialised struct (garbage) is refused too.
  dctConfig_t garbage;
  std::memset(&garbage, 0xab, sizeof(garbage));
  dctConfig_t out;
  CHECK(resolveConfig(nullptr, dct::configEnvFromEnv(), &garbage, &out) == dctInvalidArgument);
}

TEST_CASE_FIXTURE(CleanEnv, "a density of exactly 1 is allowed") {
  dctConfig_t in = DCT_CONFIG_INITIALIZER, out;
  in.density = 1.0;
  CHECK(resolveConfig(nullptr, dct::configEnvFromEnv(), &in, &out) == dctSuccess);
}

// A typo in a job script must not silently train with the default.
TEST_CASE_FIXTURE(CleanEnv, "a malformed variable is refused, naming it") {
  const char* const bad[][2] = {{"DCT_DENSITY", "abc"},         {"DCT_THRESHOLD_INTERVAL", "7x"},
                                {"DCT_ALGORITHM", "bogus"},      {"DCT_ERROR_FEEDBACK", "yes"},
                                {"DCT_WARMUP_STEPS", "1.5"},     {"DCT_SEED", "0x"},
                                {"DCT_THRESHOLD_METHOD", "fast"}, {"DCT_ROW_SELECTION", "topq"}};
  for (const auto& [name, value] : bad) {
    CAPTURE(name);
    CAPTURE(value);
    setenv(name, value, 1);
    dctConfig_t in = DCT_CONFIG_INITIALIZER, out;
    CHECK(resolveConfig(nullptr, dct::configEnvFromEnv(), &in, &out) == dctInvalidArgument);
    CHECK(std::strstr(dctGetLastError(nullptr), name) != nullptr);
    CHECK(resolveConfig(nullptr, dct::configEnvFromEnv(), nullptr, &out) == dctInvalidArgument);
    unsetenv(name);
  }
}

// What lets the MPI tests (and users) ignore the environment: a field that
// is set never reads its variable, malformed or not.
TEST_CASE_FIXTURE(CleanEnv, "explicit fields are immune to the environment") {
  setenv("DCT_DENSITY", "abc", 1);
  setenv("DCT_THRESHOLD_INTERVAL", "7x", 1);
  setenv("DCT_ERROR_FEEDBACK", "0", 1);
  setenv("DCT_WARMUP_STEPS", "5", 1);
  setenv("DCT_SEED", "9", 1);
  setenv("DCT_THRESHOLD_METHOD", "exact", 1);
  setenv("DCT_ALGORITHM", "bogus", 1);
  dctConfig_t in = DCT_CONFIG_INITIALIZER, out;
  in.density = 0.25;
  in.thresholdInterval = 3;
  in.errorFeedback = 1;
  in.warmupSteps = 0;
  in.seed = 4;
  in.thresholdMethod = dctThresholdSampled;
  in.algorithm = dctAlgoDense;
  REQUIRE(resolveConfig(nullptr, dct::configEnvFromEnv(), &in, &out) == dctSuccess);
  CHECK(out.density == 0.25);
  CHECK(out.thresholdInterval == 3);
  CHECK(out.errorFeedback == 1);
  CHECK(out.warmupSteps == 0);
  CHECK(out.seed == 4);
  CHECK(out.thresholdMethod == dctThresholdSampled);
  CHECK(out.algorithm == dctAlgoDense);
}

TEST_CASE_FIXTURE(CleanEnv, "the bisect threshold method is accepted by env and field") {
  setenv("DCT_THRESHOLD_METHOD", "bisect", 1);
  dctConfig_t in = DCT_CONFIG_INITIALIZER, out;
  REQUIRE(resolveConfig(nullptr, dct::configEnvFromEnv(), &in, &out) == dctSuccess);
  CHECK(out.thresholdMethod == dctThresholdBisect);
  unsetenv("DCT_THRESHOLD_METHOD");
  in.thresholdMethod = dctThresholdBisect;
  REQUIRE(resolveConfig(nullptr, dct::configEnvFromEnv(), &in, &out) == dctSuccess);
  CHECK(out.thresholdMethod == dctThresholdBisect);
  in.thresholdMethod = dctNumThresholdMethods;
  CHECK(resolveConfig(nullptr, dct::configEnvFromEnv(), &in, &out) == dctInvalidArgument);
}
