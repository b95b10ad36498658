#!/usr/bin/env bash
# Interleaved A/B of issue 33's whole change on the rows it must not slow:
# the 64-256 KiB rows (shared memory, 2 and 4 ranks, auto and dense pinned),
# T2 (2 ranks, shared memory, 64 MiB, 1%) and T1 (4 ranks, 1 Gbit/s shaped
# links, 64 MiB, 1%). OLD and NEW build dirs alternate on every row, REPS
# times. Raw lines (tag np rep + dct_perf's columns) go to OUT/{small-auto,
# small-dense,t2,t1}.txt; bench/results/2026-11-25-agreed/medians.py reads them.
# usage: ab.sh OLD_BUILD NEW_BUILD REPS OUT
set -euo pipefail
OLD=$1 NEW=$2 REPS=$3 OUT=$4
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967296
RING=(--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4)
rows() { grep -E '^ +[0-9]' | sed "s/^ */$1 $2 $3 /"; }
for rep in $(seq "$REPS"); do
  for v in old new; do
    b=$OLD; [ "$v" = new ] && b=$NEW
    for np in 2 4; do
      for algo in auto dense; do
        timeout 300 mpirun -np "$np" --oversubscribe -x GLIBC_TUNABLES "${RING[@]}" "$b/bench/dct_perf" -p \
          -b 64K -e 256K -f 4 -D 0.001 -a "$algo" -n 21 -w 10 2>&1 | rows "$v" "$np" "$rep" >> "$OUT/small-$algo.txt"
      done
    done
    timeout 300 mpirun -np 2 --oversubscribe -x GLIBC_TUNABLES "${RING[@]}" "$b/bench/dct_perf" -p \
      -b 64M -e 64M -D 0.01 -n 7 -w 10 2>&1 | rows "$v" 2 "$rep" >> "$OUT/t2.txt"
    timeout 900 "$ROOT/bench/netem/run.sh" -np 4 --rate 1gbit --timeout 800 -- "$b/bench/dct_perf" -p -l 1 \
      -b 64M -e 64M -D 0.01 -n 7 -w 10 2>&1 | rows "$v" 4 "$rep" >> "$OUT/t1.txt"
  done
done
