// The size loop and the timing discipline: per iteration, barrier, time one
// call with MPI_Wtime, take the max over ranks; dense and libdct alternate
// on the same input; medians over the timed iterations.
#include "harness.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

namespace dctbench {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// One timed call. The failure flag rides along with the time in a single
// reduction, so every rank stops together without an extra round.
enum Side { kDct = 0, kDense = 1, kPeer = 2 };

bool timeCall(PerfCase& pc, Side side, MPI_Comm mpi, double& localUs, double& maxUs) {
  MPI_Barrier(mpi);
  double t0 = MPI_Wtime();
  bool ok = side == kDense ? pc.runDense() : side == kDct ? pc.runDct() : pc.runPeer();
  localUs = (MPI_Wtime() - t0) * 1e6;
  double mine[2] = {localUs, ok ? 0.0 : 1.0}, all[2];
  MPI_Allreduce(mine, all, 2, MPI_DOUBLE, MPI_MAX, mpi);
  maxUs = all[0];
  return all[1] == 0.0;
}

struct Samples {
  std::vector<double> dense, dct, dctLocal, peer;
  double bytesSent = 0, denseBytes = 0;
  std::map<std::string, int> algorithms;
  uint64_t thresholdEstimates = 0;
  double bytesReceived = 0;
  std::vector<double> phases[dctNumPhases];
  double ownerKept = 0, ownerThreshold = 0, ownerResidualMass = 0;
};

bool runIterations(const Options& opt, PerfCase& pc, MPI_Comm mpi, Samples& s) {
  for (int it = 0; it < opt.warmups + opt.iters; it++) {
    if (!allOk(pc.prepare(), mpi)) return false;
    double local[3], worst[3];
    // Rotate the order so no side always runs on a warmer cache.
    const int sides = pc.peerName() ? 3 : 2;
    for (int k = 0; k < sides; k++) {
      const Side side = static_cast<Side>((k + it) % sides);
      if (!timeCall(pc, side, mpi, local[side], worst[side])) return false;
    }
    if (it < opt.warmups) continue;
    s.dense.push_back(worst[kDense]);
    s.dct.push_back(worst[kDct]);
    s.dctLocal.push_back(local[kDct]);
    if (sides == 3) s.peer.push_back(worst[kPeer]);
    StepInfo info = pc.lastStep();
    s.bytesSent += static_cast<double>(info.bytesSent);
    s.denseBytes = static_cast<double>(info.denseBytes);
    s.algorithms[info.algorithm]++;
    s.thresholdEstimates = info.thresholdEstimates;
    s.bytesReceived += static_cast<double>(info.bytesReceived);
    for (int p = 0; p < dctNumPhases; p++) s.phases[p].push_back(info.phaseUs[p]);
    s.ownerKept += static_cast<double>(info.ownerKept);
    s.ownerThreshold += info.ownerThreshold;
    s.ownerResidualMass += info.ownerResidualMass;
  }
  return true;
}

// Medians and the reductions across ranks that make a row.
Row summarize(const Options& opt, const PerfCase& pc, size_t count, const Samples& s,
              MPI_Comm mpi, int nranks, double copyUs) {
  Row row;
  row.copyUs = copyUs;
  row.count = count;
  row.bytes = count * (opt.dtype == dctFloat64 ? 8 : 4);
  row.denseUs = median(s.dense);
  row.dctUs = median(s.dct);
  row.peerUs = median(s.peer);
  row.denseMinUs = *std::min_element(s.dense.begin(), s.dense.end());
  row.denseMaxUs = *std::max_element(s.dense.begin(), s.dense.end());
  row.dctMinUs = *std::min_element(s.dct.begin(), s.dct.end());
  row.dctMaxUs = *std::max_element(s.dct.begin(), s.dct.end());
  double own = median(s.dctLocal), sum = 0, lo = 0;
  MPI_Allreduce(&own, &sum, 1, MPI_DOUBLE, MPI_SUM, mpi);
  MPI_Allreduce(&own, &lo, 1, MPI_DOUBLE, MPI_MIN, mpi);
  row.dctRankMeanUs = sum / nranks;
  row.dctRankMinUs = lo;
  double meanSent = s.bytesSent / static_cast<double>(s.dct.size()), allSent = 0;
  MPI_Allreduce(&meanSent, &allSent, 1, MPI_DOUBLE, MPI_SUM, mpi);
  row.wireBytes = allSent / nranks;
  row.ratio = row.wireBytes > 0 ? s.denseBytes / row.wireBytes : 0;
  // Every rank uses the same algorithm each step (libdct agrees on it).
  row.algorithm = s.algorithms.size() == 1 ? s.algorithms.begin()->first : "mixed";
  row.algbw = row.dctUs > 0 ? static_cast<double>(row.bytes) / (row.dctUs * 1e3) : 0;
  row.busbw = row.algbw * pc.busFactor(nranks);
  uint64_t est = s.thresholdEstimates, maxEst = 0;
  MPI_Allreduce(&est, &maxEst, 1, MPI_UINT64_T, MPI_MAX, mpi);
  row.thresholdEstimates = maxEst;
  for (int p = 0; p < dctNumPhases; p++) {
    double mine = median(s.phases[p]), all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_DOUBLE, MPI_SUM, mpi);
    row.phaseUs[p] = all / nranks;
  }
  double recv = s.bytesReceived / static_cast<double>(s.dct.size()), maxRecv = 0;
  MPI_Allreduce(&recv, &maxRecv, 1, MPI_DOUBLE, MPI_MAX, mpi);
  const double iters = static_cast<double>(s.dct.size());
  double owner[4] = {recv, s.ownerKept / iters, s.ownerThreshold / iters, s.ownerResidualMass / iters};
  double ownerAll[4] = {};
  MPI_Allreduce(owner, ownerAll, 4, MPI_DOUBLE, MPI_SUM, mpi);
  row.bytesReceived = ownerAll[0] / nranks;
  row.ownerKept = ownerAll[1];
  row.ownerThreshold = ownerAll[2] / nranks;
  row.ownerResidualMass = ownerAll[3];
  applyBound(opt, pc.copiesPerCall(), maxRecv, row);
  return row;
}

}  // namespace

