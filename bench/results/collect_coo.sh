#!/usr/bin/env bash
# The lossless sparse-input allreduce (dct_perf -C coo, issue 35): 4 ranks,
# n = 16M fp32 (64 MiB), uniform and Zipf indices, densities 0.1% - 50%,
# auto and every forced plan, against dense MPI_Allreduce (ring, forced)
# and libdct's allgather + scatter-add, on shared memory and on 1 Gbit/s
# shaped links. DENSITIES="..." narrows the sweep.
#   bench/results/collect_coo.sh [build-dir] [out-dir]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="$(cd "${1:-$ROOT/build}" && pwd)"
OUT="${2:-$ROOT/bench/results/$(date +%Y-%m-%d)-coo}"
PERF="$BUILD/bench/dct_perf"
mkdir -p "$OUT"
rm -f "$OUT"/*.json "$OUT"/*.log
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967296
export OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_allreduce_algorithm=4
DENSITIES="${DENSITIES:-0.001 0.01 0.1 0.3 0.5}"
ITERS=(-n 7 -w 3)

shm() { timeout 900 mpirun -np 4 --oversubscribe -x GLIBC_TUNABLES "$PERF" -C coo -b 64M -e 64M "${ITERS[@]}" "$@"; }
netem() { timeout 1800 "$ROOT/bench/netem/run.sh" -np 4 --rate 1gbit --timeout 1700 -- "$PERF" -C coo -b 64M -e 64M -l 1 "${ITERS[@]}" "$@"; }
for where in netem shm; do
  for d in $DENSITIES; do
    for a in auto allgather split dense; do
      "$where" -D "$d" -a "$a" -J "$OUT/$where.json" | tee -a "$OUT/$where.log"
    done
    "$where" -D "$d" -a auto -I zipf -J "$OUT/$where.json" | tee -a "$OUT/$where.log"
  done
done
python3 "$ROOT/bench/results/coo_report.py" "$OUT"
gnuplot -e "dir='$OUT'" "$ROOT/bench/results/coo_plots.gp"
echo "results in $OUT"
