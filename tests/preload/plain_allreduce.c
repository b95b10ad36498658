/* An ordinary MPI program that has never heard of libdct: data-parallel
 * gradient descent on a separable weighted least-squares problem,
 *   f(w) = 1/2 sum_r sum_i a_i (w_i - t_ri)^2,
 * whose minimiser is the mean of the ranks' targets. Every step sums the
 * ranks' gradients with MPI_Allreduce (in place and not, on a duplicated
 * communicator that is freed at the end); the loss and the bookkeeping go
 * through small double and int allreduces. It prints the final relative
 * optimality gap and fails if the replicas of w differ or an int sum is
 * wrong. The preload tests run it with and without libdct_mpi_preload.so.
 * Usage: plain_allreduce [dimension] [steps] [learning-rate scale] */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double unit(uint64_t x) { /* splitmix64 -> [0, 1) */
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return (double)((x ^ (x >> 31)) >> 11) / 9007199254740992.0;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm work;
  MPI_Comm_dup(MPI_COMM_WORLD, &work);
  MPI_Comm_rank(work, &rank);
  MPI_Comm_size(work, &size);
  const int n = argc > 1 ? atoi(argv[1]) : 1 << 18;
  const int steps = argc > 2 ? atoi(argv[2]) : 300;
  float *a = malloc(n * sizeof(float)), *t = malloc(n * sizeof(float));
  float *w = calloc(n, sizeof(float)), *g = malloc(n * sizeof(float)), *sum = malloc(n * sizeof(float));
  double* best = malloc(n * sizeof(double));
  for (int i = 0; i < n; i++) {
    a[i] = (float)(0.5 + unit(i));
    t[i] = (float)(2 * unit(((uint64_t)rank << 32) + i) - 1);
    best[i] = 0;
    for (int r = 0; r < size; r++) best[i] += (2 * unit(((uint64_t)r << 32) + i) - 1) / size;
  }
  const float lr = (float)((argc > 3 ? atof(argv[3]) : 1.0) / (1.5 * size));
  double gap0 = 0, gap = 0;
  for (int s = 0; s <= steps; s++) {
    double local = 0, total = 0;
    for (int i = 0; i < n; i++) local += 0.5 * a[i] * ((double)w[i] - best[i]) * ((double)w[i] - best[i]);
    MPI_Allreduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, work);
    if (s == 0) gap0 = total;
    gap = total / gap0;
    if (s == steps) break;
    for (int i = 0; i < n; i++) g[i] = a[i] * (w[i] - t[i]);
    if (s % 2 == 0) {
      MPI_Allreduce(g, sum, n, MPI_FLOAT, MPI_SUM, work);
    } else {
      memcpy(sum, g, n * sizeof(float));
      MPI_Allreduce(MPI_IN_PLACE, sum, n, MPI_FLOAT, MPI_SUM, work);
    }
    for (int i = 0; i < n; i++) w[i] -= lr * sum[i];
  }
  /* Replicas must agree bit for bit; an int sum must be exact. */
  uint64_t check = 1469598103934665603ull;
  for (int i = 0; i < n; i++) {
    uint32_t bits;
    memcpy(&bits, &w[i], 4);
    check = (check ^ bits) * 1099511628211ull;
  }
  double mine = (double)(check >> 11), lo = 0, hi = 0;
  MPI_Allreduce(&mine, &lo, 1, MPI_DOUBLE, MPI_MIN, work);
  MPI_Allreduce(&mine, &hi, 1, MPI_DOUBLE, MPI_MAX, work);
  int* ids = malloc(n * sizeof(int));
  for (int i = 0; i < n; i++) ids[i] = rank;
  MPI_Allreduce(MPI_IN_PLACE, ids, n, MPI_INT, MPI_SUM, work);
  int bad = lo != hi;
  for (int i = 0; i < n; i++) bad |= ids[i] != size * (size - 1) / 2;
  if (rank == 0) printf("steps %d relative gap %.3e replicas %s\n", steps, gap, lo == hi ? "identical" : "DIFFER");
  MPI_Comm_free(&work);
  MPI_Finalize();
  return bad;
}
