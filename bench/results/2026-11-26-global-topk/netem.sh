#!/usr/bin/env bash
# Global top-k against split, allgather and dense on 1 Gbit/s shaped links:
# 16 MiB fp32 (4M elements), 4 and 8 ranks, densities 1% and 0.1%; one
# process per configuration, each under the timing lock. Raw logs and JSON
# rows go to raw/, the table to stdout (netem_report.py).
#   bench/results/2026-11-26-global-topk/netem.sh [build-dir]
# RANKS="4 8", DENSITIES="0.01 0.001", ITERS=9, WARMUPS=5 narrow or widen it.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
BUILD="$(cd "${1:-$ROOT/build}" && pwd)"
RAW="$HERE/raw"
mkdir -p "$RAW"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967296
LOCK=/tmp/dct_timing.lock
ITERS="${ITERS:-9}" WARMUPS="${WARMUPS:-5}"
# -c 0: dct_perf's check replays the full sum of every rank's selection,
# which global top-k does not deliver (it holds the rest back by design).
run() {
  local np=$1 algo=$2 d=$3 name="np$1-$2-$3"
  echo "== $name"
  rm -f "$RAW/$name.json"
  flock "$LOCK" "$ROOT/bench/netem/run.sh" -np "$np" --rate 1gbit --stats --timeout 900 -- \
    "$BUILD/bench/dct_perf" -b 16M -e 16M -D "$d" -a "$algo" -n "$ITERS" -w "$WARMUPS" \
    -c 0 -p -l 1 -J "$RAW/$name.json" 2>&1 | tee "$RAW/$name.log"
}
for np in ${RANKS:-4 8}; do
  for d in ${DENSITIES:-0.01 0.001}; do
    for algo in globaltopk split allgather; do run "$np" "$algo" "$d"; done
  done
  run "$np" dense 0.01  # libdct's dense algorithm: density does not change it
done
/usr/bin/python3 "$HERE/netem_report.py" "$RAW"
