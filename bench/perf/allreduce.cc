// -C allreduce: dctSparseAllreduce (DCT-DP, the compression included in the
// time) against dense MPI_Allreduce of the same gradient.
#include <cstdio>
#include <cstring>

#include "allreduce_check.h"
#include "gradients.h"
#include "harness.h"

namespace dctbench {
namespace {

class AllreduceCase final : public PerfCase {
 public:
  AllreduceCase(const Options& opt, dctComm_t comm, MPI_Comm mpi)
      : opt_(opt), comm_(comm), mpi_(mpi) {
    MPI_Comm_rank(mpi, &rank_);
    MPI_Comm_size(mpi, &size_);
  }
  ~AllreduceCase() override { teardown(); }

  const char* name() const override { return "allreduce"; }
  double busFactor(int n) const override { return 2.0 * (n - 1) / n; }

  bool setup(size_t count) override {
    count_ = count;
    const size_t bytes = count * elemBytes();
    resizeBytes(grad_, bytes);
    resizeBytes(outDense_, bytes);
    resizeBytes(outDct_, bytes);
    source_ = std::make_unique<GradientSource>(opt_.seed * 1000003ull + rank_, opt_.uniform);
    dctConfig_t config = benchConfig(opt_);
    dctResult_t res = dctCompressorCreate(comm_, count, opt_.dtype, &config, &compressor_);
    if (res != dctSuccess) reportDctFailure(comm_, rank_, "dctCompressorCreate", res);
    return res == dctSuccess;
  }

  bool prepare() override {
    source_->fill(grad_.data(), count_, opt_.dtype);
    if (opt_.inPlace) std::memcpy(outDct_.data(), grad_.data(), count_ * elemBytes());  // outside the timing
    return true;
  }

  bool runDense() override {
    int err = MPI_Allreduce(grad_.data(), outDense_.data(), static_cast<int>(count_),
                            mpiType(opt_.dtype), MPI_SUM, mpi_);
    if (err != MPI_SUCCESS) {
      std::fprintf(stderr, "[rank %d] MPI_Allreduce failed (%d)\n", rank_, err);
      return false;
    }
    if (opt_.op == dctAvg) scaleDense();  // what a user of plain MPI must add
    return true;
  }

  bool runDct() override {
    const void* send = opt_.inPlace ? outDct_.data() : grad_.data();
    dctResult_t res = dctSparseAllreduce(send, outDct_.data(), count_, opt_.dtype, opt_.op, compressor_, comm_,
                                         nullptr);
    if (res != dctSuccess) reportDctFailure(comm_, rank_, "dctSparseAllreduce", res);
    return res == dctSuccess;
  }

  // Read the gradient and the residual, write the residual and the result.
  double copiesPerCall() const override { return 2; }

  StepInfo lastStep() override {
    dctStats_t stats{};
    StepInfo info;
    if (dctCompressorGetStats(compressor_, &stats) != dctSuccess) return info;
    info.bytesSent = stats.bytesSent;
    info.denseBytes = stats.denseBytes;
    info.algorithm = algorithmName(stats.algorithm);
    info.thresholdEstimates = stats.thresholdEstimates;
    info.bytesReceived = stats.bytesReceived;
    for (int p = 0; p < dctNumPhases; p++) info.phaseUs[p] = stats.phaseUs[p];
    info.ownerKept = stats.ownerKept;
    info.ownerThreshold = stats.ownerThreshold;
    info.ownerResidualMass = stats.ownerResidualMass;
    return info;
  }

  long long check() override {
    return checkSparseAllreduce(opt_, comm_, mpi_, count_, *source_, 3);
  }

  void teardown() override {
    if (compressor_) dctCompressorDestroy(compressor_);
    compressor_ = nullptr;
    grad_ = HostBuffer();
    outDense_ = HostBuffer();
    outDct_ = HostBuffer();
  }

 private:
  size_t elemBytes() const { return opt_.dtype == dctFloat64 ? 8 : 4; }

  void scaleDense() {
    if (opt_.dtype == dctFloat64) {
      double* x = outDense_.data();
      for (size_t i = 0; i < count_; i++) x[i] *= 1.0 / size_;
    } else {
      float* x = reinterpret_cast<float*>(outDense_.data());
      const float f = 1.0f / static_cast<float>(size_);
      for (size_t i = 0; i < count_; i++) x[i] *= f;
    }
  }

  const Options& opt_;
  dctComm_t comm_;
  MPI_Comm mpi_;
  int rank_ = 0, size_ = 1;
  size_t count_ = 0;
  HostBuffer grad_, outDense_, outDct_;
  std::unique_ptr<GradientSource> source_;
  dctCompressor_t compressor_ = nullptr;
};

}  // namespace

std::unique_ptr<PerfCase> makeAllreduceCase(const Options& opt, dctComm_t comm, MPI_Comm mpi) {
  return std::make_unique<AllreduceCase>(opt, comm, mpi);
}

}  // namespace dctbench
