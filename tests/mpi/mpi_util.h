// Shared helpers for the MPI tests: a dct comm per test, configs with every
// field set, cross-rank hash comparison, and gathering every rank's COO
// message.
#pragma once

#include <doctest/doctest.h>
#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <cstdlib>
#include <string>
#include <vector>

#include "dct/dct_mpi.h"

namespace dcttest {

struct World {
  int rank = 0, size = 1;
  dctComm_t comm = nullptr;
  World() : World(0) {}
  // localSize > 0: a hierarchical comm (DCT_HIERARCHY=1) whose nodes are
  // runs of localSize ranks (DCT_LOCAL_SIZE).
  explicit World(int localSize);
  ~World() { dctCommDestroy(comm); }
};

// Every field set, so no DCT_* variable in the caller's environment can
// change what a test runs (explicit fields win over the environment).
struct Settings {
  double density = 0.01;
  dctAlgorithm_t algorithm = dctAlgoAllgather;
  dctThresholdMethod_t method = dctThresholdExact;
  int interval = 1;
  int warmup = 0;
  bool errorFeedback = true;
  long long seed = 0;
  long long chunkElems = 0;  // > 0: the comm's chunk size while the compressor runs (ScopedChunking)
  double capacity = 0;       // config.capacityFactor (> 0: the fixed-capacity mode)
};

// An environment variable set for a scope, for the comms created in it (they
// read DCT_* once, at creation); 0: left alone.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, long long value) : name_(name) {
    if (value <= 0) return;
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv(name, std::to_string(value).c_str(), 1);
    set_ = true;
  }
  ~ScopedEnv() {
    if (!set_) return;
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false, set_ = false;
};

inline World::World(int localSize) {
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const ScopedEnv hierarchy("DCT_HIERARCHY", localSize > 0 ? 1 : 0);
  const ScopedEnv local("DCT_LOCAL_SIZE", localSize);
  REQUIRE(dctCommInitMpi(MPI_COMM_WORLD, &comm) == dctSuccess);
}

inline dctConfig_t explicitConfig(const Settings& s) {
  dctConfig_t cfg = DCT_CONFIG_INITIALIZER;
  cfg.density = s.density;
  cfg.thresholdInterval = s.interval;
  cfg.errorFeedback = s.errorFeedback ? 1 : 0;
  cfg.warmupSteps = s.warmup;
  cfg.thresholdMethod = s.method;
  cfg.algorithm = s.algorithm;
  cfg.seed = s.seed;
  cfg.rowSelection = dctRowTopK;
  cfg.capacityFactor = s.capacity;
  return cfg;
}

inline uint64_t fnv1a(const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < bytes; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// True when every rank holds the same bytes.
inline bool identicalOnAllRanks(const void* data, size_t bytes) {
  uint64_t h = fnv1a(data, bytes), lo = 0, hi = 0;
  MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  return lo == hi;
}

// Every rank's (indices, values), concatenated in rank order.
template <typename T>
void gatherMessages(const std::vector<uint32_t>& idx, const std::vector<T>& val, size_t nnz,
                    std::vector<uint32_t>& allIdx, std::vector<T>& allVal) {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int mine = static_cast<int>(nnz);
  std::vector<int> counts(size), displs(size);
  MPI_Allgather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  int total = 0;
  for (int r = 0; r < size; r++) {
    displs[r] = total;
    total += counts[r];
  }
  allIdx.resize(total);
  allVal.resize(total);
  MPI_Datatype vt = sizeof(T) == 8 ? MPI_DOUBLE : MPI_FLOAT;
  MPI_Allgatherv(idx.data(), mine, MPI_UINT32_T, allIdx.data(), counts.data(), displs.data(),
                 MPI_UINT32_T, MPI_COMM_WORLD);
  MPI_Allgatherv(val.data(), mine, vt, allVal.data(), counts.data(), displs.data(), vt,
                 MPI_COMM_WORLD);
}

inline bool allTrue(bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

}  // namespace dcttest
