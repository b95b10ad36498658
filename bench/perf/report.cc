// What dct_perf prints (fixed-width table, '#' preamble and footer) and the
// JSON lines it appends with -J.
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "harness.h"

namespace dctbench {
namespace {

const char* envOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

}  // namespace

void printHeader(const Options& opt, const PerfCase& pc, int nranks) {
  int version = 0;
  dctGetVersion(&version);
  std::printf("# dct_perf: collective %s, libdct %d, %d ranks\n", pc.name(), version, nranks);
  std::printf("# sizes %zu..%zu bytes x%g, iters %d, warmups %d, check %d, type %s, op %s\n",
              opt.minBytes, opt.maxBytes, opt.stepFactor, opt.iters, opt.warmups, opt.check,
              dtypeName(opt.dtype), opt.op == dctAvg ? "avg" : "sum");
  std::printf("# density %g, algorithm %s, threshold interval %d, input %s (seed %llu)\n",
              opt.density, algorithmName(opt.algorithm), opt.thresholdInterval,
              opt.uniform ? "uniform" : "gradient-like", static_cast<unsigned long long>(opt.seed));
  std::printf("# GLIBC_TUNABLES=%s DCT_NUM_THREADS=%s\n", envOr("GLIBC_TUNABLES", "(unset)"),
              envOr("DCT_NUM_THREADS", "(unset)"));
  std::printf("# times: median over iters of the per-iteration max over ranks (us);"
              " bw in GB/s\n");
  std::printf("# bound: max(wire = busiest rank's received bytes / -l %g Gbit/s, memory = %g tensor"
              " copies at the rate all ranks copy at together, memcpy or streaming stores%s);"
              " x_bound = dct_us / bound_us\n",
              opt.linkGbps, pc.copiesPerCall(), opt.copyGBps > 0 ? " (-M)" : "");
  if (pc.peerName()) std::printf("# peer_us: %s\n", pc.peerName());
  std::printf("#%11s %11s %6s %8s %9s %11s %11s %8s %12s %8s %7s %7s %7s %10s %7s", "size", "count",
              "type", "density", "algo", "dense_us", "dct_us", "speedup", "wire_bytes", "ratio",
              "algbw", "busbw", "#wrong", "bound_us", "x_bound");
  if (pc.peerName()) std::printf(" %11s", "peer_us");
  if (opt.phases)
    std::printf(" %9s %9s %9s %9s %9s", "compr_us", "agree_us", "exch_us", "reduce_us", "other_us");
  std::printf("\n");
  std::fflush(stdout);
}

void printRow(const Row& r, const Options& opt) {
  std::printf(" %11zu %11zu %6s %8.4f %9s %11.1f %11.1f %8.2f %12.0f %8.2f %7.3f %7.3f %7lld %10.1f %7.2f",
              r.bytes, r.count, dtypeName(opt.dtype), opt.density, r.algorithm.c_str(), r.denseUs,
              r.dctUs, r.dctUs > 0 ? r.denseUs / r.dctUs : 0.0, r.wireBytes, r.ratio, r.algbw,
              r.busbw, r.wrong, r.boundUs, r.boundUs > 0 ? r.dctUs / r.boundUs : 0.0);
  if (r.peerUs > 0) std::printf(" %11.1f", r.peerUs);
  if (opt.phases)
    for (double us : r.phaseUs) std::printf(" %9.1f", us);
  std::printf("\n");
  std::fflush(stdout);
}

void printFooter(const Options& opt, const Row* rows, size_t n, bool failed) {
  // nccl-tests' averages, plus each rank's own dct time (not the max).
  std::printf("# dct_us per rank (median of each rank's own times): mean / min across ranks\n");
  double busSum = 0;
  long long wrong = 0;
  bool checked = opt.check != 0 && n > 0;
  for (size_t i = 0; i < n; i++) {
    std::printf("#   size %11zu: mean %11.1f  min %11.1f   tau estimates %llu\n", rows[i].bytes,
                rows[i].dctRankMeanUs, rows[i].dctRankMinUs,
                static_cast<unsigned long long>(rows[i].thresholdEstimates));
    if (rows[i].ownerKept > 0)
      std::printf("#   size %11zu: owners kept %.0f entries (all ranks), tau %g (mean), residual"
                  " mass %g (all ranks); received %.0f bytes (mean)\n",
                  rows[i].bytes, rows[i].ownerKept, rows[i].ownerThreshold,
                  rows[i].ownerResidualMass, rows[i].bytesReceived);
    busSum += rows[i].busbw;
    if (rows[i].wrong > 0) wrong += rows[i].wrong;
  }
  std::printf("# Out of bounds values : %lld %s\n", wrong,
              failed ? "FAILED" : (checked ? "OK" : "(not checked)"));
  if (failed && wrong == 0) std::printf("# a libdct or MPI call failed: see stderr\n");
  std::printf("# Avg bus bandwidth    : %g\n", n ? busSum / static_cast<double>(n) : 0.0);
  std::fflush(stdout);
}

bool appendJsonRow(const Options& opt, const PerfCase& pc, int nranks, const Row& r) {
  FILE* f = std::fopen(opt.jsonPath.c_str(), "a");
  if (f == nullptr) {
    std::fprintf(stderr, "dct_perf: cannot append to %s\n", opt.jsonPath.c_str());
    return false;
  }
  std::fprintf(f,
               "{\"bench\":\"dct_perf\",\"time\":%lld,\"collective\":\"%s\",\"nranks\":%d,"
               "\"size\":%zu,\"count\":%zu,\"type\":\"%s\",\"op\":\"%s\",\"density\":%g,"
               "\"algo_requested\":\"%s\",\"algo\":\"%s\",\"threshold_interval\":%d,"
               "\"input\":\"%s\",\"seed\":%llu,\"iters\":%d,\"warmups\":%d,",
               static_cast<long long>(std::time(nullptr)), pc.name(), nranks, r.bytes, r.count,
               dtypeName(opt.dtype), opt.op == dctAvg ? "avg" : "sum", opt.density,
               algorithmName(opt.algorithm), r.algorithm.c_str(),
               opt.thresholdInterval,
               opt.uniform ? "uniform" : "gradient", static_cast<unsigned long long>(opt.seed),
               opt.iters, opt.warmups);
  std::fprintf(f,
               "\"dense_us\":%.3f,\"dense_min_us\":%.3f,\"dense_max_us\":%.3f,"
               "\"dct_us\":%.3f,\"dct_min_us\":%.3f,\"dct_max_us\":%.3f,"
               "\"dct_rank_mean_us\":%.3f,\"dct_rank_min_us\":%.3f,\"speedup\":%.4f,"
               "\"wire_bytes\":%.1f,\"ratio\":%.4f,\"algbw\":%.4f,\"busbw\":%.4f,"
               "\"tau_estimates\":%llu,\"wrong\":%lld,\"glibc_tunables\":\"%s\","
               "\"bytes_received\":%.1f,\"owner_kept\":%.1f,\"owner_threshold\":%g,"
               "\"owner_residual_mass\":%g,",
               r.denseUs, r.denseMinUs, r.denseMaxUs, r.dctUs, r.dctMinUs, r.dctMaxUs,
               r.dctRankMeanUs, r.dctRankMinUs, r.dctUs > 0 ? r.denseUs / r.dctUs : 0.0,
               r.wireBytes, r.ratio, r.algbw, r.busbw,
               static_cast<unsigned long long>(r.thresholdEstimates), r.wrong,
               envOr("GLIBC_TUNABLES", ""), r.bytesReceived, r.ownerKept, r.ownerThreshold,
               r.ownerResidualMass);
  std::fprintf(f,
               "\"peer_us\":%.3f,\"indices\":\"%s\",\"output\":\"%s\",\"link_gbps\":%g,\"copy_us\":%.3f,\"wire_bound_us\":%.3f,\"memory_bound_us\":%.3f,"
               "\"bound_us\":%.3f,\"phase_us\":{\"compress\":%.3f,\"agree\":%.3f,\"exchange\":%.3f,"
               "\"reduce\":%.3f,\"other\":%.3f}}\n",
               r.peerUs, opt.zipfIndices ? "zipf" : "uniform", opt.cooOutput ? "coo" : "dense", opt.linkGbps, r.copyUs, r.wireBoundUs, r.memoryBoundUs, r.boundUs, r.phaseUs[dctPhaseCompress],
               r.phaseUs[dctPhaseAgree], r.phaseUs[dctPhaseExchange], r.phaseUs[dctPhaseReduce],
               r.phaseUs[dctPhaseOther]);
  return std::fclose(f) == 0;
}

}  // namespace dctbench
