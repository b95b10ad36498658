// -C allgather: dctSparseAllgather of each rank's COO message against what
// plain MPI needs for the same bytes: MPI_Allgather of the counts, then one
// MPI_Allgatherv of the packed (indices, values). The messages are DCT-DP
// compressions (dctCompress) of fresh gradient-like input, made untimed.
#include <climits>
#include <cstdio>
#include <cstring>

#include "gradients.h"
#include "harness.h"

namespace dctbench {
namespace {

class AllgatherCase final : public PerfCase {
 public:
  AllgatherCase(const Options& opt, dctComm_t comm, MPI_Comm mpi)
      : opt_(opt), comm_(comm), mpi_(mpi) {
    MPI_Comm_rank(mpi, &rank_);
    MPI_Comm_size(mpi, &size_);
    nnzAll_.resize(size_);
    byteCounts_.resize(size_);
    byteDispls_.resize(size_);
    recvCounts_.resize(size_);
  }
  ~AllgatherCase() override { teardown(); }

  const char* name() const override { return "allgather"; }
  double busFactor(int n) const override { return static_cast<double>(n - 1) / n; }

  bool setup(size_t count) override {
    count_ = count;
    resizeBytes(grad_, count * elem());
    resizeBytes(values_, count * elem());
    indices_.assign(count, 0);
    resizeBytes(packed_, count * entryBytes());
    source_ = std::make_unique<GradientSource>(opt_.seed * 1000003ull + rank_, opt_.uniform);
    dctConfig_t config = benchConfig(opt_);
    dctResult_t res = dctCompressorCreate(comm_, count, opt_.dtype, &config, &compressor_);
    if (res != dctSuccess) reportDctFailure(comm_, rank_, "dctCompressorCreate", res);
    return res == dctSuccess;
  }

  // New message, packed for MPI, and receive space for everyone's.
  bool prepare() override {
    source_->fill(grad_.data(), count_, opt_.dtype);
    dctResult_t res = dctCompress(compressor_, grad_.data(), indices_.data(), values_.data(),
                                  count_, &nnz_, nullptr);
    if (res != dctSuccess) {
      reportDctFailure(comm_, rank_, "dctCompress", res);
      nnz_ = 0;  // still take part in the collective query below
    }
    char* p = reinterpret_cast<char*>(packed_.data());
    std::memcpy(p, indices_.data(), nnz_ * sizeof(uint32_t));
    std::memcpy(p + nnz_ * sizeof(uint32_t), values_.data(), nnz_ * elem());
    size_t total = 0;
    dctResult_t q = dctSparseAllgather(values_.data(), indices_.data(), nnz_, count_, nullptr,
                                       nullptr, 0, recvCounts_.data(), &total, opt_.dtype, comm_,
                                       nullptr);
    if (q != dctSuccess) reportDctFailure(comm_, rank_, "dctSparseAllgather (query)", q);
    if (total * entryBytes() > static_cast<size_t>(INT_MAX)) {
      std::fprintf(stderr, "[rank %d] gathered message exceeds MPI's int counts\n", rank_);
      return false;
    }
    if (total > capacity_) {
      capacity_ = total;
      recvIndices_.assign(total, 0);
      resizeBytes(recvValues_, total * elem());
      resizeBytes(recvPacked_, total * entryBytes());
    }
    return res == dctSuccess && q == dctSuccess;
  }

  bool runDense() override {
    int mine = static_cast<int>(nnz_);
    int err = MPI_Allgather(&mine, 1, MPI_INT, nnzAll_.data(), 1, MPI_INT, mpi_);
    int offset = 0;
    for (int r = 0; r < size_; r++) {
      byteCounts_[r] = nnzAll_[r] * static_cast<int>(entryBytes());
      byteDispls_[r] = offset;
      offset += byteCounts_[r];
    }
    if (err == MPI_SUCCESS)
      err = MPI_Allgatherv(packed_.data(), byteCounts_[rank_], MPI_BYTE, recvPacked_.data(),
                           byteCounts_.data(), byteDispls_.data(), MPI_BYTE, mpi_);
    if (err != MPI_SUCCESS) std::fprintf(stderr, "[rank %d] MPI baseline failed (%d)\n", rank_, err);
    return err == MPI_SUCCESS;
  }

