// -C onebit: dctSparseAllreduce with a 1-bit compressor (1-bit Adam's
// compressed allreduce, compression included in the time) against dense
// MPI_Allreduce of the same input.
//
// The -c 1 check replays the algorithm with plain MPI beside a fresh
// compressor: each rank runs its worker step on its own input, sends the
// decoded chunk j (+-scale per entry) to rank j, which averages in rank
// order, adds its server error, re-compresses, and the server chunks are
// allgathered; the library's output must match bit for bit on every rank.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "gradients.h"
#include "harness.h"
#include "onebit_scale_reference.h"

namespace dctbench {
namespace {

// This rank's scale of x, as specified (tests/common/onebit_scale_reference.h).
template <typename T>
T scaleOf(const std::vector<T>& x) {
  return dct::test::referenceScale<T>(dct::test::referenceSumOfSquares(x.data(), x.size()), x.size());
}

template <typename T>
struct Replay {
  int rank, P;
  size_t n, chunk;
  std::vector<T> worker, server;  // errors
  Replay(int r, int p, size_t count)
      : rank(r), P(p), n(count), chunk(dct::test::referenceChunkLength(count, p)), worker(count, T(0)) {
    server.assign(length(rank), T(0));
  }
  size_t begin(int j) const { return std::min(n, j * chunk); }
  size_t length(int j) const { return begin(j + 1) - begin(j); }

  // This rank's input in; the output every rank must hold out.
  bool step(const T* input, bool sum, MPI_Comm mpi, std::vector<T>& out) {
    std::vector<T> x(n), decoded(n);
    for (size_t i = 0; i < n; i++) x[i] = input[i] + worker[i];
    const T s = scaleOf(x);
    for (size_t i = 0; i < n; i++) decoded[i] = x[i] >= 0 ? s : -s;
    std::vector<int> sendCounts(P), sendDispls(P), recvCounts(P), recvDispls(P), outCounts(P), outDispls(P);
    for (int j = 0; j < P; j++) {
      sendCounts[j] = static_cast<int>(length(j));
      sendDispls[j] = static_cast<int>(begin(j));
      recvCounts[j] = static_cast<int>(length(rank));
      recvDispls[j] = static_cast<int>(j * length(rank));
      outCounts[j] = static_cast<int>(length(j));
      outDispls[j] = static_cast<int>(begin(j));
    }
    const MPI_Datatype type = sizeof(T) == 8 ? MPI_DOUBLE : MPI_FLOAT;
    std::vector<T> chunks(P * length(rank) + 1), y(length(rank)), mine(length(rank) + 1);
    if (MPI_Alltoallv(decoded.data(), sendCounts.data(), sendDispls.data(), type, chunks.data(), recvCounts.data(),
                      recvDispls.data(), type, mpi) != MPI_SUCCESS)
      return false;
    for (size_t k = 0; k < y.size(); k++) {
      T acc = chunks[k];
      for (int r = 1; r < P; r++) acc += chunks[r * y.size() + k];
      y[k] = acc / static_cast<T>(P) + server[k];
    }
    const T ss = scaleOf(y);
    for (size_t k = 0; k < y.size(); k++) mine[k] = y[k] >= 0 ? ss : -ss;
    out.assign(n + 1, T(0));
    if (MPI_Allgatherv(mine.data(), static_cast<int>(y.size()), type, out.data(), outCounts.data(), outDispls.data(),
                       type, mpi) != MPI_SUCCESS)
      return false;
    out.resize(n);
    int bad = std::isfinite(ss) ? 0 : 1;
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, mpi);
    for (T& o : out) o = bad ? std::numeric_limits<T>::quiet_NaN() : (sum ? o * static_cast<T>(P) : o);
    if (!bad) {
      for (size_t i = 0; i < n; i++) worker[i] = x[i] - decoded[i];
      for (size_t k = 0; k < y.size(); k++) server[k] = y[k] - mine[k];
    }
    return true;
  }
};

template <typename T>
long long checkTyped(const Options& opt, dctComm_t comm, MPI_Comm mpi, size_t count, GradientSource& source,
                     int steps) {
  int rank = 0, P = 1;
  MPI_Comm_rank(mpi, &rank);
  MPI_Comm_size(mpi, &P);
  dctConfig_t config = benchConfig(opt);
  config.compressor = dctCompressorOnebit;
  dctCompressor_t c = nullptr;
  dctResult_t res = dctCompressorCreate(comm, count, opt.dtype, &config, &c);
  if (res != dctSuccess) reportDctFailure(comm, rank, "check: dctCompressorCreate", res);
  if (!allOk(res == dctSuccess, mpi)) return -1;
  Replay<T> replay(rank, P, count);
  std::vector<T> grad(count), out(count), ref;
  long long wrong = 0;
  for (int step = 0; step < steps && wrong >= 0; step++) {
    source.fill(grad.data(), count, opt.dtype);
    res = dctSparseAllreduce(grad.data(), out.data(), count, opt.dtype, opt.op, c, comm, nullptr);
    if (res != dctSuccess) reportDctFailure(comm, rank, "check: dctSparseAllreduce", res);
    const bool replayed = replay.step(grad.data(), opt.op == dctSum, mpi, ref);
    if (!allOk(res == dctSuccess && replayed, mpi)) {
      wrong = -1;
      break;
    }
    long long bad = 0;
    for (size_t i = 0; i < count; i++)
      bad += std::memcmp(&out[i], &ref[i], sizeof(T)) != 0 && !(std::isnan(out[i]) && std::isnan(ref[i]));
    if (bad) std::fprintf(stderr, "[rank %d] onebit check step %d: %lld wrong elements\n", rank, step, bad);
    wrong += bad;
    if (!sameOnAllRanks(hashBytes(out.data(), count * sizeof(T)), mpi) && rank == 0) wrong++;
  }
  dctCompressorDestroy(c);
  return wrong;
}

class OnebitCase final : public PerfCase {
 public:
  OnebitCase(const Options& opt, dctComm_t comm, MPI_Comm mpi) : opt_(opt), comm_(comm), mpi_(mpi) {
    MPI_Comm_rank(mpi, &rank_);
  }
  ~OnebitCase() override { teardown(); }

