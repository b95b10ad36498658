// -C coo: the lossless sparse-input allreduce. Each rank holds a COO (its
// indices uniform over the tensor, or Zipf-drawn with -I zipf: the hot
// head every rank shares, as in embedding gradients); every call leaves the
// sum on every rank: dense, or with -O coo its nonzeros as COO (the form
// SparCML returns a sparse sum in).
//   dct    dctSparseInputAllreduce (-a picks the plan; auto by default)
//   dense  MPI_Allreduce of the densified input (made untimed)
//   peer   libdct's older route: dctSparseAllgather of every COO, then
//          zeroing the result and dctScatterAdd of all of it
// #wrong: elements of either libdct result off MPI's sum by more than
// rounding, plus a rank whose result differs from rank 0's.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "harness.h"

namespace dctbench {
namespace {

class CooCase final : public PerfCase {
 public:
  CooCase(const Options& opt, dctComm_t comm, MPI_Comm mpi) : opt_(opt), comm_(comm), mpi_(mpi) {
    MPI_Comm_rank(mpi, &rank_);
    MPI_Comm_size(mpi, &size_);
    counts_.resize(size_);
  }
  ~CooCase() override { teardown(); }

  const char* name() const override { return "coo"; }
  double busFactor(int n) const override { return 2.0 * (n - 1) / n; }
  const char* peerName() const override { return "dctSparseAllgather + zero + dctScatterAdd (dense result)"; }
  // The dense result is written once; the COO's bound is the wire's.
  double copiesPerCall() const override { return opt_.cooOutput ? 0 : 0.5; }

  bool setup(size_t count) override {
    count_ = count;
    resizeBytes(denseIn_, count * elem());
    resizeBytes(denseOut_, count * elem());
    resizeBytes(result_, count * elem());
    resizeBytes(peerResult_, count * elem());
    rng_.seed(opt_.seed * 1000003ull + rank_);
    return true;
  }

  // A fresh COO, its densified form, and room for the peer's gather.
  bool prepare() override {
    draw();
    std::fill(denseIn_.begin(), denseIn_.end(), 0.0);
    for (size_t j = 0; j < idx_.size(); j++) setValue(denseIn_.data(), idx_[j], j);
    size_t total = 0;
    dctResult_t res = dctSparseAllgather(values_.data(), idx_.data(), idx_.size(), count_, nullptr, nullptr, 0,
                                         counts_.data(), &total, opt_.dtype, comm_, nullptr);
    if (res != dctSuccess) reportDctFailure(comm_, rank_, "dctSparseAllgather (query)", res);
    if (total > gatheredIdx_.size()) {
      gatheredIdx_.resize(total);
      resizeBytes(gatheredVal_, total * elem());
    }
    total_ = total;
    const size_t bound = std::min(total, count_);  // the union's length, at most
    if (opt_.cooOutput && bound > outIdx_.size()) {
      outIdx_.resize(bound);
      resizeBytes(outVal_, bound * elem());
    }
    return res == dctSuccess;
  }

  bool runDense() override {
    int err = MPI_Allreduce(denseIn_.data(), denseOut_.data(), static_cast<int>(count_), mpiType(opt_.dtype), MPI_SUM,
                            mpi_);
    if (err != MPI_SUCCESS) std::fprintf(stderr, "[rank %d] MPI_Allreduce failed (%d)\n", rank_, err);
    return err == MPI_SUCCESS;
  }

  bool runDct() override {
    const bool coo = opt_.cooOutput;
    dctResult_t res = dctSparseInputAllreduce(
        idx_.data(), values_.data(), idx_.size(), count_, opt_.dtype, dctSum,
        static_cast<dctAlgorithm_t>(opt_.algorithm), coo ? nullptr : result_.data(), coo ? outIdx_.data() : nullptr,
        coo ? outVal_.data() : nullptr, coo ? outIdx_.size() : 0, &outNnz_, &info_, comm_, nullptr);
    if (res != dctSuccess) reportDctFailure(comm_, rank_, "dctSparseInputAllreduce", res);
    return res == dctSuccess;
  }

  bool runPeer() override {
    size_t total = 0;
    dctResult_t res = dctSparseAllgather(values_.data(), idx_.data(), idx_.size(), count_, gatheredVal_.data(),
                                         gatheredIdx_.data(), total_, counts_.data(), &total, opt_.dtype, comm_,
                                         nullptr);
    std::memset(peerResult_.data(), 0, count_ * elem());
    if (res == dctSuccess)
      res = dctScatterAdd(peerResult_.data(), count_, gatheredIdx_.data(), gatheredVal_.data(), total, opt_.dtype,
                          nullptr);
    if (res != dctSuccess) reportDctFailure(comm_, rank_, "allgather + scatter-add", res);
    return res == dctSuccess;
  }