  bool runDct() override {
    size_t total = 0;
    dctResult_t res = dctSparseAllgather(values_.data(), indices_.data(), nnz_, count_,
                                         recvValues_.data(), recvIndices_.data(), capacity_,
                                         recvCounts_.data(), &total, opt_.dtype, comm_, nullptr);
    if (res != dctSuccess) reportDctFailure(comm_, rank_, "dctSparseAllgather", res);
    return res == dctSuccess;
  }

  StepInfo lastStep() override {
    dctStats_t stats{};
    StepInfo info;
    info.algorithm = "allgather";
    if (dctCompressorGetStats(compressor_, &stats) != dctSuccess) return info;
    info.bytesSent = stats.bytesSent;  // nnz * (index + value bytes): what this rank sends
    info.denseBytes = stats.denseBytes;
    info.thresholdEstimates = stats.thresholdEstimates;
    return info;
  }

  // One more message through both paths: libdct's output must match MPI's
  // byte for byte, and be the same on every rank.
  long long check() override {
    bool ok = allOk(prepare(), mpi_);
    ok = ok && allOk(runDense(), mpi_);
    ok = ok && allOk(runDct(), mpi_);
    if (!ok) return -1;
    long long wrong = 0;
    const char* got = reinterpret_cast<const char*>(recvPacked_.data());
    size_t offset = 0;
    for (int r = 0; r < size_; r++) {
      const size_t n = static_cast<size_t>(nnzAll_[r]);
      if (recvCounts_[r] != n) wrong += static_cast<long long>(n > recvCounts_[r] ? n : recvCounts_[r]);
      const char* idx = got + byteDispls_[r];
      const char* val = idx + n * sizeof(uint32_t);
      const char* myVal = reinterpret_cast<const char*>(recvValues_.data()) + offset * elem();
      for (size_t j = 0; j < n && recvCounts_[r] == n; j++) {
        bool same = std::memcmp(idx + j * 4, &recvIndices_[offset + j], 4) == 0 &&
                    std::memcmp(val + j * elem(), myVal + j * elem(), elem()) == 0;
        wrong += !same;
      }
      offset += n;
    }
    uint64_t h = hashBytes(recvIndices_.data(), offset * 4) ^
                 (hashBytes(recvValues_.data(), offset * elem()) * 31);
    if (!sameOnAllRanks(h, mpi_) && rank_ == 0) wrong++;
    return wrong;
  }

  void teardown() override {
    if (compressor_) dctCompressorDestroy(compressor_);
    compressor_ = nullptr;
    grad_ = values_ = packed_ = recvValues_ = recvPacked_ = HostBuffer();
    indices_ = recvIndices_ = std::vector<uint32_t>();
    capacity_ = 0;
  }

 private:
  size_t elem() const { return opt_.dtype == dctFloat64 ? 8 : 4; }
  size_t entryBytes() const { return sizeof(uint32_t) + elem(); }

  const Options& opt_;
  dctComm_t comm_;
  MPI_Comm mpi_;
  int rank_ = 0, size_ = 1;
  size_t count_ = 0, nnz_ = 0, capacity_ = 0;
  HostBuffer grad_, values_, packed_, recvValues_, recvPacked_;
  std::vector<uint32_t> indices_, recvIndices_;
  std::vector<int> nnzAll_, byteCounts_, byteDispls_;
  std::vector<size_t> recvCounts_;
  std::unique_ptr<GradientSource> source_;
  dctCompressor_t compressor_ = nullptr;
};

}  // namespace

std::unique_ptr<PerfCase> makeAllgatherCase(const Options& opt, dctComm_t comm, MPI_Comm mpi) {
  return std::make_unique<AllgatherCase>(opt, comm, mpi);
}

}  // namespace dctbench
