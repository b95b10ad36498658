/* Phase timings of dctSparseAlltoall / dctSparseAlltoallBackward from
 * outside the library (libdct's all-to-all reports bytes, not phases).
 * LD_PRELOADed into dct_perf: it wraps the two libdct entry points and the
 * MPI calls libdct makes inside them, and stamps each with CLOCK_MONOTONIC.
 * One call of either direction makes, in order (src/algo/sparse_alltoall.cc,
 * src/transport/mpi.cc):
 *
 *   local work    forward: row select + offsets + zero + pack (+ reserve)
 *                 backward: pack of the gradient values at the masks
 *   MPI_Allgather the plan header            } "agree": includes waiting
 *   PMPI_Allreduce the agreement vote        }  for the slowest rank
 *   (forward with variable rows: one more MPI_Allgather + vote)
 *   MPI_Alltoallv the blocks                 "exchange"
 *   local work    unpack / scatter into dense rows ("unpack")
 *   PMPI_Allreduce the exchange vote          "vote"
 *
 * At exit every rank writes one line per call to
 * $MP_PHASE_DIR/phases.<rank>.txt:
 *   dir rank call total_us n_events name:start_us:end_us ...
 * (times relative to the call's entry). phases.py turns them into phases.
 * Build: mpicc -O2 -shared -fPIC -o phase_shim.so phase_shim.c -ldl
 * It needs no libdct header: the entry points are forwarded with the same
 * argument registers (four pointer-sized arguments, int result). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CALLS 16384
#define MAX_EVENTS 12

typedef struct {
  char dir;
  double total;
  int n;
  const char* name[MAX_EVENTS];
  double start[MAX_EVENTS], end[MAX_EVENTS];
} Rec;

static Rec recs[MAX_CALLS];
static int nrecs = 0;
static Rec* cur = NULL;
static double t0 = 0;

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static void dump(void) {
  const char* dir = getenv("MP_PHASE_DIR");
  const char* rank = getenv("OMPI_COMM_WORLD_RANK");
  if (!dir || !rank || nrecs == 0) return;
  char path[4096];
  snprintf(path, sizeof path, "%s/phases.%s.txt", dir, rank);
  FILE* f = fopen(path, "a");
  if (!f) return;
  for (int i = 0; i < nrecs; i++) {
    fprintf(f, "%c %s %d %.1f %d", recs[i].dir, rank, i, recs[i].total, recs[i].n);
    for (int e = 0; e < recs[i].n; e++)
      fprintf(f, " %s:%.1f:%.1f", recs[i].name[e], recs[i].start[e], recs[i].end[e]);
    fputc('\n', f);
  }
  fclose(f);
  nrecs = 0;
}

typedef int (*Entry)(void*, void*, void*, void*);

static int wrap(const char* sym, char dir, void* a, void* b, void* c, void* d) {
  static Entry fwd = NULL, bwd = NULL;
  Entry* slot = dir == 'F' ? &fwd : &bwd;
  if (!*slot) *slot = (Entry)dlsym(RTLD_NEXT, sym);
  Rec* r = nrecs < MAX_CALLS ? &recs[nrecs] : NULL;
  if (r) { r->dir = dir; r->n = 0; }
  cur = r;
  t0 = now_us();
  int res = (*slot)(a, b, c, d);
  if (r) { r->total = now_us() - t0; nrecs++; }
  cur = NULL;
  return res;
}

int dctSparseAlltoall(void* plan, void* send, void* recv, void* stream) {
  return wrap("dctSparseAlltoall", 'F', plan, send, recv, stream);
}
int dctSparseAlltoallBackward(void* plan, void* send, void* recv, void* stream) {
  return wrap("dctSparseAlltoallBackward", 'B', plan, send, recv, stream);
}

#define BEGIN(nm)                                        \
  Rec* r = cur;                                          \
  int e = (r && r->n < MAX_EVENTS) ? r->n++ : -1;        \
  if (e >= 0) { r->name[e] = nm; r->start[e] = now_us() - t0; }
#define END() \
  if (e >= 0) r->end[e] = now_us() - t0;

int MPI_Allgather(const void* sb, int sc, MPI_Datatype st, void* rb, int rc, MPI_Datatype rt, MPI_Comm comm) {
  static int (*real)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm) = NULL;
  if (!real) real = dlsym(RTLD_NEXT, "MPI_Allgather");
  BEGIN("allgather");
  int res = real(sb, sc, st, rb, rc, rt, comm);
  END();
  return res;
}

int MPI_Alltoallv(const void* sb, const int* sc, const int* sd, MPI_Datatype st, void* rb, const int* rc,
                  const int* rd, MPI_Datatype rt, MPI_Comm comm) {
  static int (*real)(const void*, const int*, const int*, MPI_Datatype, void*, const int*, const int*, MPI_Datatype,
                     MPI_Comm) = NULL;
  if (!real) real = dlsym(RTLD_NEXT, "MPI_Alltoallv");
  BEGIN("alltoallv");
  int res = real(sb, sc, sd, st, rb, rc, rd, rt, comm);
  END();
  return res;
}

int PMPI_Allreduce(const void* sb, void* rb, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
  static int (*real)(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm) = NULL;
  if (!real) real = dlsym(RTLD_NEXT, "PMPI_Allreduce");
  BEGIN("allreduce");
  int res = real(sb, rb, n, t, op, comm);
  END();
  return res;
}

int MPI_Waitall(int n, MPI_Request* reqs, MPI_Status* st) {
  static int (*real)(int, MPI_Request*, MPI_Status*) = NULL;
  if (!real) real = dlsym(RTLD_NEXT, "MPI_Waitall");
  BEGIN("waitall");
  int res = real(n, reqs, st);
  END();
  return res;
}

int MPI_Finalize(void) {
  static int (*real)(void) = NULL;
  if (!real) real = dlsym(RTLD_NEXT, "MPI_Finalize");
  dump();
  return real();
}
