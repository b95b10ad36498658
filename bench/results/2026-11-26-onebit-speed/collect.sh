#!/usr/bin/env bash
# Before/after of the 1-bit allreduce at 64 MiB fp32, 4 ranks: dct_perf -C
# onebit from several builds, interleaved, on shared memory and on 1 Gbit/s
# shaped links (bench/netem), REPEATS runs each, every run its own process.
# JSON rows land in this folder as <net>_<label>.json; summary.py tabulates.
#   collect.sh label=build-dir [label=build-dir ...]
# Knobs (defaults): REPEATS=3 ITERS=7 WARMUPS=3 NETS="shm netem" SIZE=64M
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
REPEATS=${REPEATS:-3} ITERS=${ITERS:-7} WARMUPS=${WARMUPS:-3}
NETS=${NETS:-shm netem} SIZE=${SIZE:-64M}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Stable allocations (docs: DESIGN §6) and Open MPI's ring for the dense baseline.
export GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967296
export OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_allreduce_algorithm=4
# Each run holds the machine's timing lock (other timing jobs share the cores).
LOCK=${LOCK:-/tmp/dct_timing.lock}
shm() { flock "$LOCK" timeout 900 mpirun -np 4 --oversubscribe -x GLIBC_TUNABLES "$@"; }
netem() { flock "$LOCK" timeout 1800 "$ROOT/bench/netem/run.sh" -np 4 --rate 1gbit --timeout 1700 -- "$@"; }
for net in $NETS; do
  link=(); [[ $net == netem ]] && link=(-l 1)
  for ((r = 1; r <= REPEATS; r++)); do
    for spec in "$@"; do
      label=${spec%%=*} build=${spec#*=}
      echo "== $net run $r $label ($(cut -d' ' -f1-3 /proc/loadavg))"
      $net "$build/bench/dct_perf" -C onebit -b "$SIZE" -e "$SIZE" -n "$ITERS" -w "$WARMUPS" -p "${link[@]}" \
        -J "$HERE/${net}_${label}.json" | tee -a "$HERE/${net}.log"
    done
  done
done
