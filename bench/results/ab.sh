#!/bin/bash
# Interleaved A/B of dct_perf rows: the build in $OLD (default /tmp/old, e.g.
# `git worktree add /tmp/old REV && cmake --preset default` there, then build
# dct_perf) against this tree's, alternating old and new REPS times per row,
# so the VM's drift hits both alike. Rows run at 64 KiB-64 MiB under the
# standard settings (-n 7 -w 10); "netem" shapes 1 Gbit/s links.
# usage: bench/results/ab.sh REPS "np size density [netem]" ...
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
OLD="${OLD:-/tmp/old}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967296
MPI="--oversubscribe -x GLIBC_TUNABLES --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4"
reps=$1; shift
for row in "$@"; do
  set -- $row
  for i in $(seq $reps); do for v in old new; do
    d=$ROOT; [ $v = old ] && d=$OLD
    if [ "$4" = netem ]; then
      out=$(timeout 600 "$ROOT/bench/netem/run.sh" -np $1 --rate 1gbit --timeout 500 -- $d/build/bench/dct_perf -p -l 1 -b $2 -e $2 -D $3 -n 7 -w 10 2>&1)
    else
      out=$(mpirun -np $1 $MPI $d/build/bench/dct_perf -p -b $2 -e $2 -D $3 -n 7 -w 10 2>&1)
    fi
    echo "$out" | grep -v '^#' | grep -E '^ +[0-9]' | awk -v tag="np$1 $2 $3 ${4:-shm} $v" '{printf "%-28s %-9s dense %9.3f dct %9.3f speedup %5.2f\n", tag, $5, $6/1e3, $7/1e3, $8}'
  done; done
done
