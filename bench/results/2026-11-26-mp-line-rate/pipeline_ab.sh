#!/usr/bin/env bash
# The pipelined DCT-MP forward against the unchunked one (DCT_PIPELINE=0),
# alternating rep by rep: 16 MiB of fp32 rows per rank, D 64, 5%, 4 ranks,
# on 1 Gbit/s links (bench/netem) and on shared memory. Raw logs under
# raw/pipeline/; medians by pipeline_ab.py.
# Usage: bench/results/2026-11-26-mp-line-rate/pipeline_ab.sh [build] [reps]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-build}" reps="${2:-5}"
out="$here/raw/pipeline"
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
perf=("$build/bench/dct_perf" -C alltoall -R 64 -D 0.05 -b 16M -e 16M -n 9 -w 3)
for rep in $(seq 1 "$reps"); do
  for pl in 0 1; do
    DCT_PIPELINE=$pl flock /tmp/dct_timing.lock bench/netem/run.sh -np 4 --rate 1gbit --timeout 300 -- \
      "${perf[@]}" -l 1 >"$out/netem-pl$pl-$rep.log" 2>&1
    DCT_PIPELINE=$pl flock /tmp/dct_timing.lock mpirun --oversubscribe -np 4 -x DCT_PIPELINE \
      "${perf[@]}" >"$out/shm-pl$pl-$rep.log" 2>&1
  done
done
