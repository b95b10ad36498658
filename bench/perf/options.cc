// dct_perf command line: nccl-tests flags where they mean the same thing,
// plus libdct's own (density, algorithm, threshold interval, row length, JSON rows).
#include <getopt.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/dtype.h"
#include "harness.h"

namespace dctbench {
namespace {

const char* kHelp =
    "usage: dct_perf [flags]   (run under mpirun; rank 0 prints)\n"
    "  -C allreduce|allgather|alltoall|onebit|coo  collective (default allreduce):\n"
    "       allreduce: dctSparseAllreduce (DCT-DP: EF + threshold + compaction +\n"
    "                  exchange) vs dense MPI_Allreduce of the same input\n"
    "       allgather: dctSparseAllgather of each rank's COO message vs\n"
    "                  MPI_Allgather(counts) + MPI_Allgatherv of the same COO bytes\n"
    "       alltoall:  DCT-MP dctSparseAlltoall (per-row top-K) forward and\n"
    "                  dctSparseAlltoallBackward vs dense MPI_Alltoallv of the full\n"
    "                  rows; size = send buffer bytes per rank, rows = size /\n"
    "                  (row length * sizeof(type)), split evenly over the ranks\n"    "       onebit:    dctSparseAllreduce with a 1-bit compressor (1-bit Adam's\n"
    "                  compressed allreduce: sign bits + one scale per chunk, worker\n"
    "                  and server error feedback) vs dense MPI_Allreduce; -D, -a, -L\n"
    "                  do not apply (density prints 1); dctAvg is not applied to\n"
    "                  the dense side (1-bit averages by construction); the check\n"
    "                  replays the algorithm with plain MPI, bit for bit\n"
    "       coo:       dctSparseInputAllreduce (lossless; -O: dense or COO result) of each\n"
    "                  rank's COO (density -D, values uniform in [-1,1)) vs\n"
    "                  MPI_Allreduce of the densified input; peer_us: libdct's\n"
    "                  dctSparseAllgather + zero + dctScatterAdd; -a picks the plan\n"
    "  -b minbytes  -e maxbytes   dense tensor size range, K/M/G = 2^10/2^20/2^30\n"
    "                             (default 1M .. 16M)\n"
    "  -f stepfactor              size multiplier between rows (default 2)\n"
    "  -n iters  -w warmups       timed / untimed iterations (default 20 / 5)\n"
    "  -c 0|1                     check results after the timed loop (default 1):\n"
    "                             3 steps of fresh compressors, allgather (for\n"
    "                             auto too) and split against a dctCompress replay bit for\n"
    "                             bit, dense against MPI's sum within rounding,\n"
    "                             global top-k delivered or held by the owners, the\n"
    "                             fixed-capacity slots against what the residuals\n"
    "                             say each rank sent (fixed global top-k: use -c 0)\n"
    "  -d float|double            element type (default float)\n"
    "  -o sum|avg                 reduction (default sum; avg scales the dense\n"
    "                             baseline too, inside its timing)\n"
    "  -D density                 fraction of entries kept (default 0.01)\n"
    "  -a auto|allgather|dense|split|globaltopk|recursivedoubling (-C coo only)\n"
    "                             libdct allreduce algorithm (default auto)\n"
    "  -L interval                steps between scheduled tau estimates (default\n"
    "                             1000, as the library's; passed in dctConfig_t)\n"
    "  -J file                    append one JSON object per row (JSON lines)\n"
    "  -u                         uniform input in [-1,1) instead of gradient-like\n"
    "  -i                         allreduce: in place (sendbuf == recvbuf, as DDP\n"
    "                             hooks and dp_fashion_mnist call it)\n"
    "  -I uniform|zipf            coo: index distribution (default uniform; zipf:\n"
    "                             density*count Zipf(1.1) draws, distinct kept)\n"
    "  -O dense|coo               coo: the result's form (default dense: count\n"
    "                             elements; coo: the sum's nonzeros, as SparCML\n"
    "                             returns a sparse sum)\n"
    "  -s seed                    input seed (default 1; each rank derives its own)\n"
    "  -R, --row-length D         alltoall: elements per row (default 64); each row\n"
    "                             keeps K = ceil(density * D) entries\n"
    "  -W fp32|fp64|fp16|bf16     alltoall: the type values travel in (config.wireType;\n"
    "                             default the rows' own)\n"
    "  -p                         per-phase columns (stats.phaseUs: compress,\n"
    "                             agreement, exchange, reduce, other), mean over\n"
    "                             ranks of each rank's median\n"
    "  -l gbit                    link rate for the wire bound (default 0: none)\n"
    "  -M GBps                    copy rate for the memory bound (default: the\n"
    "                             tensor's copy rate sustained on all ranks at\n"
    "                             once, over a batch of at least 256 MiB; the\n"
    "                             faster of memcpy and streaming stores)\n"
    "  -h                         this help\n"
    "Input: gradient-like by default, a new draw every iteration (outside the\n"
    "timed region): a fixed log-normal per-element scale times Student-t(3)\n"
    "noise. The error-feedback residual grows over the first few dozen steps,\n"
    "so drift re-estimation of tau runs (footer: tau estimates per size).\n"
    "Timing: each iteration runs the dense baseline and the libdct call on the\n"
    "same input (their order alternates), each between MPI_Barrier and\n"
    "MPI_Wtime, then takes the max over ranks; the columns are medians of that.\n"
    "Columns:\n"
    "  size       count * sizeof(type), bytes      count  elements\n"
    "  density    -D                               algo   algorithm libdct used\n"
    "  dense_us   median MPI baseline time         dct_us median libdct time\n"
    "  speedup    dense_us / dct_us\n"
    "  wire_bytes this rank's libdct payload bytes (stats.bytesSent), mean\n"
    "             over iterations and ranks\n"
    "  ratio      count*sizeof(type) / wire_bytes\n"
    "  algbw      size / dct_us (GB/s)   busbw  algbw * 2(n-1)/n (allreduce),\n"
    "                                           algbw * (n-1)/n (allgather)\n"
    "  #wrong     elements differing from a plain reference (-1: not checked)\n"
    "  bound_us   max(wire bound, memory bound): the busiest rank's received\n"
    "             bytes at -l, and the call's least memory traffic (allreduce:\n"
    "             2 tensor copies: read gradient and residual, write residual\n"
    "             and result) at the copy rate; x_bound = dct_us / bound_us\n"
    "Exit status: 0 when every call succeeded and #wrong is 0 everywhere.\n"
    "Dense MPI times depend on malloc history; see GLIBC_TUNABLES in the preamble.\n"
    "alltoall prints its own columns (three timed calls; see bench/README.md):\n"
    "  rows, D, wire (-W), K, fmt (wire mask), dense_us, fwd_us, bwd_us, fwd_x and bwd_x\n"
    "  (dense_us over each), wire_fwd / wire_bwd (plan stats, bytes sent to other\n"
    "  ranks), ratio (dense bytes / wire_fwd); -a, -L, -o, -u do not apply.\n";

// "64K" -> 65536; false on junk.
bool parseSize(const char* s, size_t& out) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s, &end);
  if (end == s || errno != 0 || v < 0) return false;
  double mult = 1;
  switch (*end) {
    case 'k': case 'K': mult = 1024.0; end++; break;
    case 'm': case 'M': mult = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mult = 1024.0 * 1024 * 1024; end++; break;
    default: break;
  }
  if (*end != '\0') return false;
  out = static_cast<size_t>(v * mult);
  return true;
}

