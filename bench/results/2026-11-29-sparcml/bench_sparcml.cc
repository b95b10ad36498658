// bench_sparcml: SparCML's side of libdct's `dct_perf -C coo` job.
//
// Each rank holds a COO over n elements (each position kept with probability
// -D, geometric gaps from a mt19937_64 seeded seed*1000003+rank, values
// uniform in [-1,1) as float, unsigned indices: the same generator and seeding
// as dct_perf's coo case), packed into SparCML's `struct stream` (sparse items
// {idx,val}, or dense when that is smaller, SparCML's own convention). Every
// iteration draws a fresh input (untimed), then runs each selected algorithm
// on it (the order rotates per iteration), each between MPI_Barrier and
// MPI_Wtime; the time of an iteration is the max over ranks.
//   call      the SparCML call alone (its result: sparse or dense stream)
//   to_dense  the call plus writing the result into a dense n-element float
//             array (zero + scatter when sparse, memcpy when dense), which is
//             what libdct's dctSparseInputAllreduce hands back
// Algorithms: recdoubling (SSAR_Recursive_double), big (DSAR split allgather),
// small (SSAR split allgather), ring, and dense (MPI_Allreduce of the
// densified input, the baseline; its to_dense is its call).
// Check (-c 1, default): on the first iteration (a warmup when -w > 0), each
// algorithm's densified result against MPI_Allreduce of the densified input;
// #wrong counts elements with |got - want| > 1e-5 * (|want| + 1), summed
// over ranks, plus 1 when a rank's densified result differs from rank 0's.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "c_allreduce_big.h"
#include "c_allreduce_recdoubling.h"
#include "c_allreduce_ring.h"
#include "c_allreduce_small.h"

namespace {

using Idx = unsigned;
using Val = float;
using Item = s_item<Idx, Val>;

struct Options {
  int iters = 20, warmups = 5;
  size_t minBytes = 1 << 20, maxBytes = 16 << 20, count = 0;
  double factor = 2;
  double density = 0.01;
  unsigned long long seed = 1;
  bool check = true;
  std::vector<std::string> algos{"recdoubling", "big", "small", "ring", "dense"};
  std::string json;
};

const char* kAlgos[] = {"recdoubling", "big", "small", "ring", "dense"};

void usage() {
  std::printf(
      "usage: bench_sparcml [flags]   (run under mpirun; rank 0 prints)\n"
      "  SparCML's sparse allreduce (Renggli et al., SC'19, the authors' headers)\n"
      "  on dct_perf -C coo's input: uniform COO at density -D, values in [-1,1)\n"
      "  -b minbytes -e maxbytes  dense size range, bytes = n*4, K/M/G = 2^10/2^20/2^30\n"
      "                           (default 1M .. 16M)  -f factor between rows (default 2)\n"
      "  -N count                 one row of n = count elements (overrides -b/-e)\n"
      "  -n iters -w warmups      timed / untimed iterations (default 20 / 5)\n"
      "  -D density               fraction of positions each rank keeps (default 0.01)\n"
      "  -s seed                  input seed (default 1; rank r uses seed*1000003+r)\n"
      "  -a list                  comma list of recdoubling,big,small,ring,dense (default all)\n"
      "  -c 0|1                   check against MPI_Allreduce (default 1)\n"
      "  -J file                  append one JSON object per (size, algorithm)\n"
      "Columns: call_* = the SparCML call, todense_* = call + densify into n floats;\n"
      "median/min/max over iterations of the per-iteration max over ranks (us);\n"
      "result = the stream SparCML returned (sparse/dense/mixed over iterations),\n"
      "res_nnz = median items in it (n when dense); #wrong as described in the source.\n");
}

size_t parseBytes(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  size_t m = 1;
  if (end && *end) {
    switch (*end) {
      case 'k': case 'K': m = 1ull << 10; break;
      case 'm': case 'M': m = 1ull << 20; break;
      case 'g': case 'G': m = 1ull << 30; break;
      default: m = 0;
    }
  }
  if (m == 0 || v <= 0) {
    std::fprintf(stderr, "bad size '%s'\n", s);
    std::exit(2);
  }
  return static_cast<size_t>(v * m);
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "-h" || a == "--help") return false;
    else if (a == "-n") o.iters = std::atoi(next());
    else if (a == "-w") o.warmups = std::atoi(next());
    else if (a == "-b") o.minBytes = parseBytes(next());
    else if (a == "-e") o.maxBytes = parseBytes(next());
    else if (a == "-f") o.factor = std::atof(next());
    else if (a == "-N") o.count = parseBytes(next());
    else if (a == "-D") o.density = std::atof(next());
    else if (a == "-s") o.seed = std::strtoull(next(), nullptr, 10);
    else if (a == "-c") o.check = std::atoi(next()) != 0;
    else if (a == "-J") o.json = next();
    else if (a == "-a") {
      o.algos.clear();
      std::string list = next();
      size_t p = 0;
      while (p <= list.size()) {
        size_t q = list.find(',', p);
        if (q == std::string::npos) q = list.size();
        std::string name = list.substr(p, q - p);
        if (!name.empty()) {
          if (std::find(std::begin(kAlgos), std::end(kAlgos), name) == std::end(kAlgos)) {
            std::fprintf(stderr, "unknown algorithm '%s'\n", name.c_str());
            std::exit(2);
          }
          o.algos.push_back(name);
        }
        p = q + 1;
      }
    } else {
      std::fprintf(stderr, "unknown flag '%s'\n", a.c_str());
      std::exit(2);
    }
  }
  if (o.iters < 1 || o.warmups < 0 || o.density <= 0 || o.density > 1 || o.factor <= 1 || o.algos.empty()) {
    std::fprintf(stderr, "bad flags: need -n >= 1, -w >= 0, 0 < -D <= 1, -f > 1, -a nonempty\n");
    std::exit(2);
  }
  return true;
}

