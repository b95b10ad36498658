// What the plan fault tests (all-to-all, DES) record of a run of calls, and
// the check that a faulty run committed exactly what a clean one did:
// outputs bit for bit (DES sums may hold NaN), the plan's stats field by field.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "../common/same_bytes.h"
#include "dct/dct.h"
#include "fault_util.h"

namespace dcttest {

struct PlanRun {
  std::vector<std::vector<float>> outputs;  // per call: forward's result, then backward's
  dctAlltoallStats_t stats{};
  uint64_t ops = 0;
  int failedCalls = 0;
};

// Calls `call` until it succeeds (a fault is one-shot), every rank agreeing
// on each outcome and a failure explained; counts the failures.
template <typename Call>
void retried(PlanRun& run, dctComm_t comm, Call&& call) {
  for (int attempt = 0;; attempt++) {
    REQUIRE(attempt < 4);
    const dctResult_t res = call();
    REQUIRE(allRanksAgree(res == dctSuccess));
    if (res == dctSuccess) return;
    CHECK(std::strlen(dctGetLastError(comm)) > 0);
    run.failedCalls++;
  }
}

inline void requireSame(const PlanRun& a, const PlanRun& b) {
  REQUIRE(a.outputs.size() == b.outputs.size());
  for (size_t i = 0; i < a.outputs.size(); i++) {
    REQUIRE(a.outputs[i].size() == b.outputs[i].size());
    REQUIRE(sameBytes(a.outputs[i].data(), b.outputs[i].data(), a.outputs[i].size() * sizeof(float)));
  }
  CHECK(a.stats.forwardSteps == b.stats.forwardSteps);
  CHECK(a.stats.backwardSteps == b.stats.backwardSteps);
  CHECK(a.stats.keptEntries == b.stats.keptEntries);
  CHECK(a.stats.threshold == b.stats.threshold);
  CHECK(a.stats.totalBytesSent == b.stats.totalBytesSent);
  CHECK(a.stats.totalBytesReceived == b.stats.totalBytesReceived);
}

}  // namespace dcttest