  const char* name() const override { return "onebit"; }
  double busFactor(int n) const override { return 2.0 * (n - 1) / n; }

  bool setup(size_t count) override {
    count_ = count;
    const size_t bytes = count * (opt_.dtype == dctFloat64 ? 8 : 4);
    resizeBytes(grad_, bytes);
    resizeBytes(outDense_, bytes);
    resizeBytes(outDct_, bytes);
    source_ = std::make_unique<GradientSource>(opt_.seed * 1000003ull + rank_, opt_.uniform);
    dctConfig_t config = benchConfig(opt_);
    config.compressor = dctCompressorOnebit;
    dctResult_t res = dctCompressorCreate(comm_, count, opt_.dtype, &config, &compressor_);
    if (res != dctSuccess) reportDctFailure(comm_, rank_, "dctCompressorCreate", res);
    return res == dctSuccess;
  }

  bool prepare() override {
    source_->fill(grad_.data(), count_, opt_.dtype);
    return true;
  }

  // As allreduce: read the gradient and the worker error, write the error
  // and the result (the scale's second read of x is not counted).
  double copiesPerCall() const override { return 2; }

  bool runDense() override {
    int err = MPI_Allreduce(grad_.data(), outDense_.data(), static_cast<int>(count_), mpiType(opt_.dtype), MPI_SUM,
                            mpi_);
    if (err != MPI_SUCCESS) std::fprintf(stderr, "[rank %d] MPI_Allreduce failed (%d)\n", rank_, err);
    return err == MPI_SUCCESS;  // dctAvg's scaling is left out: 1-bit averages by construction
  }

  bool runDct() override {
    dctResult_t res =
        dctSparseAllreduce(grad_.data(), outDct_.data(), count_, opt_.dtype, opt_.op, compressor_, comm_, nullptr);
    if (res != dctSuccess) reportDctFailure(comm_, rank_, "dctSparseAllreduce", res);
    return res == dctSuccess;
  }

  StepInfo lastStep() override {
    dctStats_t stats{};
    StepInfo info;
    if (dctCompressorGetStats(compressor_, &stats) != dctSuccess) return info;
    info.bytesSent = stats.bytesSent;
    info.denseBytes = stats.denseBytes;
    info.algorithm = stats.algorithm == dctAlgoDense ? "dense" : "onebit";
    info.bytesReceived = stats.bytesReceived;
    for (int p = 0; p < dctNumPhases; p++) info.phaseUs[p] = stats.phaseUs[p];
    return info;
  }

  long long check() override {
    if (opt_.dtype == dctFloat64) return checkTyped<double>(opt_, comm_, mpi_, count_, *source_, 3);
    return checkTyped<float>(opt_, comm_, mpi_, count_, *source_, 3);
  }

  void teardown() override {
    if (compressor_) dctCompressorDestroy(compressor_);
    compressor_ = nullptr;
    grad_ = HostBuffer();
    outDense_ = HostBuffer();
    outDct_ = HostBuffer();
  }

 private:
  const Options& opt_;
  dctComm_t comm_;
  MPI_Comm mpi_;
  int rank_ = 0;
  size_t count_ = 0;
  HostBuffer grad_, outDense_, outDct_;
  std::unique_ptr<GradientSource> source_;
  dctCompressor_t compressor_ = nullptr;
};

}  // namespace

std::unique_ptr<PerfCase> makeOnebitCase(const Options& opt, dctComm_t comm, MPI_Comm mpi) {
  return std::make_unique<OnebitCase>(opt, comm, mpi);
}

}  // namespace dctbench