struct Stats {
  std::vector<double> call, dense;
  std::vector<unsigned> nnz;
  int denseResults = 0;
  long long wrong = -1;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t m = v.size();
  return m % 2 ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]);
}

class Bench {
 public:
  Bench(const Options& o, size_t n) : o_(o), n_(n) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    rng_.seed(o.seed * 1000003ull + rank_);
    const size_t maxBytes = sizeof(unsigned) + n * sizeof(Val);  // what SparCML's callers allocate
    send_ = static_cast<stream*>(std::malloc(maxBytes));
    recv_ = static_cast<stream*>(std::malloc(maxBytes));
    denseIn_.assign(n, 0.f);
    out_.assign(n, 0.f);
    ref_.assign(n, 0.f);
  }
  ~Bench() {
    std::free(send_);
    std::free(recv_);
  }

  // A fresh COO, packed SparCML's way, and its densified form.
  void draw() {
    idx_.clear();
    std::geometric_distribution<uint64_t> gap(o_.density);
    for (uint64_t i = gap(rng_); i < n_; i += 1 + gap(rng_)) idx_.push_back(static_cast<Idx>(i));
    val_.resize(idx_.size());
    std::uniform_real_distribution<double> v(-1.0, 1.0);
    for (auto& x : val_) x = static_cast<Val>(v(rng_));
    std::fill(denseIn_.begin(), denseIn_.end(), 0.f);
    for (size_t j = 0; j < idx_.size(); j++) denseIn_[idx_[j]] = val_[j];
    if (idx_.size() * (sizeof(Idx) + sizeof(Val)) >= n_ * sizeof(Val)) {
      send_->nofitems = static_cast<unsigned>(n_);
      std::memcpy(send_->items, denseIn_.data(), n_ * sizeof(Val));
    } else {
      send_->nofitems = static_cast<unsigned>(idx_.size());
      Item* it = reinterpret_cast<Item*>(send_->items);
      for (size_t j = 0; j < idx_.size(); j++) it[j] = Item{idx_[j], val_[j]};
    }
  }

  // One timed call of `algo`; returns {call_us, to_dense_us} maxed over ranks.
  void runOne(const std::string& algo, double t[2]) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    int err = MPI_SUCCESS;
    if (algo == "recdoubling") err = c_allreduce_recdoubling<Idx, Val>(send_, recv_, n_, MPI_COMM_WORLD);
    else if (algo == "big") err = c_allreduce_big<Idx, Val>(send_, recv_, n_, MPI_COMM_WORLD);
    else if (algo == "small") err = c_allreduce_small<Idx, Val>(send_, recv_, n_, MPI_COMM_WORLD);
    else if (algo == "ring") err = c_allreduce_ring<Idx, Val>(send_, recv_, n_, MPI_COMM_WORLD);
    else err = MPI_Allreduce(denseIn_.data(), out_.data(), static_cast<int>(n_), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    const double t1 = MPI_Wtime();
    if (algo != "dense") densify();
    const double t2 = MPI_Wtime();
    if (err != MPI_SUCCESS) {
      std::fprintf(stderr, "[rank %d] %s failed (%d)\n", rank_, algo.c_str(), err);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    double local[2] = {(t1 - t0) * 1e6, (t2 - t0) * 1e6};
    MPI_Allreduce(local, t, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  }

  bool resultDense() const { return recv_->nofitems == n_; }
  unsigned resultItems() const { return recv_->nofitems; }

  // out_ (the densified result of the last call) against MPI's sum.
  long long check() {
    MPI_Allreduce(denseIn_.data(), ref_.data(), static_cast<int>(n_), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    // BENCH_SPARCML_CORRUPT=1: rank 1 (or 0 alone) spoils one element, to see the check catch it.
    if (std::getenv("BENCH_SPARCML_CORRUPT") && rank_ == std::min(1, size_ - 1)) out_[n_ / 2] += 1.0f;
    long long wrong = 0;
    for (size_t i = 0; i < n_; i++) {
      const double want = ref_[i];
      wrong += std::fabs(static_cast<double>(out_[i]) - want) > 1e-5 * (std::fabs(want) + 1);
    }
    // Same bits on every rank: rank 0's result broadcast in 1M-element pieces.
    std::vector<float> piece;
    long long differs = 0;
    for (size_t off = 0; off < n_; off += 1 << 20) {
      const size_t len = std::min<size_t>(1 << 20, n_ - off);
      piece.assign(out_.begin() + off, out_.begin() + off + len);
      MPI_Bcast(piece.data(), static_cast<int>(len), MPI_FLOAT, 0, MPI_COMM_WORLD);
      differs |= std::memcmp(piece.data(), out_.data() + off, len * sizeof(float)) != 0;
    }
    long long mine = wrong + differs, total = 0;
    MPI_Allreduce(&mine, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    return total;
  }

  size_t nnz() const { return idx_.size(); }
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  void densify() {
    if (recv_->nofitems == n_) {
      std::memcpy(out_.data(), recv_->items, n_ * sizeof(Val));
    } else {
      std::memset(out_.data(), 0, n_ * sizeof(Val));
      const Item* it = reinterpret_cast<const Item*>(recv_->items);
      Val* o = out_.data();
      for (unsigned j = 0; j < recv_->nofitems; j++) o[it[j].idx] = it[j].val;
    }
  }

  const Options& o_;
  size_t n_;
  int rank_ = 0, size_ = 1;
  std::mt19937_64 rng_;
  std::vector<Idx> idx_;
  std::vector<Val> val_;
  std::vector<float> denseIn_, out_, ref_;
  stream* send_ = nullptr;
  stream* recv_ = nullptr;
};

void runSize(const Options& o, size_t n, FILE* json) {
  Bench b(o, n);
  const size_t na = o.algos.size();
  std::vector<Stats> st(na);
  double nnzSum = 0;
  for (int it = 0; it < o.warmups + o.iters; it++) {
    b.draw();
    nnzSum += static_cast<double>(b.nnz());
    for (size_t k = 0; k < na; k++) {
      const size_t a = (k + it) % na;  // rotate the order
      double t[2];
      b.runOne(o.algos[a], t);
      if (it == 0 && o.check) st[a].wrong = b.check();
      if (it >= o.warmups) {
        st[a].call.push_back(t[0]);
        st[a].dense.push_back(o.algos[a] == "dense" ? t[0] : t[1]);
        if (o.algos[a] != "dense") {
          st[a].nnz.push_back(b.resultItems());
          st[a].denseResults += b.resultDense();
        }
      }
    }
  }
  double nnzMean = 0;
  MPI_Allreduce(&nnzSum, &nnzMean, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  nnzMean /= static_cast<double>(b.size()) * (o.warmups + o.iters);
  if (b.rank() != 0) return;
  for (size_t a = 0; a < na; a++) {
    const Stats& s = st[a];
    const char* result = "dense";
    unsigned resNnz = static_cast<unsigned>(n);
    if (o.algos[a] != "dense") {
      result = s.denseResults == 0 ? "sparse" : s.denseResults == o.iters ? "dense" : "mixed";
      std::vector<unsigned> v = s.nnz;
      std::sort(v.begin(), v.end());
      resNnz = v[v.size() / 2];
    }
    const double cmed = median(s.call), cmin = *std::min_element(s.call.begin(), s.call.end()),
                 cmax = *std::max_element(s.call.begin(), s.call.end());
    const double dmed = median(s.dense), dmin = *std::min_element(s.dense.begin(), s.dense.end()),
                 dmax = *std::max_element(s.dense.begin(), s.dense.end());
    std::printf("%12zu %11zu %8.4f %11s %6s %10u %11.1f %11.1f %11.1f %11.1f %11.1f %11.1f %7lld\n", n * sizeof(Val),
                n, o.density, o.algos[a].c_str(), result, resNnz, cmed, cmin, cmax, dmed, dmin, dmax, s.wrong);
    if (json) {
      std::fprintf(json,
                   "{\"bench\":\"bench_sparcml\",\"nranks\":%d,\"size\":%zu,\"count\":%zu,\"density\":%g,"
                   "\"seed\":%llu,\"iters\":%d,\"warmups\":%d,\"algo\":\"%s\",\"result\":\"%s\","
                   "\"result_dense_iters\":%d,\"result_nnz\":%u,\"input_nnz_mean\":%.1f,"
                   "\"call_us\":%.3f,\"call_min_us\":%.3f,\"call_max_us\":%.3f,"
                   "\"to_dense_us\":%.3f,\"to_dense_min_us\":%.3f,\"to_dense_max_us\":%.3f,\"wrong\":%lld}\n",
                   b.size(), n * sizeof(Val), n, o.density, o.seed, o.iters, o.warmups, o.algos[a].c_str(), result,
                   o.algos[a] == "dense" ? o.iters : s.denseResults, resNnz, nnzMean, cmed, cmin, cmax, dmed, dmin,
                   dmax, s.wrong);
    }
  }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  Options o;
  if (!parse(argc, argv, o)) {
    if (rank == 0) usage();
    MPI_Finalize();
    return 0;
  }
  std::vector<size_t> counts;
  if (o.count) counts.push_back(o.count);
  else
    for (double b = static_cast<double>(o.minBytes); b <= static_cast<double>(o.maxBytes) * 1.0000001; b *= o.factor)
      counts.push_back(static_cast<size_t>(b) / sizeof(Val));
  for (size_t n : counts)
    if (n < static_cast<size_t>(size) || n > 0xffffffffull / 2) {
      if (rank == 0) std::fprintf(stderr, "count %zu out of range (>= ranks, < 2^31)\n", n);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  FILE* json = nullptr;
  if (rank == 0) {
    const char* gt = std::getenv("GLIBC_TUNABLES");
    std::printf("# bench_sparcml: SparCML sparse allreduce (authors' headers), %d ranks\n", size);
    std::printf("# iters %d, warmups %d, density %g, seed %llu, check %d, float values, unsigned indices\n", o.iters,
                o.warmups, o.density, o.seed, o.check ? 1 : 0);
    std::printf("# GLIBC_TUNABLES=%s\n", gt ? gt : "(unset)");
    std::printf("# times: median/min/max over iters of the per-iteration max over ranks (us); "
                "call = SparCML call, todense = call + densify into n floats\n");
    std::printf("%12s %11s %8s %11s %6s %10s %11s %11s %11s %11s %11s %11s %7s\n", "size", "count", "density", "algo",
                "result", "res_nnz", "call_med", "call_min", "call_max", "todense_med", "todense_min", "todense_max",
                "#wrong");
    if (!o.json.empty()) {
      json = std::fopen(o.json.c_str(), "a");
      if (!json) std::fprintf(stderr, "cannot open %s\n", o.json.c_str());
    }
  }
  for (size_t n : counts) runSize(o, n, json);
  if (json) std::fclose(json);
  MPI_Finalize();
  return 0;
}