bool parseInt(const char* s, int& out) {
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (end == s || *end != '\0') return false;
  out = static_cast<int>(v);
  return true;
}

bool parseSeed(const char* s, uint64_t& out) {
  char* end = nullptr;
  out = std::strtoull(s, &end, 10);
  return end != s && *end == '\0';
}

bool parseDouble(const char* s, double& out) {
  char* end = nullptr;
  out = std::strtod(s, &end);
  return end != s && *end == '\0';
}

}  // namespace

const char* dtypeName(dctDataType_t dtype) { return dtype == dctFloat64 ? "double" : "float"; }

const char* algorithmName(int algorithm) {
  switch (algorithm) {
    case dctAlgoAuto: return "auto";
    case dctAlgoAllgather: return "allgather";
    case dctAlgoDense: return "dense";
    case dctAlgoSplit: return "split";
    case dctAlgoGlobalTopk: return "globaltopk";
    case dctAlgoRecursiveDoubling: return "recursivedoubling";
    default: return "?";
  }
}

dctConfig_t benchConfig(const Options& opt) {
  dctConfig_t config = DCT_CONFIG_INITIALIZER;
  config.density = opt.density;
  config.algorithm = opt.algorithm;
  config.thresholdInterval = opt.thresholdInterval;
  return config;
}

