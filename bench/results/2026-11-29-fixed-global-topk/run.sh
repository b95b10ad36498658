#!/usr/bin/env bash
# Fixed global top-k vs fixed allgather slots vs variable global top-k, 4 ranks, shared memory.
# Usage: bench/results/2026-11-29-fixed-global-topk/run.sh BUILD_DIR > raw.txt
set -u
build=${1:-build-cpu}
export DCT_THRESHOLD_METHOD=sampled
export GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967296
for size in 16M 64M; do
  for row in "globaltopk 1.25" "globaltopk 2" "allgather 1.25" "allgather 2" "globaltopk 0"; do
    set -- $row
    echo "## size=$size algo=$1 capacity=$2 load=$(cut -d' ' -f1 /proc/loadavg)"
    DCT_CAPACITY_FACTOR=$2 timeout 600 mpirun -np 4 --oversubscribe -x DCT_CAPACITY_FACTOR -x DCT_THRESHOLD_METHOD \
      -x GLIBC_TUNABLES "$build/bench/dct_perf" -a "$1" -c 0 -b "$size" -e "$size" -D 0.01 -n 7 -w 5 2>&1 |
      grep -E "^ +[0-9]|received"
  done
done
