// Hybrid-parallel DLRM training with libdct: model-parallel embedding tables
// exchanged by all-to-all (DCT-MP: dctSparseAlltoall), data-parallel MLPs
// synchronised by allreduce (DCT-DP: dctSparseAllreduce), against the dense
// MPI baseline, on a synthetic click-through stream from a teacher DLRM.
// With --sharding row the tables are split by rows instead and the pooled
// partials are summed by a reduce-scatter (dense, or DES: dctDesReduceScatter).
//
//   mpirun -np 4 dlrm_hybrid --mode dense|mp|dp|mpdp [--sharding table|row] [--mp-density 0.05] ...
//
// Prints one row per epoch (held-out log loss and AUC, bytes per step on
// the MP and DP paths vs dense, whether the replicated MLP weights are
// bit-identical on every rank) and a machine-readable RESULT line.
#include <dct/dct_mpi.h>
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "check.h"
#include "common/replicas.h"
#include "eval.h"
#include "options.h"

using namespace dlrm;

namespace {

// Sum over ranks of a per-rank counter.
double sumOverRanks(double local) {
  double global = 0;
  DLRM_MPI_CHECK(MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
  return global;
}

double maxOverRanks(double local) {
  double global = 0;
  DLRM_MPI_CHECK(MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  return global;
}

// BCE with logits over the local slice: returns the loss sum and writes
// dLoss/dlogit for the global-batch mean loss, (sigmoid(z) - y) / B.
double lossAndGradient(const float* logits, const std::vector<float>& labels, int globalBatch,
                       std::vector<float>* dlogits) {
  double loss = 0;
  dlogits->resize(labels.size());
  for (size_t i = 0; i < labels.size(); i++) {
    const double z = logits[i], y = labels[i];
    loss += std::fmax(z, 0.0) - z * y + std::log1p(std::exp(-std::fabs(z)));
    (*dlogits)[i] = static_cast<float>((1.0 / (1.0 + std::exp(-z)) - y) / globalBatch);
  }
  return loss;
}

// dense / sent, 1 when nothing would be sent at all (one rank: no MP traffic).
double reduction(double dense, double sent) { return sent > 0 ? dense / sent : 1.0; }

struct Window {  // cumulative counters at the start of an epoch
  Traffic mp, dp;
  double stepSeconds = 0;
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, P = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  Options opt;
  std::string error;
  if (!parseOptions(argc, argv, &opt, &error)) {
    if (rank == 0 && !error.empty()) std::fprintf(stderr, "dlrm_hybrid: %s\n", error.c_str());
    if (rank == 0) printUsage(argv[0]);
    MPI_Finalize();
    return error.empty() ? 0 : 2;
  }
  int status = 0;
  dctComm_t comm = nullptr;
  DLRM_DCT_CHECK(comm, dctCommInitMpi(MPI_COMM_WORLD, &comm));
  {
    const bool mp = opt.mode == Mode::kMp || opt.mode == Mode::kMpDp;
    const bool dp = opt.mode == Mode::kDp || opt.mode == Mode::kMpDp;
    const bool row = opt.sharding == Sharding::kRow;
    const bool dctMp = mp && !row;  // row sharding's MP modes use DES (exact) instead
    const int B = opt.batch, T = static_cast<int>(opt.data.tableSizes.size()), D = opt.model.embedding.dim;
    Generator generator(opt.data);
    Split split(B, P);
    RowLayout layout(split, T, rank);
    Dlrm model(opt.model, opt.data.tableSizes, rank, P, opt.sharding);
    const MpOptions mpOptions{dctMp ? opt.mpDensity : 0, opt.mpWire, opt.mpSelection, opt.mpInterval};
    EmbeddingExchange trainExchange(layout, D, mpOptions, comm);
    EmbeddingExchange evalExchange(layout, D, mpOptions, comm);
    EmbeddingExchange evalFullExchange(layout, D, MpOptions{}, comm);
    const double desDensity = row && mp ? opt.desDensity : 1.0;
    RowExchange trainRows(split, T, D, row && mp, desDensity, comm), evalRows(split, T, D, row && mp, desDensity, comm);
    const auto trainForward = [&](const Batch& b) {
      return row ? model.forward(b, split, trainRows) : model.forward(b, split, layout, trainExchange);
    };
    const auto trainBackward = [&](const float* dlogits, const Batch& b) {
      if (row) model.backward(dlogits, b, split, trainRows);
      else model.backward(dlogits, b, split, layout, trainExchange);
    };
    const Forward evalForward = [&](const Batch& b) {
      return row ? model.forward(b, split, evalRows) : model.forward(b, split, layout, evalExchange);
    };
    const Forward evalFullForward = [&](const Batch& b) { return model.forward(b, split, layout, evalFullExchange); };
    const Traffic& mpTraffic = row ? trainRows.traffic() : trainExchange.traffic();
    GradientSync sync(model.params().size(),
                      {dp ? opt.dpDensity : 0, opt.dpInterval, opt.dpWarmup, opt.dpAlgorithm, opt.dpWire}, comm);
    Optimizer optimizer(opt.sgd ? Optimizer::kSgd : Optimizer::kAdagrad, opt.lr, model.params().size(),
                        opt.adagradInit);
    HeldOut heldOut = makeHeldOut(generator, opt.heldOut, split, rank);
    const Metrics bayes = teacherMetrics(heldOut);
    const bool evalFull = dctMp && opt.evalFull;
    if (rank == 0) {
      std::printf("# dlrm_hybrid mode=%s sharding=%s (MP exchange: %s) np=%d batch=%d (rank 0 slice %d) D=%d "
                  "tables=%d dp_params=%zu mp_density=%g (K=%d of %d, %s, %s values) dp_density=%g (%s values)\n",
                  modeName(opt.mode), shardingName(opt.sharding),
                  row ? (mp ? "DES reduce-scatter" : "MPI_Alltoallv + sum")
                      : (mp ? "DCT-MP all-to-all" : "MPI_Alltoallv"),
                  P, B, split.counts[0], D, T, model.params().size(), dctMp ? opt.mpDensity : desDensity,
                  static_cast<int>(std::ceil((dctMp ? opt.mpDensity : desDensity) * D - 1e-9)), D,
                  opt.mpSelection == dctRowThreshold ? "threshold" : "top-K", wireName(opt.mpWire),
                  dp ? opt.dpDensity : 1.0, wireName(opt.dpWire));
      std::printf("# held-out %d samples; teacher (Bayes) logloss %.4f auc %.4f\n", opt.heldOut, bayes.logLoss,
                  bayes.auc);
      std::printf("%5s %8s %8s %8s %7s %8s %10s %10s %10s %10s %6s %10s %10s %6s %7s %6s %6s %s\n", "epoch",
                  "samples", "trainLL", "heldLL", "AUC", "AUCfull", "mpB/step", "fwd", "bwd", "denseB", "mp_x",
                  "dpB/step", "denseB", "dp_x", "ms/step", "mp_ms", "dp_ms", "replicas");
    }
    Batch batch;
    std::vector<float> dlogits;
    bool allIdentical = true;
    Metrics last;
    uint64_t step = 0;
    Window window;
    for (int epoch = 1; epoch <= opt.epochs; epoch++) {
      double lossSum = 0;
      for (int s = 0; s < opt.stepsPerEpoch; s++, step++) {
        const double start = MPI_Wtime();
        generator.generate(kTrainStream, step * B, B, split.offsets[rank], split.offsets[rank + 1], &batch);
        const float* logits = trainForward(batch);
        lossSum += lossAndGradient(logits, batch.labels, B, &dlogits);
        trainBackward(dlogits.data(), batch);
        sync.sum(model.grads().data());
        optimizer.step(model.params().data(), model.grads().data());
        window.stepSeconds += MPI_Wtime() - start;
      }
      last = evaluate(heldOut, evalForward);
      const Metrics full = evalFull ? evaluate(heldOut, evalFullForward) : last;
      const bool identical = examples::replicasIdentical(model.params().data(), model.params().size(), MPI_COMM_WORLD);
      allIdentical = allIdentical && identical;
      const double n = opt.stepsPerEpoch;
      const Traffic& m = mpTraffic;
      const Traffic& d = sync.traffic();
      const double mpSent = sumOverRanks(m.sent - window.mp.sent) / n;
      const double mpDense = sumOverRanks(m.dense - window.mp.dense) / n;
      const double mpForward = sumOverRanks(m.forwardSent - window.mp.forwardSent) / n;
      const double dpSent = sumOverRanks(d.sent - window.dp.sent) / n;
      const double dpDense = sumOverRanks(d.dense - window.dp.dense) / n;
      const double stepMs = 1e3 * maxOverRanks(window.stepSeconds) / n;
      const double mpMs = 1e3 * maxOverRanks(m.seconds - window.mp.seconds) / n;
      const double dpMs = 1e3 * maxOverRanks(d.seconds - window.dp.seconds) / n;
      const double trainLoss = sumOverRanks(lossSum) / (n * B);
      if (rank == 0) {
        std::printf("%5d %8llu %8.4f %8.4f %7.4f %8.4f %10.0f %10.0f %10.0f %10.0f %6.1f %10.0f %10.0f %6.1f %7.1f "
                    "%6.1f %6.1f %s\n",
                    epoch, static_cast<unsigned long long>(step * B), trainLoss, last.logLoss, last.auc, full.auc,
                    mpSent, mpForward, mpSent - mpForward, mpDense, reduction(mpDense, mpSent), dpSent, dpDense,
                    reduction(dpDense, dpSent), stepMs, mpMs, dpMs, identical ? "identical" : "DIFFER");
        std::printf("RESULT tag=%s mode=%s sharding=%s np=%d epoch=%d samples=%llu train_logloss=%.6f "
                    "logloss=%.6f auc=%.6f auc_full=%.6f bayes_auc=%.6f mp_bytes=%.0f mp_dense=%.0f dp_bytes=%.0f "
                    "dp_dense=%.0f step_ms=%.2f mp_ms=%.2f dp_ms=%.2f identical=%d mp_fwd_bytes=%.0f "
                    "mp_bwd_bytes=%.0f mlp_hash=%016llx\n",
                    opt.tag.c_str(), modeName(opt.mode), shardingName(opt.sharding), P, epoch,
                    static_cast<unsigned long long>(step * B), trainLoss, last.logLoss, last.auc, full.auc, bayes.auc,
                    mpSent, mpDense, dpSent, dpDense, stepMs, mpMs, dpMs, identical ? 1 : 0, mpForward,
                    mpSent - mpForward,
                    static_cast<unsigned long long>(examples::checksum(model.params().data(), model.params().size())));
        std::fflush(stdout);
      }
      window = {m, d, 0};
    }
    if (trainExchange.compressed()) {
      const dctAlltoallStats_t s = trainExchange.stats();
      if (s.totalDenseBytes != trainExchange.traffic().dense && rank == 0)
        std::printf("# note: plan's totalDenseBytes %llu, this program's dense count %llu\n",
                    static_cast<unsigned long long>(s.totalDenseBytes),
                    static_cast<unsigned long long>(trainExchange.traffic().dense));
      if (rank == 0)
        std::printf("# DCT-MP rank 0: kept %llu entries (density %.4f), mask format %d, total sent %llu B\n",
                    static_cast<unsigned long long>(s.keptEntries), s.density, s.maskFormat,
                    static_cast<unsigned long long>(s.totalBytesSent));
    }
    if (trainRows.des() && rank == 0) {
      const dctAlltoallStats_t s = trainRows.stats();
      std::printf("# DES rank 0: last forward sent %llu entries (%llu B), last backward %llu B, total sent %llu B\n",
                  static_cast<unsigned long long>(s.keptEntries), static_cast<unsigned long long>(s.forwardBytesSent),
                  static_cast<unsigned long long>(s.backwardBytesSent),
                  static_cast<unsigned long long>(s.totalBytesSent));
    }
    if (sync.compressed() && rank == 0) {
      const dctStats_t s = sync.stats();
      std::printf("# DCT-DP rank 0: last step nnz %llu of %zu, tau %.3g, algorithm %d, %llu threshold estimates\n",
                  static_cast<unsigned long long>(s.nnz), model.params().size(), s.threshold, s.algorithm,
                  static_cast<unsigned long long>(s.thresholdEstimates));
    }
    if (!allIdentical) {
      status = 1;
      if (rank == 0) std::printf("FAIL: replicated MLP weights differ across ranks\n");
    }
    if (opt.checkAuc > 0 && !(last.auc > opt.checkAuc)) {
      status = 1;
      if (rank == 0) std::printf("FAIL: held-out AUC %.4f <= %.4f\n", last.auc, opt.checkAuc);
    }
    if (opt.checkAuc > 0 && status == 0 && rank == 0)
      std::printf("PASS: held-out AUC %.4f > %.4f, replicas bit-identical\n", last.auc, opt.checkAuc);
  }
  DLRM_DCT_CHECK(comm, dctCommDestroy(comm));
  MPI_Finalize();
  return status;
}
