#!/bin/bash
# Interleaved A/B: old = the build before the change (/tmp/old), new = /work/main.
# usage: ab.sh REPS "np size density [netem]" ...
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967296
MPI="--oversubscribe -x GLIBC_TUNABLES --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4"
reps=$1; shift
for row in "$@"; do
  set -- $row
  for i in $(seq $reps); do for v in old new; do
    d=/work/main; [ $v = old ] && d=/tmp/old
    if [ "$4" = netem ]; then
      out=$(timeout 600 /work/main/bench/netem/run.sh -np $1 --rate 1gbit --timeout 500 -- $d/build/bench/dct_perf -p -l 1 -b $2 -e $2 -D $3 -n 7 -w 10 2>&1)
    else
      out=$(mpirun -np $1 $MPI $d/build/bench/dct_perf -p -b $2 -e $2 -D $3 -n 7 -w 10 2>&1)
    fi
    echo "$out" | grep -v '^#' | grep -E '^ +[0-9]' | awk -v tag="np$1 $2 $3 ${4:-shm} $v" '{printf "%-28s %-9s dense %9.3f dct %9.3f speedup %5.2f\n", tag, $5, $6/1e3, $7/1e3, $8}'
  done; done
done