int parseOptions(int argc, char** argv, Options& opt, bool verbose) {
  int c;
  bool ok = true;
  opterr = 0;
  static const struct option kLong[] = {{"row-length", required_argument, nullptr, 'R'},
                                        {"help", no_argument, nullptr, 'h'},
                                        {nullptr, 0, nullptr, 0}};
  while (ok && (c = getopt_long(argc, argv, "C:b:e:f:n:w:c:d:o:D:a:L:J:uis:R:W:pl:M:I:O:h", kLong,
                                nullptr)) != -1) {
    switch (c) {
      case 'C': opt.collective = optarg;
        ok = opt.collective == "allreduce" || opt.collective == "allgather" ||
             opt.collective == "alltoall" || opt.collective == "onebit" || opt.collective == "coo";
        break;
      case 'b': ok = parseSize(optarg, opt.minBytes); break;
      case 'e': ok = parseSize(optarg, opt.maxBytes); break;
      case 'f': ok = parseDouble(optarg, opt.stepFactor) && opt.stepFactor > 1.0; break;
      case 'n': ok = parseInt(optarg, opt.iters) && opt.iters >= 1; break;
      case 'w': ok = parseInt(optarg, opt.warmups) && opt.warmups >= 0; break;
      case 'c': ok = parseInt(optarg, opt.check) && (opt.check == 0 || opt.check == 1); break;
      case 'd':
        if (!std::strcmp(optarg, "float")) opt.dtype = dctFloat32;
        else if (!std::strcmp(optarg, "double")) opt.dtype = dctFloat64;
        else ok = false;
        break;
      case 'o':
        if (!std::strcmp(optarg, "sum")) opt.op = dctSum;
        else if (!std::strcmp(optarg, "avg")) opt.op = dctAvg;
        else ok = false;
        break;
      case 'D': ok = parseDouble(optarg, opt.density) && opt.density > 0 && opt.density <= 1; break;
      case 'a':
        if (!std::strcmp(optarg, "auto")) opt.algorithm = dctAlgoAuto;
        else if (!std::strcmp(optarg, "allgather")) opt.algorithm = dctAlgoAllgather;
        else if (!std::strcmp(optarg, "dense")) opt.algorithm = dctAlgoDense;
        else if (!std::strcmp(optarg, "split")) opt.algorithm = dctAlgoSplit;
        else if (!std::strcmp(optarg, "globaltopk")) opt.algorithm = dctAlgoGlobalTopk;
        else if (!std::strcmp(optarg, "recursivedoubling")) opt.algorithm = dctAlgoRecursiveDoubling;
        else ok = false;
        break;
      case 'L': ok = parseInt(optarg, opt.thresholdInterval) && opt.thresholdInterval >= 1; break;
      case 'J': opt.jsonPath = optarg; break;
      case 'u': opt.uniform = true; break;
      case 'i': opt.inPlace = true; break;
      case 'I':
        if (!std::strcmp(optarg, "uniform")) opt.zipfIndices = false;
        else if (!std::strcmp(optarg, "zipf")) opt.zipfIndices = true;
        else ok = false;
        break;
      case 'O':
        if (!std::strcmp(optarg, "dense")) opt.cooOutput = false;
        else if (!std::strcmp(optarg, "coo")) opt.cooOutput = true;
        else ok = false;
        break;
      case 'p': opt.phases = true; break;
      case 'l': ok = parseDouble(optarg, opt.linkGbps) && opt.linkGbps >= 0; break;
      case 'M': ok = parseDouble(optarg, opt.copyGBps) && opt.copyGBps >= 0; break;
      case 's': ok = parseSeed(optarg, opt.seed); break;
      case 'R':
        ok = parseSize(optarg, opt.rowLength) && opt.rowLength >= 1 && opt.rowLength <= INT_MAX;
        break;
      case 'W':
        ok = false;
        for (dctDataType_t t : {dctFloat32, dctFloat64, dctFloat16, dctBFloat16})
          if (!std::strcmp(optarg, dct::dtypeName(t))) opt.wireType = t, ok = true;
        break;
      case 'h':
        if (verbose) std::fputs(kHelp, stdout);
        return 1;
      default: ok = false; break;
    }
  }
  if (ok && optind < argc) ok = false;
  if (ok && opt.minBytes > opt.maxBytes) ok = false;
  if (!ok) {
    if (verbose) {
      const char* bad = optind <= argc && optind > 0 ? argv[optind - 1] : "?";
      std::fprintf(stderr, "dct_perf: bad or out-of-range argument near '%s' (-h for help)\n", bad);
    }
    return -1;
  }
  return 0;
}

}  // namespace dctbench
