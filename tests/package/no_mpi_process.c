/* libdct in a process without MPI, CUDA or NCCL: two threads run a sparse
 * allreduce over the callbacks transport; afterwards none of those libraries
 * may be mapped (/proc/self/maps). With "missing DIR", dctCommInitMpi must
 * then fail cleanly, naming libdct_mpi.so and the folder DIR searched. */
#define _GNU_SOURCE
#include <dct/dct.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 4096
static pthread_barrier_t barrier;
static const void* sendOf[2];
static const size_t* offsetsOf[2];
static int voteOf[2];
static float out[2][N];

static int allgather(const void* send, void* recv, size_t bytes, void* ctx, void* stream) {
  int r = *(int*)ctx, q;
  (void)stream;
  sendOf[r] = send;
  pthread_barrier_wait(&barrier);
  for (q = 0; q < 2; q++) memcpy((char*)recv + q * bytes, sendOf[q], bytes);
  pthread_barrier_wait(&barrier);
  return 0;
}

static int allgatherv(const void* send, size_t sendBytes, void* recv, const size_t* recvBytes,
                      const size_t* recvOffsets, void* ctx, void* stream) {
  int r = *(int*)ctx, q;
  (void)stream;
  (void)sendBytes;
  sendOf[r] = send;
  pthread_barrier_wait(&barrier);
  for (q = 0; q < 2; q++) memmove((char*)recv + recvOffsets[q], sendOf[q], recvBytes[q]);
  pthread_barrier_wait(&barrier);
  return 0;
}

static int alltoallv(const void* send, const size_t* sendBytes, const size_t* sendOffsets, void* recv,
                     const size_t* recvBytes, const size_t* recvOffsets, void* ctx, void* stream) {
  int r = *(int*)ctx, q;
  (void)stream;
  (void)sendBytes;
  sendOf[r] = send;
  offsetsOf[r] = sendOffsets;
  pthread_barrier_wait(&barrier);
  for (q = 0; q < 2; q++) memcpy((char*)recv + recvOffsets[q], (const char*)sendOf[q] + offsetsOf[q][r], recvBytes[q]);
  pthread_barrier_wait(&barrier);
  return 0;
}

static int allreduceSum(const void* send, void* recv, size_t count, dctDataType_t type, void* ctx, void* stream) {
  int r = *(int*)ctx;
  size_t i, width = type == dctFloat64 ? 8 : 4;
  char* sum = malloc(count * width + 1);
  (void)stream;
  sendOf[r] = send;
  pthread_barrier_wait(&barrier);
  for (i = 0; i < count; i++) {
    if (type == dctFloat32) ((float*)sum)[i] = ((const float*)sendOf[0])[i] + ((const float*)sendOf[1])[i];
    else if (type == dctFloat64) ((double*)sum)[i] = ((const double*)sendOf[0])[i] + ((const double*)sendOf[1])[i];
  }
  pthread_barrier_wait(&barrier);
  if (type == dctFloat32 || type == dctFloat64) memcpy(recv, sum, count * width);
  free(sum);
  return type == dctFloat32 || type == dctFloat64 ? 0 : 1; /* both ranks took part either way */
}

static int voteMax(int32_t mine, int32_t* max, void* ctx) {
  int r = *(int*)ctx;
  voteOf[r] = mine;
  pthread_barrier_wait(&barrier);
  *max = voteOf[0] > voteOf[1] ? voteOf[0] : voteOf[1];
  pthread_barrier_wait(&barrier);
  return 0;
}

static void* rank(void* arg) {
  static float grad[2][N];
  int r = *(int*)arg, i, step;
  dctCallbacks_t cb = DCT_CALLBACKS_INITIALIZER;
  dctComm_t comm = NULL;
  dctCompressor_t c = NULL;
  cb.rank = r;
  cb.nranks = 2;
  cb.context = arg;
  cb.allgather = allgather;
  cb.allgatherv = allgatherv;
  cb.alltoallv = alltoallv;
  cb.allreduceSum = allreduceSum;
  cb.voteMax = voteMax;
  if (dctCommInitCallbacks(&cb, &comm) != dctSuccess || dctCompressorCreate(comm, N, dctFloat32, NULL, &c) != dctSuccess) {
    fprintf(stderr, "rank %d: setup failed: %s\n", r, dctGetLastError(comm));
    exit(1);
  }
  for (step = 0; step < 3; step++) {
    for (i = 0; i < N; i++) grad[r][i] = (float)sin(0.01 * i * (r + 1) + step);
    if (dctSparseAllreduce(grad[r], out[r], N, dctFloat32, dctSum, c, comm, NULL) != dctSuccess) {
      fprintf(stderr, "rank %d: allreduce failed: %s\n", r, dctGetLastError(comm));
      exit(1);
    }
  }
  dctCompressorDestroy(c);
  dctCommDestroy(comm);
  return NULL;
}

static int mapped(const char* name) {
  char line[4096];
  int found = 0;
  FILE* maps = fopen("/proc/self/maps", "r");
  if (maps == NULL) return 1;
  while (fgets(line, sizeof line, maps))
    if (strstr(line, name)) {
      fprintf(stderr, "mapped: %s", line);
      found = 1;
    }
  fclose(maps);
  return found;
}

int main(int argc, char** argv) {
  static int ids[2] = {0, 1};
  static const char* absent[] = {"libmpi", "libcudart", "libnccl", "libcuda.so", "libdct_mpi", "libdct_cuda"};
  pthread_t t[2];
  size_t i;
  int bad = 0;
  pthread_barrier_init(&barrier, NULL, 2);
  for (i = 0; i < 2; i++) pthread_create(&t[i], NULL, rank, &ids[i]);
  for (i = 0; i < 2; i++) pthread_join(t[i], NULL);
  if (memcmp(out[0], out[1], sizeof out[0]) != 0) {
    fprintf(stderr, "the ranks' results differ\n");
    return 1;
  }
  for (i = 0; i < sizeof absent / sizeof absent[0]; i++) bad |= mapped(absent[i]);
  if (bad) return 1;
  printf("callbacks allreduce ran; no MPI, CUDA or NCCL library mapped\n");
  if (argc > 2 && strcmp(argv[1], "missing") == 0) {
    /* Declared here: dct_mpi.h would need mpi.h. Open MPI's MPI_Comm is a
     * pointer; the component fails to load before it is looked at. */
    dctResult_t (*initMpi)(void*, dctComm_t*) = (dctResult_t(*)(void*, dctComm_t*))dlsym(RTLD_DEFAULT, "dctCommInitMpi");
    dctComm_t comm = NULL;
    dctResult_t res = initMpi ? initMpi(NULL, &comm) : dctInternalError;
    const char* why = dctGetLastError(NULL);
    printf("dctCommInitMpi: %s: %s\n", dctGetErrorString(res), why);
    if (res != dctNotSupported || comm != NULL || strstr(why, "libdct_mpi.so") == NULL || strstr(why, argv[2]) == NULL) {
      fprintf(stderr, "expected a clean dctNotSupported naming libdct_mpi.so and %s\n", argv[2]);
      return 1;
    }
  }
  return 0;
}
