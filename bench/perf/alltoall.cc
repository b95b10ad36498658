// -C alltoall: DCT-MP's sparse all-to-all at a model-parallel boundary.
// Per size, one plan; per iteration three timed calls on fresh rows: dense
// MPI_Alltoallv of the full rows (the baseline), dctSparseAlltoall (forward,
// per-row top-K) and dctSparseAlltoallBackward (the gradient back along the
// reverse route, values only at the kept positions). The order alternates:
// dense, fwd, bwd on even iterations, fwd, bwd, dense on odd ones.
//
// Every row is a pure function of (seed, sender, receiver, step, row), so a
// receiver rebuilds the sender's rows and their top-K masks itself, and a
// sender rebuilds the gradient rows its peers sent back: the check needs no
// extra communication and compares bit for bit, each kept value rounded
// through the wire type (-W) by tests/common's independent conversions.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <numeric>
#include <vector>

#include "base/dtype.h"
#include "harness.h"
#include "wire_reference.h"

namespace dctbench {
namespace {

// ---- deterministic rows -----------------------------------------------------

uint64_t mix(uint64_t z) {  // splitmix64's finalizer, with its increment
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

enum : uint64_t { kTagActivation = 0xac7, kTagGradient = 0x96ad };

// Activation-like rows with exact ties on purpose. By a per-row hash:
//   1/8   quantized to {-1, -0.5, 0, 0.5, 1}: many ties at the cut
//   1/16  one nonzero in ~32: K can exceed the nonzeros, zeros tie
//   1/64  all zero: the mask is the K lowest columns
//   rest  Laplace magnitude (a 65536-entry table) * a per-column scale
//         (exp of a uniform in [-1,1)), random sign; table hits repeat, so
//         even these rows tie now and then.
// Zeros are always +0.0 (the receiver writes +0.0 off the mask). Gradients
// are uniform in [-1, 1).
class RowSource {
 public:
  RowSource(uint64_t seed, size_t rowLength) : seed_(mix(seed)), scale_(rowLength), mag_(1 << 16) {
    for (size_t k = 0; k < mag_.size(); k++)
      mag_[k] = static_cast<float>(-std::log((k + 0.5) / static_cast<double>(mag_.size())));
    for (size_t c = 0; c < rowLength; c++)
      scale_[c] = static_cast<float>(std::exp(unit(mix(seed_ ^ (0xc01ull << 40) ^ c))));
  }

  template <typename T>
  void activations(int from, int to, uint64_t step, size_t row, T* out) const {
    const uint64_t key = rowKey(kTagActivation, from, to, step, row);
    const unsigned cls = static_cast<unsigned>(mix(key) >> 56);
    const size_t n = scale_.size();
    for (size_t c = 0; c < n; c++) {
      const uint64_t h = mix(key + c);
      T v;
      if (cls < 32) {
        v = static_cast<T>(static_cast<int>(h % 5) - 2) * static_cast<T>(0.5);
      } else if (cls < 48) {
        v = h % 32 == 0 ? continuous<T>(h, c) : T(0);
      } else if (cls < 52) {
        v = T(0);
      } else {
        v = continuous<T>(h, c);
      }
      out[c] = v == T(0) ? T(0) : v;  // never -0.0
    }
  }

  template <typename T>
  void gradient(int from, int to, uint64_t step, size_t row, T* out) const {
    const uint64_t key = rowKey(kTagGradient, from, to, step, row);
    for (size_t c = 0; c < scale_.size(); c++) {
      T v = static_cast<T>(unit(mix(key + c)));
      out[c] = v == T(0) ? T(0) : v;
    }
  }

 private:
  static double unit(uint64_t h) {  // [-1, 1)
    return static_cast<double>(static_cast<int32_t>(h >> 32)) / 2147483648.0;
  }
  uint64_t rowKey(uint64_t tag, int from, int to, uint64_t step, size_t row) const {
    uint64_t k = mix(seed_ ^ tag);
    k = mix(k ^ static_cast<uint64_t>(from));
    k = mix(k ^ static_cast<uint64_t>(to));
    k = mix(k ^ step);
    return mix(k ^ row);
  }
  template <typename T>
  T continuous(uint64_t h, size_t c) const {
    T v = static_cast<T>(mag_[(h >> 8) & 0xffff]) * static_cast<T>(scale_[c]);
    return (h >> 40) & 1 ? -v : v;
  }

  uint64_t seed_;
  std::vector<float> scale_, mag_;
};

// The reference selection: the K largest |x|, ties to the lower column.
template <typename T>
void topKMask(const T* x, size_t n, size_t k, std::vector<uint32_t>& order,
              std::vector<char>& mask) {
  mask.assign(n, k >= n ? 1 : 0);
  if (k >= n) return;
  order.resize(n);
  std::iota(order.begin(), order.end(), 0u);
  std::nth_element(order.begin(), order.begin() + static_cast<long>(k), order.end(),
                   [x](uint32_t a, uint32_t b) {
                     T fa = std::fabs(x[a]), fb = std::fabs(x[b]);
                     return fa > fb || (fa == fb && a < b);
                   });
  for (size_t i = 0; i < k; i++) mask[order[i]] = 1;
}

template <typename T>
bool sameBits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

const char* maskFormatName(int f) {
  switch (f) {
    case 0: return "bitmap";
    case 1: return "idx1";
    case 2: return "idx2";
    case 4: return "idx4";
    case -1: return "rows";  // K >= rowLength: plain rows
    default: return "?";
  }
}

const char* envOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

// ---- one printed row ----------------------------------------------------------

struct Timing {
  double med = 0, lo = 0, hi = 0;
};

struct A2aRow {
  size_t bytes = 0, count = 0, rows = 0;
  Timing dense, fwd, bwd;
  double wireFwd = 0, wireBwd = 0;      // mean over ranks of stats' bytes sent
  double denseBytes = 0;                // mean over ranks of stats.denseBytesSent
  double linkFwd = 0, linkBwd = 0, linkDense = 0;  // max over ranks of max(sent, received)
  double keptDensity = 0;               // mean over ranks of stats.density
  int maskFormat = -2;
  double algbw = 0, busbw = 0;
  long long wrongFwd = -1, wrongBwd = -1, wrongDense = -1;
  long long wrong() const {
    return wrongFwd < 0 ? -1 : wrongFwd + wrongBwd + wrongDense;
  }
};

// ---- the benchmark --------------------------------------------------------------

enum Call { kDense = 0, kForward = 1, kBackward = 2 };

class AlltoallBench {
 public:
  AlltoallBench(const Options& opt, dctComm_t comm, MPI_Comm mpi)
      : opt_(opt), comm_(comm), mpi_(mpi), src_(opt.seed, opt.rowLength) {
    MPI_Comm_rank(mpi, &rank_);
    MPI_Comm_size(mpi, &nranks_);
    elem_ = opt.dtype == dctFloat64 ? 8 : 4;
    wire_ = opt.wireType == dctNumTypes ? opt.dtype : opt.wireType;
    D_ = opt.rowLength;
    // ceil(density * D), forgiving the product's rounding (0.07 * 100 is
    // 7.000000000000001) as the library does.
    double k = std::ceil(opt.density * static_cast<double>(D_) - 1e-9);
    K_ = k < 1 ? 1 : (k > static_cast<double>(D_) ? D_ : static_cast<size_t>(k));
    MPI_Type_contiguous(static_cast<int>(D_), mpiType(opt.dtype), &rowType_);
    MPI_Type_commit(&rowType_);
  }
  ~AlltoallBench() {
    destroyPlan();
    MPI_Type_free(&rowType_);
  }

  int run();

 private:
  // Any rank's send buffer: rows for rank 0 first; the remainder of
  // rows / nranks goes to the lower ranks. Rank p receives perPeer(p) rows
  // from every rank.
  size_t perPeer(int q) const {
    const size_t n = static_cast<size_t>(nranks_), uq = static_cast<size_t>(q);
    return rows_ / n + (uq < rows_ % n ? 1 : 0);
  }
  size_t sendOffset(int q) const {
    const size_t n = static_cast<size_t>(nranks_), uq = static_cast<size_t>(q);
    return uq * (rows_ / n) + std::min(uq, rows_ % n);
  }
  size_t recvOffset(int q) const { return static_cast<size_t>(q) * perPeer(rank_); }
  size_t rowBytes() const { return D_ * elem_; }
  template <typename T>
  T* rowsOf(HostBuffer& b) {
    return reinterpret_cast<T*>(b.data());
  }

  bool setup(size_t rows);
  void destroyPlan() {
    if (plan_) dctAlltoallPlanDestroy(plan_);
    plan_ = nullptr;
  }
  template <typename T>
  void fill(uint64_t step);
  void prepare(uint64_t step) {
    if (opt_.dtype == dctFloat64) fill<double>(step);
    else fill<float>(step);
  }
  bool call(Call c);
  bool timed(Call c, double& maxUs);
  bool iterate(A2aRow& row);
  template <typename T>
  void verify(uint64_t step, long long wrong[3]);
  bool check(A2aRow& row, uint64_t firstStep);

  void printHeader() const;
  void printRow(const A2aRow& r) const;
  void printFooter(const std::vector<A2aRow>& rows, bool failed) const;
  bool appendJson(const A2aRow& r) const;

  const Options& opt_;
  dctComm_t comm_;
  MPI_Comm mpi_;
  RowSource src_;
  int rank_ = 0, nranks_ = 1;
  size_t elem_ = 4, D_ = 64, K_ = 1, rows_ = 0;
  dctDataType_t wire_ = dctFloat32;  // the values' wire type (-W; the rows' own by default)
  MPI_Datatype rowType_ = MPI_DATATYPE_NULL;
  std::vector<int> sendCounts_, sendDispls_, recvCounts_, recvDispls_;
  HostBuffer send_, recvDense_, recvFwd_, gradSend_, gradRecv_;
  dctAlltoallPlan_t plan_ = nullptr;
  dctAlltoallStats_t stats_{};  // after the last forward / backward
};

bool AlltoallBench::setup(size_t rows) {
  destroyPlan();
  rows_ = rows;
  const size_t recvTotal = perPeer(rank_) * static_cast<size_t>(nranks_);
  if (rows_ > static_cast<size_t>(INT_MAX)) {
    std::fprintf(stderr, "[rank %d] %zu rows exceed MPI's int counts\n", rank_, rows_);
    return false;
  }
  std::vector<size_t> sendRows(nranks_), recvRows(nranks_);
  sendCounts_.resize(nranks_);
  sendDispls_.resize(nranks_);
  recvCounts_.resize(nranks_);
  recvDispls_.resize(nranks_);
  for (int q = 0; q < nranks_; q++) {
    sendRows[q] = perPeer(q);
    recvRows[q] = perPeer(rank_);
    sendCounts_[q] = static_cast<int>(sendRows[q]);
    sendDispls_[q] = static_cast<int>(sendOffset(q));
    recvCounts_[q] = static_cast<int>(recvRows[q]);
    recvDispls_[q] = static_cast<int>(recvOffset(q));
  }
  resizeBytes(send_, rows_ * rowBytes());
  resizeBytes(gradRecv_, rows_ * rowBytes());
  resizeBytes(recvDense_, recvTotal * rowBytes());
  resizeBytes(recvFwd_, recvTotal * rowBytes());
  resizeBytes(gradSend_, recvTotal * rowBytes());
  dctConfig_t config = DCT_CONFIG_INITIALIZER;
  config.density = opt_.density;
  config.rowSelection = dctRowTopK;  // the reference models top-K, whatever DCT_ROW_SELECTION says
  config.wireType = wire_;            // and rounds through -W, whatever DCT_WIRE_TYPE says
  dctResult_t res = dctAlltoallPlanCreate(comm_, sendRows.data(), recvRows.data(), D_, opt_.dtype,
                                          &config, &plan_);
  if (res != dctSuccess) {
    reportDctFailure(comm_, rank_, "dctAlltoallPlanCreate", res);
    plan_ = nullptr;
  }
  return res == dctSuccess;
}

// This step's rows to send and the gradients of the rows we will receive.
template <typename T>
void AlltoallBench::fill(uint64_t step) {
  T* send = rowsOf<T>(send_);
  T* grad = rowsOf<T>(gradSend_);
  for (int q = 0; q < nranks_; q++) {
    for (size_t j = 0, n = perPeer(q); j < n; j++)
      src_.activations(rank_, q, step, j, send + (sendOffset(q) + j) * D_);
    for (size_t j = 0, n = perPeer(rank_); j < n; j++)
      src_.gradient(rank_, q, step, j, grad + (recvOffset(q) + j) * D_);
  }
}

bool AlltoallBench::call(Call c) {
  if (c == kDense) {
    int err = MPI_Alltoallv(send_.data(), sendCounts_.data(), sendDispls_.data(), rowType_,
                            recvDense_.data(), recvCounts_.data(), recvDispls_.data(), rowType_,
                            mpi_);
    if (err != MPI_SUCCESS) std::fprintf(stderr, "[rank %d] MPI_Alltoallv failed (%d)\n", rank_, err);
    return err == MPI_SUCCESS;
  }
  dctResult_t res = c == kForward
                        ? dctSparseAlltoall(plan_, send_.data(), recvFwd_.data(), nullptr)
                        : dctSparseAlltoallBackward(plan_, gradSend_.data(), gradRecv_.data(), nullptr);
  if (res != dctSuccess) {
    reportDctFailure(comm_, rank_, c == kForward ? "dctSparseAlltoall" : "dctSparseAlltoallBackward",
                     res);
  }
  return res == dctSuccess;
}

// Barrier, MPI_Wtime around one call, max over ranks; the failure flag rides
// along with the time so that every rank stops together.
bool AlltoallBench::timed(Call c, double& maxUs) {
  MPI_Barrier(mpi_);
  double t0 = MPI_Wtime();
  bool ok = call(c);
  double mine[2] = {(MPI_Wtime() - t0) * 1e6, ok ? 0.0 : 1.0}, all[2];
  MPI_Allreduce(mine, all, 2, MPI_DOUBLE, MPI_MAX, mpi_);
  maxUs = all[0];
  if (ok && c != kDense && dctAlltoallPlanGetStats(plan_, &stats_) != dctSuccess) stats_ = {};
  return all[1] == 0.0;
}

void spread(const std::vector<double>& v, Timing& t) {
  t.med = median(v);
  t.lo = *std::min_element(v.begin(), v.end());
  t.hi = *std::max_element(v.begin(), v.end());
}

bool AlltoallBench::iterate(A2aRow& row) {
  std::vector<double> times[3];
  double fwdSent = 0, bwdSent = 0, denseSent = 0, kept = 0;
  double link[3] = {0, 0, 0};
  int format = -2;
  for (int it = 0; it < opt_.warmups + opt_.iters; it++) {
    prepare(static_cast<uint64_t>(it));
    static const Call kEven[3] = {kDense, kForward, kBackward};
    static const Call kOdd[3] = {kForward, kBackward, kDense};
    const Call* order = it % 2 == 0 ? kEven : kOdd;
    double us[3] = {0, 0, 0};
    for (int k = 0; k < 3; k++) {
      if (!timed(order[k], us[order[k]])) return false;
      if (order[k] == kForward) {
        fwdSent += static_cast<double>(stats_.forwardBytesSent);
        kept += stats_.density;
        format = stats_.maskFormat;
        link[kForward] = std::max(link[kForward],
            static_cast<double>(std::max(stats_.forwardBytesSent, stats_.forwardBytesReceived)));
      } else if (order[k] == kBackward) {
        bwdSent += static_cast<double>(stats_.backwardBytesSent);
        denseSent += static_cast<double>(stats_.denseBytesSent);
        link[kBackward] = std::max(link[kBackward],
            static_cast<double>(std::max(stats_.backwardBytesSent, stats_.backwardBytesReceived)));
      }
    }
    if (it < opt_.warmups) {
      fwdSent = bwdSent = denseSent = kept = 0;
      continue;
    }
    for (int k = 0; k < 3; k++) times[k].push_back(us[k]);
  }
  spread(times[kDense], row.dense);
  spread(times[kForward], row.fwd);
  spread(times[kBackward], row.bwd);
  // Dense bytes this rank moves to / from other ranks: the physical floor's input.
  const size_t mine = perPeer(rank_);
  link[kDense] = static_cast<double>(std::max(rows_ - mine, (nranks_ - 1) * mine) * rowBytes());
  const double n = static_cast<double>(opt_.iters);
  double local[4] = {fwdSent / n, bwdSent / n, denseSent / n, kept / n}, sum[4];
  MPI_Allreduce(local, sum, 4, MPI_DOUBLE, MPI_SUM, mpi_);
  double worst[3];
  MPI_Allreduce(link, worst, 3, MPI_DOUBLE, MPI_MAX, mpi_);
  row.wireFwd = sum[0] / nranks_;
  row.wireBwd = sum[1] / nranks_;
  row.denseBytes = sum[2] / nranks_;
  row.keptDensity = sum[3] / nranks_;
  row.linkDense = worst[kDense];
  row.linkFwd = worst[kForward];
  row.linkBwd = worst[kBackward];
  MPI_Allreduce(&format, &row.maskFormat, 1, MPI_INT, MPI_MAX, mpi_);
  row.algbw = row.fwd.med > 0 ? static_cast<double>(row.bytes) / (row.fwd.med * 1e3) : 0;
  row.busbw = row.algbw * (nranks_ - 1) / nranks_;
  return true;
}

// One checked step: outputs poisoned first (NaN bytes), so a row the
// library does not write cannot pass by accident. wrong: fwd, bwd, dense.
template <typename T>
void AlltoallBench::verify(uint64_t step, long long wrong[3]) {
  std::vector<T> x(D_), g(D_);
  std::vector<uint32_t> order;
  std::vector<char> mask;
  const T* fwd = rowsOf<T>(recvFwd_);
  const T* dense = rowsOf<T>(recvDense_);
  const T* back = rowsOf<T>(gradRecv_);
  const T* send = rowsOf<T>(send_);
  const T zero = T(0);
  auto wired = [this](T x) { return dcttest::throughWire(x, wire_); };
  for (int q = 0; q < nranks_; q++) {
    // What q sent us: its rows, masked by their own top-K.
    for (size_t j = 0, n = perPeer(rank_); j < n; j++) {
      src_.activations(q, rank_, step, j, x.data());
      topKMask(x.data(), D_, K_, order, mask);
      const size_t at = (recvOffset(q) + j) * D_;
      for (size_t c = 0; c < D_; c++) {
        wrong[0] += !sameBits(fwd[at + c], mask[c] ? wired(x[c]) : zero);
        wrong[2] += !sameBits(dense[at + c], x[c]);
      }
    }
    // What q sent back for our rows: its gradient, restricted to our masks.
    for (size_t j = 0, n = perPeer(q); j < n; j++) {
      const size_t at = (sendOffset(q) + j) * D_;
      topKMask(send + at, D_, K_, order, mask);
      src_.gradient(q, rank_, step, j, g.data());
      for (size_t c = 0; c < D_; c++) wrong[1] += !sameBits(back[at + c], mask[c] ? wired(g[c]) : zero);
    }
  }
}

bool AlltoallBench::check(A2aRow& row, uint64_t firstStep) {
  const int kSteps = 2;
  long long wrong[3] = {0, 0, 0};
  for (int s = 0; s < kSteps; s++) {
    const uint64_t step = firstStep + static_cast<uint64_t>(s);
    prepare(step);
    for (HostBuffer* b : {&recvDense_, &recvFwd_, &gradRecv_})
      std::memset(b->data(), 0xff, b->size() * sizeof(double));
    double us = 0;
    for (Call c : {kDense, kForward, kBackward})
      if (!timed(c, us)) return false;
    if (opt_.dtype == dctFloat64) verify<double>(step, wrong);
    else verify<float>(step, wrong);
  }
  long long total[3];
  MPI_Allreduce(wrong, total, 3, MPI_LONG_LONG, MPI_SUM, mpi_);
  row.wrongFwd = total[0];
  row.wrongBwd = total[1];
  row.wrongDense = total[2];
  return true;
}

int AlltoallBench::run() {
  if (rank_ == 0) printHeader();
  std::vector<A2aRow> printed;
  bool failed = false;
  size_t lastRows = 0;
  for (double bytes = static_cast<double>(opt_.minBytes);
       bytes <= static_cast<double>(opt_.maxBytes) * (1 + 1e-9); bytes *= opt_.stepFactor) {
    const size_t rows = static_cast<size_t>(bytes) / rowBytes();
    if (rows == 0 || rows == lastRows) continue;
    lastRows = rows;
    if (!allOk(setup(rows), mpi_)) {
      failed = true;
      break;
    }
    A2aRow row;
    row.rows = rows;
    row.count = rows * D_;
    row.bytes = row.count * elem_;
    bool ok = iterate(row);
    if (ok && opt_.check) {
      ok = check(row, static_cast<uint64_t>(opt_.warmups + opt_.iters));
      if (ok && row.wrong() != 0) failed = true;
    }
    if (!ok) {
      failed = true;
      break;
    }
    printed.push_back(row);
    if (rank_ == 0) {
      printRow(row);
      if (!opt_.jsonPath.empty() && !appendJson(row)) failed = true;
    }
  }
  destroyPlan();
  send_ = recvDense_ = recvFwd_ = gradSend_ = gradRecv_ = HostBuffer();
  if (rank_ == 0) printFooter(printed, failed);
  int mine = failed ? 1 : 0, any = 0;
  MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, mpi_);
  return any;
}

// ---- output -----------------------------------------------------------------------

void AlltoallBench::printHeader() const {
  int version = 0;
  dctGetVersion(&version);
  std::printf("# dct_perf: collective alltoall (DCT-MP forward + backward), libdct %d, %d ranks\n",
              version, nranks_);
  std::printf("# sizes %zu..%zu bytes of send buffer per rank x%g, iters %d, warmups %d, check %d,"
              " type %s, wire %s\n", opt_.minBytes, opt_.maxBytes, opt_.stepFactor, opt_.iters,
              opt_.warmups, opt_.check, dtypeName(opt_.dtype), dct::dtypeName(wire_));
  std::printf("# row length D %zu, density %g -> K = %zu per row (top-K, ties to the lower column),"
              " seed %llu\n", D_, opt_.density, K_, static_cast<unsigned long long>(opt_.seed));
  std::printf("# rows = size / (D * sizeof(type)), split evenly over the ranks (remainder to the"
              " lower ranks);\n# dense: MPI_Alltoallv of the full rows; fresh rows and gradients"
              " every iteration (untimed)\n");
  std::printf("# GLIBC_TUNABLES=%s DCT_NUM_THREADS=%s OMPI_MCA_coll_tuned_alltoallv_algorithm=%s\n",
              envOr("GLIBC_TUNABLES", "(unset)"), envOr("DCT_NUM_THREADS", "(unset)"),
              envOr("OMPI_MCA_coll_tuned_alltoallv_algorithm", "(unset)"));
  std::printf("# times: median over iters of the per-iteration max over ranks (us); bw in GB/s;"
              " fwd_x, bwd_x = dense_us / fwd_us, bwd_us\n");
  std::printf("#%11s %11s %9s %5s %6s %5s %8s %4s %6s %11s %10s %10s %7s %7s %11s %11s %7s %7s %7s"
              " %7s\n", "size", "count", "rows", "D", "type", "wire", "density", "K", "fmt", "dense_us",
              "fwd_us", "bwd_us", "fwd_x", "bwd_x", "wire_fwd", "wire_bwd", "ratio", "algbw",
              "busbw", "#wrong");
  std::fflush(stdout);
}

void AlltoallBench::printRow(const A2aRow& r) const {
  std::printf(" %11zu %11zu %9zu %5zu %6s %5s %8.4f %4zu %6s %11.1f %10.1f %10.1f %7.2f %7.2f %11.0f"
              " %11.0f %7.2f %7.3f %7.3f %7lld\n", r.bytes, r.count, r.rows, D_,
              dtypeName(opt_.dtype), dct::dtypeName(wire_), opt_.density, K_, maskFormatName(r.maskFormat), r.dense.med,
              r.fwd.med, r.bwd.med, r.fwd.med > 0 ? r.dense.med / r.fwd.med : 0.0,
              r.bwd.med > 0 ? r.dense.med / r.bwd.med : 0.0, r.wireFwd, r.wireBwd,
              r.wireFwd > 0 ? r.denseBytes / r.wireFwd : 0.0, r.algbw, r.busbw, r.wrong());
  std::fflush(stdout);
}

void AlltoallBench::printFooter(const std::vector<A2aRow>& rows, bool failed) const {
  std::printf("# per size: #wrong split fwd / bwd / dense; kept density (plan stats, mean over"
              " ranks) vs K/D %.4f\n", static_cast<double>(K_) / static_cast<double>(D_));
  double busSum = 0;
  long long wrong = 0;
  for (const A2aRow& r : rows) {
    std::printf("#   size %11zu: wrong %lld / %lld / %lld   kept density %.4f\n", r.bytes,
                r.wrongFwd, r.wrongBwd, r.wrongDense, r.keptDensity);
    busSum += r.busbw;
    if (r.wrong() > 0) wrong += r.wrong();
  }
  const bool checked = opt_.check != 0 && !rows.empty();
  std::printf("# Out of bounds values : %lld %s\n", wrong,
              failed ? "FAILED" : (checked ? "OK" : "(not checked)"));
  if (failed && wrong == 0) std::printf("# a libdct or MPI call failed: see stderr\n");
  std::printf("# Avg bus bandwidth    : %g\n",
              rows.empty() ? 0.0 : busSum / static_cast<double>(rows.size()));
  std::fflush(stdout);
}

bool AlltoallBench::appendJson(const A2aRow& r) const {
  FILE* f = std::fopen(opt_.jsonPath.c_str(), "a");
  if (f == nullptr) {
    std::fprintf(stderr, "dct_perf: cannot append to %s\n", opt_.jsonPath.c_str());
    return false;
  }
  std::fprintf(f,
               "{\"bench\":\"dct_perf\",\"time\":%lld,\"collective\":\"alltoall\",\"nranks\":%d,"
               "\"size\":%zu,\"count\":%zu,\"rows\":%zu,\"row_length\":%zu,\"type\":\"%s\","
               "\"wire_type\":\"%s\",\"density\":%g,\"k\":%zu,\"mask_format\":\"%s\",\"seed\":%llu,\"iters\":%d,"
               "\"warmups\":%d,",
               static_cast<long long>(std::time(nullptr)), nranks_, r.bytes, r.count, r.rows, D_,
               dtypeName(opt_.dtype), dct::dtypeName(wire_), opt_.density, K_, maskFormatName(r.maskFormat),
               static_cast<unsigned long long>(opt_.seed), opt_.iters, opt_.warmups);
  std::fprintf(f,
               "\"dense_us\":%.3f,\"dense_min_us\":%.3f,\"dense_max_us\":%.3f,"
               "\"fwd_us\":%.3f,\"fwd_min_us\":%.3f,\"fwd_max_us\":%.3f,"
               "\"bwd_us\":%.3f,\"bwd_min_us\":%.3f,\"bwd_max_us\":%.3f,"
               "\"fwd_speedup\":%.4f,\"bwd_speedup\":%.4f,",
               r.dense.med, r.dense.lo, r.dense.hi, r.fwd.med, r.fwd.lo, r.fwd.hi, r.bwd.med,
               r.bwd.lo, r.bwd.hi, r.fwd.med > 0 ? r.dense.med / r.fwd.med : 0.0,
               r.bwd.med > 0 ? r.dense.med / r.bwd.med : 0.0);
  std::fprintf(f,
               "\"wire_fwd\":%.1f,\"wire_bwd\":%.1f,\"dense_bytes\":%.1f,\"ratio\":%.4f,"
               "\"ratio_bwd\":%.4f,\"link_bytes_dense\":%.0f,\"link_bytes_fwd\":%.0f,"
               "\"link_bytes_bwd\":%.0f,\"kept_density\":%.6f,\"algbw\":%.4f,\"busbw\":%.4f,"
               "\"wrong\":%lld,\"wrong_fwd\":%lld,\"wrong_bwd\":%lld,\"wrong_dense\":%lld,"
               "\"glibc_tunables\":\"%s\"}\n",
               r.wireFwd, r.wireBwd, r.denseBytes, r.wireFwd > 0 ? r.denseBytes / r.wireFwd : 0.0,
               r.wireBwd > 0 ? r.denseBytes / r.wireBwd : 0.0, r.linkDense, r.linkFwd, r.linkBwd,
               r.keptDensity, r.algbw, r.busbw, r.wrong(), r.wrongFwd, r.wrongBwd, r.wrongDense,
               envOr("GLIBC_TUNABLES", ""));
  return std::fclose(f) == 0;
}

}  // namespace

int runAlltoallBench(const Options& opt, dctComm_t comm, MPI_Comm mpi) {
  AlltoallBench bench(opt, comm, mpi);
  return bench.run();
}

}  // namespace dctbench
