// kernel_perf: GB/s of the CPU twin's compression kernels and their ratio
// to memcpy, per size, at one thread count per process (-t; run it twice,
// e.g. -t 1 and without -t, to see the single-thread and all-core numbers).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/dtype.h"
#include "count_arg.h"
#include "kernel_bench.h"
#include "threshold_bench.h"
#include "kernels/thread_pool.h"

namespace {

using dctbench::parseCount;

const char* kHelp =
    "usage: kernel_perf [-b minN] [-e maxN] [-f factor] [-n reps] [-t threads]\n"
    "                   [-d float|double] [-D density] [-L rowLength] [-K rowDensity]\n"
    "       kernel_perf -T [-b minN] [-e maxN] [-f factor] [-n reps] [-t threads]\n"
    "                   [-d float|double|half|bf16] [-D density]\n"
    "  -b/-e  element counts, K/M suffixes = 2^10/2^20 (default 64K .. 64M, i.e. 2^16..2^26)\n"
    "  -f     size multiplier (default 2)\n"
    "  -n     timed repetitions per kernel, median reported (default 10; +1 warm-up)\n"
    "  -t     worker threads: sets DCT_NUM_THREADS before the pool starts (the\n"
    "         pool is sized once per process). Default: the library's choice,\n"
    "         all cores of this process's cpuset. Run with -t 1 and without.\n"
    "  -d     element type (default float)   -D  selected fraction (default 0.01)\n"
    "  -L/-K  DCT-MP rows: length (default 64) and kept fraction per row (default 0.05)\n"
    "Kernels, as the compressor calls them through the CPU ops table:\n"
    "  select (fused EF + threshold + compaction, tau set for ~density by the\n"
    "  exact estimator), accumulate, scatter (of the 1% message select made),\n"
    "  pack (its indices delta bit-packed for the wire), scatter-packed (the\n"
    "  scatter-add reading packed indices), merge-4 / check-4 / union-4 (four\n"
    "  such messages summed dense, checked, summed as COO), union-2, union-1,\n"
    "  select-coo / dense-coo (a dense array's entries at tau as COO: the select\n"
    "  with its remainder written, and denseCoo), tau-sample, tau-exact, the DCT-MP\n"
    "  row kernels (row-select: per-row top-K; row-pack: kept values and 1-byte\n"
    "  indices for the wire; row-unpack: back into dense rows), the 1-bit\n"
    "  kernels at 4 ranks (onebit-worker: a worker's compression; onebit-server:\n"
    "  a server's compression of the ranks' mean; onebit-decode), memcpy.\n"
    "Bytes per call (es = sizeof(type)):\n"
    "  select, accumulate   3*es per element (read grad, read+write residual)\n"
    "  scatter              4+3*es per message entry (index, value, dense r+w)\n"
    "  pack                 4 per message entry (the plain index read)\n"
    "  scatter-packed       4+3*es per message entry (as scatter)\n"
    "  select-coo           2*es per element (read, write the remainder) + 4+es per entry\n"
    "  dense-coo            es per element (read) + 4+es per entry\n"
    "  tau-sample           es per sampled position\n"
    "  tau-exact            2*es per element (read x, write |x|; nth_element not counted)\n"
    "  row-select/-pack/-unpack  es per element (dense-row equivalent, see row_bench.h)\n"
    "  onebit-worker        3*es per element (read input and kept x, write x)\n"
    "  onebit-server        2*es per element (read and write its kept x)\n"
    "  onebit-decode        es per element (write the result)\n"
    "  memcpy               2*es per element\n"
    "x_memcpy = kernel GB/s / memcpy GB/s at the same size and threads.\n"
    "-T: the threshold estimators side by side instead (sampled / exact / bisect:\n"
    "  median us per estimate, bisect's counting passes, the count tau selects vs\n"
    "  k) on normal, grad (t3 x log-normal scale) and cauchy inputs, as a markdown\n"
    "  table. Defaults there: 1M .. 16M by 4, densities 0.001, 0.01 and 0.1\n"
    "  (-D picks one), 5 reps.\n";

// 0 to run, 1 after help, -1 on a bad flag.
int parse(int argc, char** argv, dctbench::KernelOptions& opt, bool& thresholds,
          dctbench::ThresholdBenchOptions& topt) {
  int c;
  opterr = 0;
  bool sized = false, factored = false, repeated = false, dense = false;
  while ((c = getopt(argc, argv, "b:e:f:n:t:d:D:L:K:Th")) != -1) {
    bool ok = true;
    switch (c) {
      case 'b': ok = parseCount(optarg, opt.minN); sized = true; break;
      case 'e': ok = parseCount(optarg, opt.maxN); sized = true; break;
      case 'f': opt.factor = std::atof(optarg); ok = opt.factor > 1.0; factored = true; break;
      case 'n': opt.reps = std::atoi(optarg); ok = opt.reps >= 1; repeated = true; break;
      case 't': opt.threads = std::atoi(optarg); ok = opt.threads >= 1; break;
      case 'd': ok = dctbench::parseThresholdType(optarg, opt.dtype); break;
      case 'T': thresholds = true; break;
      case 'D': opt.density = std::atof(optarg); ok = opt.density > 0 && opt.density <= 1; dense = true; break;
      case 'L': ok = parseCount(optarg, opt.rowLength) && opt.rowLength >= 1; break;
      case 'K': opt.rowDensity = std::atof(optarg); ok = opt.rowDensity > 0 && opt.rowDensity <= 1; break;
      case 'h': std::fputs(kHelp, stdout); return 1;
      default: ok = false; break;
    }
    if (!ok) {
      std::fprintf(stderr, "kernel_perf: bad argument for -%c (-h for help)\n", optopt ? optopt : c);
      return -1;
    }
  }
  if (thresholds) {  // its own defaults where no flag was given
    if (sized) topt.minN = opt.minN, topt.maxN = opt.maxN;
    if (factored) topt.factor = opt.factor;
    if (repeated) topt.reps = opt.reps;
    if (dense) topt.density = opt.density;
    topt.dtype = opt.dtype;
  }
  const bool halfType = opt.dtype == dctFloat16 || opt.dtype == dctBFloat16;
  if (optind < argc || opt.minN > opt.maxN || topt.minN > topt.maxN || (halfType && !thresholds)) {
    std::fprintf(stderr, "kernel_perf: bad arguments (-h for help)\n");
    return -1;
  }
  return 0;
}

void printSize(const dctbench::SizeResult& r) {
  const dctbench::KernelTiming& copy = r.kernels.back();
  const double copyGBs = copy.bytes / (copy.us * 1e3);
  double selectUs = 0, sampledUs = 0, exactUs = 0;
  for (const auto& k : r.kernels) {
    double gbs = k.bytes / (k.us * 1e3);
    std::printf(" %11zu %11s %13.0f %12.1f %8.2f %9.2f\n", r.n, k.name.c_str(), k.bytes, k.us, gbs,
                gbs / copyGBs);
    if (k.name == "select") selectUs = k.us;
    if (k.name == "tau-sample") sampledUs = k.us;
    if (k.name == "tau-exact") exactUs = k.us;
  }
  std::printf("#   n %zu: selected %.3f%% (tau %.4g); tau cost / one fused select pass:"
              " sampled %.3f, exact %.2f; packed index %.2f bytes\n",
              r.n, 100.0 * r.selectedFraction, r.tau, sampledUs / selectUs, exactUs / selectUs,
              r.packedBytesPerIndex);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  dctbench::KernelOptions opt;
  dctbench::ThresholdBenchOptions topt;
  bool thresholds = false;
  int parsed = parse(argc, argv, opt, thresholds, topt);
  if (parsed != 0) return parsed > 0 ? 0 : 2;
  // Must precede the pool's first use: it reads DCT_NUM_THREADS once.
  if (opt.threads > 0) setenv("DCT_NUM_THREADS", std::to_string(opt.threads).c_str(), 1);
  if (thresholds) {
    const dct::KernelOps& ops = dct::cpuKernelOps();
    dct::KernelContext* ctx = nullptr;
    if (ops.createContext(&ctx) != dctSuccess) return 1;
    const char* forced = std::getenv("DCT_NUM_THREADS");
    char title[96];
    std::snprintf(title, sizeof(title), "kernel_perf -T, %d worker thread(s) (DCT_NUM_THREADS=%s)",
                  dct::ThreadPool::instance().size(), forced ? forced : "unset");
    const int rc = dctbench::runThresholdComparison(topt, ops, ctx, nullptr, nullptr, title);
    ops.destroyContext(ctx);
    return rc;
  }

  dctbench::KernelBench bench(opt);
  const char* forced = std::getenv("DCT_NUM_THREADS");
  std::printf("# kernel_perf: CPU ops table \"%s\", %d worker thread(s) (DCT_NUM_THREADS=%s),"
              " type %s, density %g\n",
              dct::cpuKernelOps().name, dct::ThreadPool::instance().size(),
              forced ? forced : "(unset)", opt.dtype == dctFloat64 ? "double" : "float", opt.density);
  std::printf("# median of %d reps; bytes per call: select/accumulate 3*es per element,"
              " scatter 4+3*es per entry, pack 4 per entry,\n#   tau-sample es per sample, tau-exact 2*es per"
              " element, memcpy 2*es per element (es = %zu)\n",
              opt.reps, dct::dtypeSize(opt.dtype));
  std::printf("#%11s %11s %13s %12s %8s %9s\n", "n", "kernel", "bytes", "median_us", "GB/s",
              "x_memcpy");
  int rc = 0;
  size_t last = 0;
  for (double n = static_cast<double>(opt.minN); n <= static_cast<double>(opt.maxN) * (1 + 1e-9);
       n *= opt.factor) {
    size_t count = static_cast<size_t>(n);
    if (count == last) continue;
    last = count;
    dctbench::SizeResult result;
    if (!bench.run(count, result)) {
      rc = 1;
      break;
    }
    printSize(result);
  }
  return rc;
}
