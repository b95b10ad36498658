#include <mpi.h>
#include <immintrin.h>
#include <cstring>
#include <cstdio>
#include <vector>
#include <algorithm>
static void ntcopy(float* d, const float* s, size_t n){for(size_t i=0;i<n;i+=8) _mm256_stream_ps(d+i,_mm256_load_ps(s+i)); _mm_sfence();}
int main(int c,char**v){MPI_Init(&c,&v);int r,p;MPI_Comm_rank(MPI_COMM_WORLD,&r);MPI_Comm_size(MPI_COMM_WORLD,&p);
size_t n=16u<<20; float* a=(float*)aligned_alloc(64,n*4); float* b=(float*)aligned_alloc(64,n*4); memset(a,0,n*4); memset(b,0,n*4);
void* (*volatile cp)(void*,const void*,size_t)=memcpy;
for(int k=0;k<3;k++){ double t[2];
 MPI_Barrier(MPI_COMM_WORLD); double t0=MPI_Wtime(); for(int i=0;i<4;i++) cp(b,a,n*4); t[0]=(MPI_Wtime()-t0)*1e3/4;
 MPI_Barrier(MPI_COMM_WORLD); t0=MPI_Wtime(); for(int i=0;i<4;i++) ntcopy(b,a,n); t[1]=(MPI_Wtime()-t0)*1e3/4;
 double m[2]; MPI_Reduce(t,m,2,MPI_DOUBLE,MPI_MAX,0,MPI_COMM_WORLD); if(!r) printf("np=%d memcpy %.1f ms  ntcopy %.1f ms (64 MiB)\n",p,m[0],m[1]);}
MPI_Finalize();}
