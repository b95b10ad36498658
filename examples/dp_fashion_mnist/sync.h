// Gradient synchronisation, one fused bucket per step: the mean over ranks
// of every rank's gradient, by dense MPI_Allreduce or by libdct.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dct/dct_mpi.h"

namespace fmnist {

enum class SyncMode { Dense, Dct, DctNoEf, Onebit };
bool parseSyncMode(const std::string& name, SyncMode* out);
const char* syncModeName(SyncMode mode);

class GradientSync {
 public:
  struct Settings {
    SyncMode mode = SyncMode::Dense;
    double density = 0.01;
    dctAlgorithm_t algorithm = dctAlgoAllgather;
  };
  // false with the reason in *error.
  bool init(const Settings& settings, size_t count, MPI_Comm comm, std::string* error);
  ~GradientSync();
  // grads = the mean over ranks (every rank ends with the same bits).
  bool average(float* grads, std::string* error);
  // DGC's momentum factor masking: local[i] = 0 where this rank's last step
  // sent entry i (dense: nowhere).
  bool zeroWhereSent(float* local, std::string* error);
  // Payload bytes this rank sent in the last step: libdct's own count, and
  // for dense what a ring allreduce sends, 2 (P-1)/P * 4 bytes per element.
  uint64_t lastBytesSent() const { return lastBytes_; }
  // What a ring allreduce of the bucket sends per rank.
  uint64_t ringBytes() const;

 private:
  Settings settings_;
  size_t count_ = 0;
  int ranks_ = 1;
  MPI_Comm mpi_ = MPI_COMM_NULL;
  dctComm_t comm_ = nullptr;
  dctCompressor_t compressor_ = nullptr;
  uint64_t lastBytes_ = 0;
  std::vector<float> residual_, owner_;
};

}  // namespace fmnist
