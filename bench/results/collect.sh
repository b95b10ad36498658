#!/usr/bin/env bash
# The first allreduce sweep: 4 ranks, fp32, on shared memory and on
# 1 Gbit/s shaped links (bench/netem), then writes markdown tables and
# gnuplot PNGs into bench/results/<date>-<host>/. collect_e2e.sh supersedes
# it; its one recorded output (2026-11-22-vm) was removed (bench/results/README.md).
#   bench/results/collect.sh [build-dir]       (default: build)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="$(cd "${1:-$ROOT/build}" && pwd)"
PERF="$BUILD/bench/dct_perf"
OUT="$ROOT/bench/results/$(date +%Y-%m-%d)-$(hostname -s)"
mkdir -p "$OUT"
rm -f "$OUT"/*.json
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Stable allocations for both sides (DESIGN.md §6): no mmap/trim churn.
export GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967296
SWEEP="0.0001 0.001 0.003 0.01 0.03 0.1 0.2 0.3 0.5"

shm() {  # dense ring forced here too, as on the shaped links
  timeout 900 mpirun -np 4 --oversubscribe -x GLIBC_TUNABLES \
    --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4 "$PERF" "$@"
}
netem() { timeout 1800 "$ROOT/bench/netem/run.sh" -np 4 --rate 1gbit --timeout 1700 -- "$PERF" "$@"; }

# 10 warm-up steps: error feedback's residual fills and auto's tuner takes
# its first measurements before the 7 timed steps.
for net in shm netem; do
  for d in 0.001 0.01 0.1; do
    $net -b 1M -e 64M -f 4 -D "$d" -n 7 -w 10 -J "$OUT/${net}_size_D$d.json" | tee -a "$OUT/${net}.log"
  done
  for d in $SWEEP; do
    $net -b 64M -e 64M -D "$d" -n 7 -w 10 -J "$OUT/${net}_density.json" | tee -a "$OUT/${net}.log"
  done
done

{
  echo "# libdct benchmark results, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "Machine: $(hostname -s), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
       "$(free -g | awk '/Mem/{print $2}') GiB; Open MPI $(mpirun --version | head -1 | awk '{print $NF}');" \
       "libdct $(git -C "$ROOT" rev-parse --short HEAD)."
  echo "Dense baseline: MPI_Allreduce with Open MPI's ring forced" \
       "(coll_tuned_allreduce_algorithm 4) on both networks. Command: \`bench/results/collect.sh\`."
  echo
} > "$OUT/README.md"
for f in "$OUT"/*.json; do
  base="${f%.json}"
  title="$(basename "$base" | sed 's/^shm/shared memory/; s/^netem/1 Gbit\/s shaped links (tc tbf)/; s/_size_D/, time vs size, density /; s/_density/, 64 MiB, speedup vs density/')"
  python3 "$ROOT/bench/results/report.py" "$f" "$title" "$base"
  cat "$base.md" >> "$OUT/README.md"
done
gnuplot -e "dir='$OUT'" "$ROOT/bench/results/plots.gp"
# CPU kernels against memcpy, one thread and all threads.
{
  echo '```'
  "$BUILD/bench/kernel_perf" -t 1 -b 1M -e 64M -f 4 -n 7
  "$BUILD/bench/kernel_perf" -b 1M -e 64M -f 4 -n 7
  echo '```'
} > "$OUT/kernel_perf.md"
echo "results in $OUT"
