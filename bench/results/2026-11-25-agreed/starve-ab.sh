#!/usr/bin/env bash
# Interleaved A/B of the small-k rows of collect_e2e.sh's shared-memory grid
# (64 and 256 KiB; -p -n 21 -w 10, ring dense baseline, its GLIBC_TUNABLES)
# at 2 and 4 ranks: OLD and NEW build dirs alternate on every row,
# REPS times, so the VM's drift hits both alike. Raw lines go to stdout:
#   tag np rep  size count type density algo dense_us dct_us speedup wire_bytes ...
# and each run's "tau estimates" footer as: tag np rep est size N.
# ALGO=allgather pins the algorithm (default auto); DENSITIES narrows the rows.
# usage: [ALGO=..] [DENSITIES=".."] starve-ab.sh OLD_BUILD NEW_BUILD REPS
set -euo pipefail
OLD=$1 NEW=$2 REPS=$3
ALGO=${ALGO:-auto}
DENSITIES=${DENSITIES:-0.0001 0.001 0.01}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967296
RING=(--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4)
for rep in $(seq "$REPS"); do
  for np in 2 4; do
    for d in $DENSITIES; do
      for v in old new; do
        b=$OLD; [ "$v" = new ] && b=$NEW
        out=$(timeout 300 mpirun -np "$np" --oversubscribe -x GLIBC_TUNABLES "${RING[@]}" "$b/bench/dct_perf" -p \
              -b 64K -e 256K -f 4 -D "$d" -a "$ALGO" -n 21 -w 10 2>&1)
        echo "$out" | grep -E '^ +[0-9]' | sed "s/^ */$v $np $rep /"
        echo "$out" | grep 'tau estimates' | awk -v t="$v $np $rep" '{print t, "est", $3, $NF}' | tr -d ':'
      done
    done
  done
done
