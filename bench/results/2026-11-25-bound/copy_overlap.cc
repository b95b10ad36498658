#include <mpi.h>
#include <cstring>
#include <cstdio>
#include <vector>
int main(int c,char**v){MPI_Init(&c,&v);int r,p;MPI_Comm_rank(MPI_COMM_WORLD,&r);MPI_Comm_size(MPI_COMM_WORLD,&p);
size_t b=64u<<20; std::vector<double> a(b/8,0.0),d(b/8,0.0);
void* (*volatile cp)(void*,const void*,size_t)=memcpy;
for(int k=0;k<5;k++){MPI_Barrier(MPI_COMM_WORLD);double t0=MPI_Wtime();for(int i=0;i<4;i++)cp(d.data(),a.data(),b);double t1=MPI_Wtime();
double x[2]={t0,t1},all[8];MPI_Gather(x,2,MPI_DOUBLE,all,2,MPI_DOUBLE,0,MPI_COMM_WORLD);
if(!r){for(int q=0;q<p;q++)printf("r%d start %+6.1f ms per-copy %5.1f | ",q,(all[2*q]-all[0])*1e3,(all[2*q+1]-all[2*q])*1e3/4);printf("\n");}}
MPI_Finalize();}
