#!/usr/bin/env bash
# The cost model's ordering of the DCT-DP plans checked on links: 8 ranks
# behind 1 Gbit/s shaped links (bench/netem/run.sh, root), one fp32 tensor of
# COUNT (16M) elements, densities 1% and 0.1%; allgather, split and global
# top-k with each reduce-scatter exchange (DCT_SPLIT_EXCHANGE pairwise /
# halving), libdct's dense algorithm and auto, one process per
# configuration. Then cost_table's prices for the same shapes with the link
# and latency the runs' probes measured (LINK_GBPS, ALPHA_US). Raw logs and
# JSON rows go to raw/.
#   bench/results/2026-11-29-netem8-order/run.sh [build-dir]
# Env: RANKS (8), COUNT (16M), DENSITIES ("0.01 0.001"), ITERS (7), WARMUPS (3).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
BUILD="$(cd "${1:-$ROOT/build}" && pwd)"
RAW="$HERE/raw"
mkdir -p "$RAW"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967296
NP="${RANKS:-8}" COUNT="${COUNT:-16M}" ITERS="${ITERS:-7}" WARMUPS="${WARMUPS:-3}"
# -c 0: global top-k holds part of the sum back by design, which dct_perf's
# check would count as wrong; every plan runs unchecked to keep runs alike.
run() {  # run <algo> <density> <exchange>
  local algo=$1 d=$2 ex=$3 name="np$NP-$1-$3-$2"
  echo "== $name (load $(cut -d' ' -f1-3 /proc/loadavg))" | tee "$RAW/$name.log"
  rm -f "$RAW/$name.json"
  DCT_SPLIT_EXCHANGE=$ex "$ROOT/bench/netem/run.sh" -np "$NP" --rate 1gbit --timeout 900 -- \
    "$BUILD/bench/dct_perf" -b "$COUNT" -e "$COUNT" -D "$d" -a "$algo" -n "$ITERS" -w "$WARMUPS" \
    -c 0 -p -l 1 -J "$RAW/$name.json" 2>&1 | tee -a "$RAW/$name.log"
}
for d in ${DENSITIES:-0.01 0.001}; do
  run allgather "$d" auto
  for algo in split globaltopk; do
    for ex in pairwise halving; do run "$algo" "$d" "$ex"; done
  done
  run auto "$d" auto
done
run dense 0.01 auto
