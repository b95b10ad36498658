#!/usr/bin/env bash
# The lossless sparse-input allreduce (dct_perf -C coo, issue 35): 4 ranks,
# n = 16M fp32 (64 MiB), uniform and Zipf indices, densities 0.1% - 50%,
# auto and every forced plan, against dense MPI_Allreduce (ring, forced)
# and libdct's allgather + scatter-add, on shared memory and on 1 Gbit/s
# shaped links. Open MPI's ring is forced for both MPI_Allreduce and
# MPI_Allgatherv (its own choice of allgatherv ran at about half the link
# rate there); netem-defaults repeats auto at 0.1-10% with Open MPI's own
# choices. DENSITIES="..." narrows the sweep.
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
RING=(OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_allreduce_algorithm=4
      OMPI_MCA_coll_tuned_allgatherv_algorithm=3)
DENSITIES="${DENSITIES:-0.001 0.01 0.1 0.3 0.5}"
ITERS=(-n 7 -w 3)

shm() { env "${RING[@]}" timeout 900 mpirun -np 4 --oversubscribe -x GLIBC_TUNABLES "$PERF" -C coo -b 64M -e 64M "${ITERS[@]}" "$@"; }
netem() { env "${RING[@]}" timeout 1800 "$ROOT/bench/netem/run.sh" -np 4 --rate 1gbit --timeout 1700 -- "$PERF" -C coo -b 64M -e 64M -l 1 "${ITERS[@]}" "$@"; }
for where in netem shm; do
  for d in $DENSITIES; do
    for a in auto allgather split dense; do
      "$where" -D "$d" -a "$a" -J "$OUT/$where.json" | tee -a "$OUT/$where.log"
    done
    "$where" -D "$d" -a auto -I zipf -J "$OUT/$where.json" | tee -a "$OUT/$where.log"
  done
done
for d in 0.001 0.01 0.1; do
  timeout 1800 "$ROOT/bench/netem/run.sh" -np 4 --rate 1gbit --timeout 1700 -- "$PERF" -C coo -b 64M -e 64M -l 1 \
    "${ITERS[@]}" -D "$d" -J "$OUT/netem-defaults.json" | tee -a "$OUT/netem-defaults.log"
done
python3 "$ROOT/bench/results/coo_report.py" "$OUT"
gnuplot -e "dir='$OUT'" "$ROOT/bench/results/coo_plots.gp"
echo "results in $OUT"