int runHarness(const Options& opt, PerfCase& pc, MPI_Comm mpi) {
  int rank = 0, nranks = 1;
  MPI_Comm_rank(mpi, &rank);
  MPI_Comm_size(mpi, &nranks);
  const size_t elem = opt.dtype == dctFloat64 ? 8 : 4;
  if (rank == 0) printHeader(opt, pc, nranks);
  std::vector<Row> rows;
  bool failed = false;
  size_t lastCount = 0;
  for (double bytes = static_cast<double>(opt.minBytes);
       bytes <= static_cast<double>(opt.maxBytes) * (1 + 1e-9); bytes *= opt.stepFactor) {
    size_t count = static_cast<size_t>(bytes) / elem;
    if (count == 0 || count == lastCount) continue;
    lastCount = count;
    if (!allOk(pc.setup(count), mpi)) {
      failed = true;
      break;
    }
    const double copyUs = pc.copiesPerCall() > 0 ? measureCopyUs(opt, count * elem, mpi) : 0;
    Samples samples;
    bool ok = runIterations(opt, pc, mpi, samples);
    Row row;
    if (ok) row = summarize(opt, pc, count, samples, mpi, nranks, copyUs);
    row.wrong = -1;
    if (ok && opt.check) {
      long long mine = pc.check(), total = 0, worst = 0;
      MPI_Allreduce(&mine, &worst, 1, MPI_LONG_LONG, MPI_MIN, mpi);
      MPI_Allreduce(&mine, &total, 1, MPI_LONG_LONG, MPI_SUM, mpi);
      ok = worst >= 0;
      row.wrong = total;
      if (total > 0) failed = true;
    }
    pc.teardown();
    if (!ok) {
      failed = true;
      break;
    }
    rows.push_back(row);
    if (rank == 0) {
      printRow(row, opt);
      if (!opt.jsonPath.empty() && !appendJsonRow(opt, pc, nranks, row)) failed = true;
    }
  }
  if (rank == 0) printFooter(opt, rows.data(), rows.size(), failed);
  int mine = failed ? 1 : 0, any = 0;
  MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, mpi);
  return any;
}

}  // namespace dctbench
