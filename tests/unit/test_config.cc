// Config resolution: defaults, env overrides, explicit fields, bad values.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "api/config.h"
#include "dct/dct.h"

using dct::resolveConfig;

TEST_CASE("defaults come from the brief") {
  dctConfig_t in = DCT_CONFIG_INITIALIZER, out;
  REQUIRE(resolveConfig(nullptr, &in, &out) == dctSuccess);
  CHECK(out.density == 0.01);
  CHECK(out.thresholdInterval == 1000);
  CHECK(out.errorFeedback == 1);
  CHECK(out.warmupSteps == 0);
  CHECK(out.thresholdMethod == dctThresholdSampled);
  CHECK(out.algorithm == dctAlgoAuto);
  CHECK(out.seed == 0);
  dctConfig_t fromNull;
  REQUIRE(resolveConfig(nullptr, nullptr, &fromNull) == dctSuccess);
  CHECK(fromNull.density == out.density);
  CHECK(fromNull.thresholdInterval == out.thresholdInterval);
  CHECK(fromNull.algorithm == out.algorithm);
  CHECK(fromNull.seed == out.seed);
}

TEST_CASE("env fills undefined fields; explicit fields win") {
  setenv("DCT_DENSITY", "0.05", 1);
  setenv("DCT_THRESHOLD_INTERVAL", "7", 1);
  setenv("DCT_ALGORITHM", "dense", 1);
  setenv("DCT_THRESHOLD_METHOD", "exact", 1);
  dctConfig_t in = DCT_CONFIG_INITIALIZER, out;
  REQUIRE(resolveConfig(nullptr, &in, &out) == dctSuccess);
  CHECK(out.density == 0.05);
  CHECK(out.thresholdInterval == 7);
  CHECK(out.algorithm == dctAlgoDense);
  CHECK(out.thresholdMethod == dctThresholdExact);
  in.density = 0.2;
  in.algorithm = dctAlgoAllgather;
  REQUIRE(resolveConfig(nullptr, &in, &out) == dctSuccess);
  CHECK(out.density == 0.2);
  CHECK(out.algorithm == dctAlgoAllgather);
  unsetenv("DCT_DENSITY");
  unsetenv("DCT_THRESHOLD_INTERVAL");
  unsetenv("DCT_ALGORITHM");
  unsetenv("DCT_THRESHOLD_METHOD");
}

TEST_CASE("bad fields are rejected with a message") {
  auto rejects = [](void (*edit)(dctConfig_t&), dctResult_t expected) {
    dctConfig_t in = DCT_CONFIG_INITIALIZER, out;
    edit(in);
    CHECK(resolveConfig(nullptr, &in, &out) == expected);
    CHECK(std::strlen(dctGetLastError(nullptr)) > 0);
  };
  rejects([](dctConfig_t& c) { c.density = 0.0; }, dctInvalidArgument);
  rejects([](dctConfig_t& c) { c.density = 1.5; }, dctInvalidArgument);
  rejects([](dctConfig_t& c) { c.density = -0.1; }, dctInvalidArgument);
  rejects([](dctConfig_t& c) { c.density = NAN; }, dctInvalidArgument);
  rejects([](dctConfig_t& c) { c.thresholdInterval = 0; }, dctInvalidArgument);
  rejects([](dctConfig_t& c) { c.errorFeedback = 2; }, dctInvalidArgument);
  rejects([](dctConfig_t& c) { c.warmupSteps = -1; }, dctInvalidArgument);
  rejects([](dctConfig_t& c) { c.thresholdMethod = 9; }, dctInvalidArgument);
  rejects([](dctConfig_t& c) { c.algorithm = -3; }, dctInvalidArgument);
  rejects([](dctConfig_t& c) { c.algorithm = dctAlgoSplit; }, dctNotSupported);
  rejects([](dctConfig_t& c) { c.magic = 0; }, dctInvalidArgument);
  rejects([](dctConfig_t& c) { c.size = 3; }, dctInvalidArgument);
  rejects([](dctConfig_t& c) { c.seed = -5; }, dctInvalidArgument);
  // An uninitialised struct (garbage) is refused too.
  dctConfig_t garbage;
  std::memset(&garbage, 0xab, sizeof(garbage));
  dctConfig_t out;
  CHECK(resolveConfig(nullptr, &garbage, &out) == dctInvalidArgument);
}

TEST_CASE("a density of exactly 1 is allowed") {
  dctConfig_t in = DCT_CONFIG_INITIALIZER, out;
  in.density = 1.0;
  CHECK(resolveConfig(nullptr, &in, &out) == dctSuccess);
}