  StepInfo lastStep() override {
    StepInfo info;
    info.algorithm = algorithmName(info_.algorithm);
    info.bytesSent = info_.bytesSent;
    info.bytesReceived = info_.bytesReceived;
    info.denseBytes = info_.denseBytes;
    return info;
  }

  long long check() override {
    bool ok = allOk(prepare(), mpi_);
    ok = ok && allOk(runDense(), mpi_) && allOk(runDct(), mpi_) && allOk(runPeer(), mpi_);
    if (!ok) return -1;
    if (opt_.cooOutput) {  // densified for the comparison; a COO out of order fails the check
      std::fill(result_.begin(), result_.end(), 0.0);
      for (size_t j = 0; j < outNnz_; j++) {
        const bool ascending = j == 0 || outIdx_[j] > outIdx_[j - 1];
        if (!ascending || outIdx_[j] >= count_) return -1;
        if (opt_.dtype == dctFloat64) result_[outIdx_[j]] = outVal_[j];
        else reinterpret_cast<float*>(result_.data())[outIdx_[j]] = reinterpret_cast<const float*>(outVal_.data())[j];
      }
    }
    long long wrong = 0;
    for (size_t i = 0; i < count_; i++) {
      const double want = value(denseOut_.data(), i);
      const double tol = 1e-6 * size_ * (std::fabs(want) + 1);
      wrong += std::fabs(value(result_.data(), i) - want) > tol;
      wrong += std::fabs(value(peerResult_.data(), i) - want) > tol;
    }
    if (!sameOnAllRanks(hashBytes(result_.data(), count_ * elem()), mpi_) && rank_ == 0) wrong++;
    return wrong;
  }

  void teardown() override {
    denseIn_ = denseOut_ = result_ = peerResult_ = values_ = gatheredVal_ = HostBuffer();
    outVal_ = HostBuffer();
    idx_ = gatheredIdx_ = outIdx_ = std::vector<uint32_t>();
  }

 private:
  size_t elem() const { return opt_.dtype == dctFloat64 ? 8 : 4; }
  double value(const double* b, size_t i) const {
    return opt_.dtype == dctFloat64 ? b[i] : reinterpret_cast<const float*>(b)[i];
  }
  void setValue(double* dense, size_t i, size_t j) const {
    if (opt_.dtype == dctFloat64) dense[i] = values_[j];
    else reinterpret_cast<float*>(dense)[i] = reinterpret_cast<const float*>(values_.data())[j];
  }

  // k = density * count positions: uniform (each kept with probability
  // density, geometric gaps) or k Zipf(1.1) draws over the tensor, distinct
  // ones kept; values uniform in [-1, 1).
  void draw() {
    idx_.clear();
    const double k = opt_.density * static_cast<double>(count_);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    if (!opt_.zipfIndices) {
      std::geometric_distribution<uint64_t> gap(opt_.density);
      for (uint64_t i = gap(rng_); i < count_; i += 1 + gap(rng_)) idx_.push_back(static_cast<uint32_t>(i));
    } else {
      // Inverse CDF of the continuous Zipf(s) density on [1, n + 1).
      const double s = 1.1, n1 = std::pow(static_cast<double>(count_) + 1.0, 1.0 - s);
      for (size_t d = 0; d < static_cast<size_t>(k); d++) {
        const double x = std::pow(1.0 + u(rng_) * (n1 - 1.0), 1.0 / (1.0 - s)) - 1.0;
        idx_.push_back(static_cast<uint32_t>(std::min<double>(x, static_cast<double>(count_ - 1))));
      }
      std::sort(idx_.begin(), idx_.end());
      idx_.erase(std::unique(idx_.begin(), idx_.end()), idx_.end());
    }
    resizeBytes(values_, idx_.size() * elem());
    std::uniform_real_distribution<double> v(-1.0, 1.0);
    for (size_t j = 0; j < idx_.size(); j++) {
      if (opt_.dtype == dctFloat64) values_[j] = v(rng_);
      else reinterpret_cast<float*>(values_.data())[j] = static_cast<float>(v(rng_));
    }
  }

  const Options& opt_;
  dctComm_t comm_;
  MPI_Comm mpi_;
  int rank_ = 0, size_ = 1;
  size_t count_ = 0, total_ = 0, outNnz_ = 0;
  std::mt19937_64 rng_;
  std::vector<uint32_t> idx_, gatheredIdx_, outIdx_;
  HostBuffer outVal_, values_, denseIn_, denseOut_, result_, peerResult_, gatheredVal_;
  std::vector<size_t> counts_;
  dctSparseInputInfo_t info_{};
};

}  // namespace

std::unique_ptr<PerfCase> makeCooCase(const Options& opt, dctComm_t comm, MPI_Comm mpi) {
  return std::make_unique<CooCase>(opt, comm, mpi);
}

}  // namespace dctbench
