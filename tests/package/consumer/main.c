/* Smallest real use of an installed libdct: one sparse allreduce step. */
#include <dct/dct_mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, failed = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  dctComm_t comm = NULL;
  dctCompressor_t compressor = NULL;
  dctConfig_t config = DCT_CONFIG_INITIALIZER;
  float grad[1000], out[1000];
  for (int i = 0; i < 1000; i++) grad[i] = (i == 10 * rank + 3) ? 1.0f : 0.0f;
  config.density = 0.001;
  if (dctCommInitMpi(MPI_COMM_WORLD, &comm) != dctSuccess ||
      dctCompressorCreate(comm, 1000, dctFloat32, &config, &compressor) != dctSuccess ||
      dctSparseAllreduce(grad, out, 1000, dctFloat32, dctSum, compressor, comm, NULL) != dctSuccess) {
    fprintf(stderr, "consumer: %s\n", dctGetLastError(comm));
    failed = 1;
  } else if (out[10 * rank + 3] != 1.0f) {
    fprintf(stderr, "consumer: wrong result %g\n", out[10 * rank + 3]);
    failed = 1;
  }
  dctCompressorDestroy(compressor);
  dctCommDestroy(comm);
  if (!failed && rank == 0) printf("consumer OK\n");
  MPI_Finalize();
  return failed;
}
