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

}  // namespace fmnist
