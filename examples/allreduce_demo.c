/*
 * The README's main job: dense MPI_Allreduce vs libdct's DCT-DP sparse
 * allreduce on the same gradient-like data, side by side, every step.
 *
 *   mpirun -np 4 allreduce_demo [-n count] [-s steps] [-D density]
 *
 * Prints per-step times, the bytes each rank put on the wire, and the
 * error of the compressed sum against the exact dense sum: per step, and
 * cumulative (what error feedback keeps small: mass is delayed, not lost).
 * Written in C99 against the public API only.
 */
#include <dct/dct_mpi.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demo_data.h"

static int compareDouble(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof(double), compareDouble);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ||a - b|| / ||b|| over n floats (double accumulation). */
static double relativeError(const float* a, const float* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    double d = (double)a[i] - b[i];
    num += d * d;
    den += (double)b[i] * b[i];
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

static const char* algorithmName(int algorithm) {
  return algorithm == dctAlgoAllgather ? "allgather" : algorithm == dctAlgoSplit ? "split" : "dense";
}

static double timed(MPI_Comm world) {
  MPI_Barrier(world);
  return MPI_Wtime();
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size, steps = 30, ok = 1, denseSteps = 0;
  double sparseSent = 0, sparseDense = 0; /* bytes of the steps that sent a sparse message */
  size_t n = (size_t)1 << 22;
  double density = 0.01;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-n")) n = (size_t)strtoull(argv[i + 1], NULL, 10);
    if (!strcmp(argv[i], "-s")) steps = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "-D")) density = atof(argv[i + 1]);
  }
  float* grad = malloc(n * sizeof(float));
  float* dense = malloc(n * sizeof(float));
  float* sparse = malloc(n * sizeof(float));
  float* sumDense = calloc(n, sizeof(float));
  float* sumSparse = calloc(n, sizeof(float));
  double* denseMs = malloc(steps * sizeof(double));
  double* dctMs = malloc(steps * sizeof(double));
  dctComm_t comm = NULL;
  dctCompressor_t compressor = NULL;
  dctConfig_t config = DCT_CONFIG_INITIALIZER;
  config.density = density;
  if (!grad || !dense || !sparse || !sumDense || !sumSparse || !denseMs || !dctMs ||
      dctCommInitMpi(MPI_COMM_WORLD, &comm) != dctSuccess ||
      dctCompressorCreate(comm, n, dctFloat32, &config, &compressor) != dctSuccess) {
    fprintf(stderr, "rank %d: setup failed: %s\n", rank, dctGetLastError(comm));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  DemoGradient gen;
  demoGradientInit(&gen, n, 1234u + (unsigned)rank);
  if (rank == 0)
    printf("libdct %d.%d.%d demo: %d ranks, %zu floats (%.1f MiB) per rank, density %.4f, %d steps\n"
           "%5s %10s %10s %10s %10s %12s %8s %10s %12s\n",
           DCT_MAJOR, DCT_MINOR, DCT_PATCH, size, n, n * 4.0 / (1 << 20), density, steps, "step",
           "dense_ms", "dct_ms", "algo", "nnz", "msg_bytes", "ratio", "rel_err", "cum_rel_err");
  dctStats_t st;
  memset(&st, 0, sizeof(st));
  for (int s = 0; s < steps && ok; s++) {
    demoGradientNext(&gen, grad);
    double t0 = timed(MPI_COMM_WORLD);
    MPI_Allreduce(grad, dense, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double t1 = timed(MPI_COMM_WORLD);
    dctResult_t res = dctSparseAllreduce(grad, sparse, n, dctFloat32, dctSum, compressor, comm, NULL);
    double t2 = MPI_Wtime();
    MPI_Barrier(MPI_COMM_WORLD);
    if (res != dctSuccess) {
      fprintf(stderr, "rank %d: dctSparseAllreduce: %s\n", rank, dctGetLastError(comm));
      ok = 0;
      break;
    }
    denseMs[s] = (t1 - t0 - 0) * 1e3;
    dctMs[s] = (t2 - t1) * 1e3;
    for (size_t i = 0; i < n; i++) {
      sumDense[i] += dense[i];
      sumSparse[i] += sparse[i];
    }
    dctCompressorGetStats(compressor, &st);
    denseSteps += st.algorithm == dctAlgoDense;
    if (st.algorithm != dctAlgoDense) sparseSent += (double)st.bytesSent, sparseDense += (double)st.denseBytes;
    if (rank == 0 && (s < 3 || s % 5 == 4 || s == steps - 1))
      printf("%5d %10.2f %10.2f %10s %10llu %12llu %7.1fx %10.3f %12.4f\n", s, denseMs[s], dctMs[s],
             algorithmName(st.algorithm), (unsigned long long)st.nnz,
             (unsigned long long)st.bytesSent, (double)st.denseBytes / (double)st.bytesSent,
             relativeError(sparse, dense, n), relativeError(sumSparse, sumDense, n));
  }
  if (ok && rank == 0) {
    double dm = median(denseMs, steps), sm = median(dctMs, steps);
    printf("\nmedian over %d steps: MPI_Allreduce %.2f ms, dctSparseAllreduce %.2f ms (%.2fx)\n", steps,
           dm, sm, dm / sm);
    /* The last step's message, and the totals: auto's steps on the dense
     * algorithm (exploring, or where it is cheaper) send the whole tensor. */
    printf("bytes per rank, last step (%s): dense %llu, libdct message %llu -> %.1fx fewer\n",
           algorithmName(st.algorithm), (unsigned long long)st.denseBytes, (unsigned long long)st.bytesSent,
           (double)st.denseBytes / (double)st.bytesSent);
    printf("bytes per rank, all %d steps: dense %llu, libdct %llu -> %.1fx fewer, counting %d steps that sent "
           "the whole tensor (dense algorithm: auto exploring it, or warm-up)",
           steps, (unsigned long long)st.totalDenseBytes, (unsigned long long)st.totalBytesSent,
           (double)st.totalDenseBytes / (double)st.totalBytesSent, denseSteps);
    if (denseSteps > 0 && sparseSent > 0)
      printf("; the %d sparse steps alone: %.1fx fewer", steps - denseSteps, sparseDense / sparseSent);
    printf("\n");
    printf("rel_err: one step's compressed sum vs exact; cum_rel_err: sum over all steps vs exact "
           "(error feedback delays mass, never drops it)\n");
  }
  dctCompressorDestroy(compressor);
  dctCommDestroy(comm);
  demoGradientFree(&gen);
  free(grad), free(dense), free(sparse), free(sumDense), free(sumSparse), free(denseMs), free(dctMs);
  MPI_Finalize();
  return ok ? 0 : 1;
}
