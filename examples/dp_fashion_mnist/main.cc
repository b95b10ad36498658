// Data-parallel Fashion-MNIST: every rank trains the same MLP on its shard
// with SGD + momentum; the gradient (one fused bucket) is averaged each step
// by dense MPI_Allreduce or by libdct (DCT-DP with or without error
// feedback, or the 1-bit allreduce). Ranks check every epoch that their
// weights are bit-identical. See README.md.
#include <cblas.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "common/replicas.h"
#include "dataset.h"
#include "mlp.h"
#include "options.h"

using namespace fmnist;

namespace {

double sumOverRanks(double x) {
  double total = 0;
  MPI_Allreduce(&x, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return total;
}

// Test accuracy: each rank classifies every ranks-th sample.
double testAccuracy(Mlp& mlp, const std::vector<float>& params, const Split& test, int rank, int ranks) {
  std::vector<float> x;
  std::vector<uint8_t> y;
  for (size_t i = rank; i < test.count; i += ranks) {
    x.insert(x.end(), test.x.begin() + i * kPixels, test.x.begin() + (i + 1) * kPixels);
    y.push_back(test.y[i]);
  }
  const int right = y.empty() ? 0 : mlp.correct(params.data(), x.data(), y.data(), static_cast<int>(y.size()));
  return sumOverRanks(right) / test.count;
}

int train(const Options& o, int rank, int ranks) {
  Split train, test;
  std::string error;
  if (!loadFashionMnist(o.dataDir, o.trainCount, o.testCount, &train, &test, &error)) {
    if (rank == 0) std::fprintf(stderr, "dp_fashion_mnist: %s\n", error.c_str());
    return 2;
  }
  std::vector<int> sizes{kPixels};
  sizes.insert(sizes.end(), o.hidden.begin(), o.hidden.end());
  sizes.push_back(kClasses);
  Mlp mlp(sizes);
  const size_t n = mlp.paramCount();
  std::vector<float> params(n), grads(n), velocity(n, 0.f), xb(static_cast<size_t>(o.batch) * kPixels);
  std::vector<uint8_t> yb(o.batch);
  mlp.init(o.seed, params.data());  // the same on every rank
  GradientSync sync;
  if (!sync.init(o.sync, n, MPI_COMM_WORLD, &error)) {
    if (rank == 0) std::fprintf(stderr, "dp_fashion_mnist: %s\n", error.c_str());
    return 2;
  }
  FILE* csv = rank == 0 && !o.csv.empty() ? std::fopen(o.csv.c_str(), "w") : nullptr;
  if (csv) std::fprintf(csv, "epoch,sync,density,train_loss,test_accuracy,bytes_per_step,ring_bytes_per_step,ratio,seconds\n");
  if (rank == 0)
    std::printf("# %d ranks, %zu parameters, %zu training samples, batch %d per rank, sync %s density %g\n", ranks, n,
                train.count, o.batch, syncModeName(o.sync.mode), o.sync.density);
  double accuracy = 0;
  const double totalSteps = static_cast<double>(o.epochs) * (train.count / ranks / o.batch);
  size_t step = 0;
  for (int epoch = 1; epoch <= o.epochs; epoch++) {
    const double start = MPI_Wtime();
    const std::vector<uint32_t> shard = epochShard(train.count, o.seed, epoch, rank, ranks);
    const size_t steps = shard.size() / o.batch;
    double lossSum = 0, bytesSum = 0;
    for (size_t s = 0; s < steps; s++) {
      for (int b = 0; b < o.batch; b++) {
        const uint32_t i = shard[s * o.batch + b];
        std::copy_n(train.x.begin() + static_cast<size_t>(i) * kPixels, kPixels, xb.begin() + b * kPixels);
        yb[b] = train.y[i];
      }
      lossSum += mlp.lossAndGradient(params.data(), xb.data(), yb.data(), o.batch, grads.data());
      // Momentum correction (DGC): the velocity is formed before the exchange,
      // so entries held back in the residual keep their momentum.
      if (o.momentumCorrection)
        for (size_t i = 0; i < n; i++) grads[i] = velocity[i] = o.momentum * velocity[i] + grads[i];
      if (!sync.average(grads.data(), &error) ||
          (o.momentumCorrection && o.factorMasking && !sync.zeroWhereSent(velocity.data(), &error))) {
        std::fprintf(stderr, "rank %d: %s\n", rank, error.c_str());
        return 3;
      }
      const float lr = o.cosineLr ? static_cast<float>(0.5 * o.lr * (1 + std::cos(M_PI * step++ / totalSteps))) : o.lr;
      for (size_t i = 0; i < n; i++) {
        if (!o.momentumCorrection) velocity[i] = o.momentum * velocity[i] + grads[i];
        params[i] -= lr * (o.momentumCorrection ? grads[i] : velocity[i]);
      }
      bytesSum += sync.lastBytesSent();
    }
    const double seconds = sumOverRanks(MPI_Wtime() - start) / ranks;
    const double loss = sumOverRanks(steps ? lossSum / steps : 0) / ranks;
    const double bytes = sumOverRanks(steps ? bytesSum / steps : 0) / ranks;
    accuracy = testAccuracy(mlp, params, test, rank, ranks);
    if (!examples::replicasIdentical(params.data(), n, MPI_COMM_WORLD)) {
      if (rank == 0) std::fprintf(stderr, "dp_fashion_mnist: the ranks' weights differ after epoch %d\n", epoch);
      return 3;
    }
    const double ratio = bytes > 0 ? sync.ringBytes() / bytes : 0;
    if (rank == 0) {
      std::printf("epoch %2d  loss %.4f  test accuracy %.2f%%  bytes/step %.1f KB (%.1fx less than a ring)  %.1f s\n",
                  epoch, loss, 100 * accuracy, bytes / 1e3, ratio, seconds);
      std::fflush(stdout);
    }
    if (csv)
      std::fprintf(csv, "%d,%s,%g,%.6f,%.6f,%.0f,%llu,%.2f,%.3f\n", epoch, syncModeName(o.sync.mode), o.sync.density,
                   loss, accuracy, bytes, static_cast<unsigned long long>(sync.ringBytes()), ratio, seconds);
  }
  if (csv) std::fclose(csv);
  if (rank == 0) std::printf("replicas bit-identical after every epoch; final test accuracy %.2f%%\n", 100 * accuracy);
  if (o.checkAccuracy >= 0 && accuracy < o.checkAccuracy) {
    if (rank == 0) std::fprintf(stderr, "dp_fashion_mnist: accuracy %.4f below --check-accuracy %.4f\n", accuracy, o.checkAccuracy);
    return 4;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  openblas_set_num_threads(1);  // ranks already fill the cores
  Options options;
  std::string message;
  bool help = false;
  int status = 0;
  if (!parseOptions(argc, argv, &options, &message, &help)) {
    if (rank == 0) std::fprintf(help ? stdout : stderr, "%s", message.c_str());
    status = help ? 0 : 1;
  } else {
    status = train(options, rank, ranks);
  }
  MPI_Finalize();
  return status;
}
