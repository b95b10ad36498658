/* What the step's agreement costs a dense allreduce, in plain MPI (no
 * libdct): the transport's allreduce alone, against the same allreduce
 * between an 80-byte header allgather and a 4-byte MAX vote (libdct's dense
 * plan: arguments checked on every rank before the exchange, its outcome
 * voted after it), and against one allgather of header + tensor summed
 * locally in rank order, plus the vote (one collective fewer, P times the
 * bytes). Medians over 41 iterations of the max over ranks, after 20
 * warm-ups; a barrier before every timed call.
 *   mpicc -O2 agreement_floor.c -o agreement_floor
 *   mpirun -np 4 --oversubscribe --mca coll_tuned_use_dynamic_rules 1 \
 *          --mca coll_tuned_allreduce_algorithm 4 ./agreement_floor */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kHeader = 80, kWarm = 20, kIters = 41 };

static int ascending(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

/* Median over iterations of the slowest rank's time. */
static double medianOfMax(double* us) {
  double worst[kIters];
  MPI_Allreduce(us, worst, kIters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  qsort(worst, kIters, sizeof(double), ascending);
  return worst[kIters / 2];
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int P = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const size_t sizes[] = {16384, 65536, 262144, 1048576};
  char header[kHeader] = {0}, headers[kHeader * 64];
  for (int s = 0; s < 4; s++) {
    const size_t n = sizes[s] / sizeof(float), block = kHeader + sizes[s];
    float* x = malloc(sizes[s]);
    float* y = malloc(sizes[s]);
    char* mine = malloc(block);
    char* all = malloc(block * P);
    for (size_t i = 0; i < n; i++) x[i] = 0.001f * (float)i + (float)rank;
    double plain[kIters], checked[kIters], gathered[kIters];
    for (int it = 0; it < kWarm + kIters; it++) {
      int ok = 0, worst = 0;
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      const double a = MPI_Wtime() - t0;

      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
      MPI_Allgather(header, kHeader, MPI_BYTE, headers, kHeader, MPI_BYTE, MPI_COMM_WORLD);
      MPI_Allreduce(x, y, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      MPI_Allreduce(&ok, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
      const double b = MPI_Wtime() - t0;

      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
      memcpy(mine, header, kHeader);
      memcpy(mine + kHeader, x, sizes[s]);
      MPI_Allgather(mine, (int)block, MPI_BYTE, all, (int)block, MPI_BYTE, MPI_COMM_WORLD);
      memcpy(y, all + kHeader, sizes[s]);
      for (int r = 1; r < P; r++) {
        const float* v = (const float*)(all + (size_t)r * block + kHeader);
        for (size_t i = 0; i < n; i++) y[i] += v[i];
      }
      MPI_Allreduce(&ok, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
      const double c = MPI_Wtime() - t0;
      if (it >= kWarm) {
        plain[it - kWarm] = a * 1e6;
        checked[it - kWarm] = b * 1e6;
        gathered[it - kWarm] = c * 1e6;
      }
    }
    const double ta = medianOfMax(plain), tb = medianOfMax(checked), tc = medianOfMax(gathered);
    if (rank == 0)
      printf("P=%d %8zu B: allreduce %8.1f us | header+allreduce+vote %8.1f us (%.2fx) | gathered+vote %8.1f us (%.2fx)\n",
             P, sizes[s], ta, tb, ta / tb, tc, ta / tc);
    free(x);
    free(y);
    free(mine);
    free(all);
  }
  MPI_Finalize();
  return 0;
}
