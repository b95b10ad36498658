#!/bin/bash
# Interleaved A/B: old = 9988c8b (/tmp/old), new = this tree.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967296
MPI="--oversubscribe -x GLIBC_TUNABLES --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4"
cols() { grep -v '^#' | grep 67108864 | awk '{printf "%-9s dense %8.1f  dct %8.1f  speedup %5.2f  bound %8.1f  x_bound %4.2f  compr %7.1f agree %6.1f exch %6.1f reduce %6.1f\n", $5, $6/1e3, $7/1e3, $8, $14/1e3, $15, $16/1e3, $17/1e3, $18/1e3, $19/1e3}'; }
echo "# times in ms; 64 MiB fp32, density 1%"
for np in 2 4; do
  for i in 1 2 3 4; do for v in old new; do
    d=/work/main; [ $v = old ] && d=/tmp/old
    echo -n "shm np$np $v  "; mpirun -np $np $MPI $d/build/bench/dct_perf -p -b 64M -e 64M -D 0.01 -n 15 -w 10 2>&1 | cols
  done; done
done
for i in 1 2 3 4; do for v in old new; do
  d=/work/main; [ $v = old ] && d=/tmp/old
  echo -n "1gbit np4 $v  "; timeout 600 /work/main/bench/netem/run.sh -np 4 --rate 1gbit --timeout 500 -- $d/build/bench/dct_perf -p -l 1 -b 64M -e 64M -D 0.01 -n 7 -w 10 2>&1 | cols
done; done
