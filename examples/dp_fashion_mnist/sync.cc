#include "sync.h"

namespace fmnist {
namespace {

const char* const kNames[] = {"dense", "dct", "dct-noef", "onebit"};

}  // namespace

bool parseSyncMode(const std::string& name, SyncMode* out) {
  for (int i = 0; i < 4; i++)
    if (name == kNames[i]) {
      *out = static_cast<SyncMode>(i);
      return true;
    }
  return false;
}

const char* syncModeName(SyncMode mode) { return kNames[static_cast<int>(mode)]; }

bool GradientSync::init(const Settings& settings, size_t count, MPI_Comm comm, std::string* error) {
  settings_ = settings;
  count_ = count;
  mpi_ = comm;
  MPI_Comm_size(comm, &ranks_);
  if (settings.mode == SyncMode::Dense) return true;
  dctConfig_t config = DCT_CONFIG_INITIALIZER;
  config.density = settings.density;
  config.algorithm = settings.algorithm;
  config.errorFeedback = settings.mode == SyncMode::DctNoEf ? 0 : 1;
  if (settings.mode == SyncMode::Onebit) config.compressor = dctCompressorOnebit;
  if (dctCommInitMpi(comm, &comm_) != dctSuccess ||
      dctCompressorCreate(comm_, count, dctFloat32, &config, &compressor_) != dctSuccess) {
    *error = std::string("libdct: ") + dctGetLastError(comm_);
    return false;
  }
  return true;
}

GradientSync::~GradientSync() {
  dctCompressorDestroy(compressor_);
  dctCommDestroy(comm_);
}

uint64_t GradientSync::ringBytes() const { return 2 * (ranks_ - 1) * count_ * sizeof(float) / ranks_; }

bool GradientSync::average(float* grads, std::string* error) {
  if (settings_.mode == SyncMode::Dense) {
    if (MPI_Allreduce(MPI_IN_PLACE, grads, static_cast<int>(count_), MPI_FLOAT, MPI_SUM, mpi_) != MPI_SUCCESS) {
      *error = "MPI_Allreduce failed";
      return false;
    }
    const float scale = 1.f / ranks_;
    for (size_t i = 0; i < count_; i++) grads[i] *= scale;
    lastBytes_ = ringBytes();
    return true;
  }
  if (dctSparseAllreduce(grads, grads, count_, dctFloat32, dctAvg, compressor_, comm_, nullptr) != dctSuccess) {
    *error = std::string("dctSparseAllreduce: ") + dctGetLastError(comm_);
    return false;
  }
  dctStats_t stats;
  dctCompressorGetStats(compressor_, &stats);
  lastBytes_ = stats.bytesSent;
  return true;
}

// A sent entry left the error-feedback residual whole: it is 0 there.
// Global top-k's owner residual is part of GetResidual; it is taken out
// first (x + 0 - x is 0 exactly, so a sent entry still reads 0).
bool GradientSync::zeroWhereSent(float* local, std::string* error) {
  if (settings_.mode != SyncMode::Dct) return true;
  residual_.resize(count_);
  owner_.resize(count_);
  size_t begin = 0, length = 0;
  if (dctCompressorGetResidual(compressor_, residual_.data(), nullptr) != dctSuccess ||
      dctCompressorGetOwnerResidual(compressor_, owner_.data(), &begin, &length, nullptr) != dctSuccess) {
    *error = std::string("libdct: ") + dctGetLastError(comm_);
    return false;
  }
  for (size_t i = 0; i < length; i++) residual_[begin + i] -= owner_[i];
  for (size_t i = 0; i < count_; i++)
    if (residual_[i] == 0.f) local[i] = 0.f;
  return true;
}

}  // namespace fmnist
