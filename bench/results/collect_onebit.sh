#!/usr/bin/env bash
# 1-bit compressed allreduce (dct_perf -C onebit) against dense MPI_Allreduce
# (Open MPI's ring, forced) and, for reference, DCT-DP top-K at density 1%
# (dct_perf -C allreduce -D 0.01): 4 ranks, fp32, shared memory and 1 Gbit/s
# shaped links (bench/netem), sizes 1M..64M bytes. Every configuration runs
# REPEATS times, each in its own process; the table gives the median of the
# per-run medians and the min-max over all timed iterations of all runs.
# Writes JSON rows, logs and a README.md table into
# bench/results/<date>-onebit/.
#   bench/results/collect_onebit.sh [build-dir]      (default: build)
# Environment knobs (defaults): REPEATS=3 ITERS=7 WARMUPS=5 NETS="shm netem"
#   SIZES="-b 1M -e 64M -f 4"
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="$(cd "${1:-$ROOT/build}" && pwd)"
PERF="$BUILD/bench/dct_perf"
OUT="$ROOT/bench/results/$(date +%Y-%m-%d)-onebit"
REPEATS=${REPEATS:-3} ITERS=${ITERS:-7} WARMUPS=${WARMUPS:-5}
NETS=${NETS:-shm netem}
SIZES=${SIZES:--b 1M -e 64M -f 4}
[[ -x $PERF ]] || { echo "no $PERF: build dct_perf first" >&2; exit 2; }
mkdir -p "$OUT"
rm -f "$OUT"/*.json "$OUT"/*.log "$OUT"/README.md
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Stable allocations for both sides (DESIGN.md §6): no mmap/trim churn.
export GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967296
# Dense baseline: Open MPI's ring allreduce on both networks (its default
# choice at these sizes, Rabenseifner, is ~1.5x slower on shaped links).
# run.sh passes OMPI_MCA_* on through mpirun.
export OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_allreduce_algorithm=4

shm() { timeout 900 mpirun -np 4 --oversubscribe -x GLIBC_TUNABLES "$PERF" "$@"; }
netem() { timeout 1800 "$ROOT/bench/netem/run.sh" -np 4 --rate 1gbit --timeout 1700 -- "$PERF" "$@"; }

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
LOAD_START=$(loadavg)
STARTED=$(date -u +%Y-%m-%dT%H:%MZ)
for net in $NETS; do
  for ((r = 1; r <= REPEATS; r++)); do
    # shellcheck disable=SC2086  # SIZES is a list of flags
    $net -C onebit $SIZES -n "$ITERS" -w "$WARMUPS" -J "$OUT/${net}_onebit.json" | tee -a "$OUT/${net}.log"
    # shellcheck disable=SC2086
    $net -C allreduce -D 0.01 $SIZES -n "$ITERS" -w "$WARMUPS" -J "$OUT/${net}_topk.json" | tee -a "$OUT/${net}.log"
  done
done
LOAD_END=$(loadavg)

python3 - "$OUT" > "$OUT/table.md" <<'PY'
import glob, json, os, statistics, sys
out = sys.argv[1]
NET = {"shm": "shared memory (4 ranks on 2 cores)", "netem": "1 Gbit/s shaped links (tc tbf)"}
KIND = {"onebit": "1-bit", "topk": "top-K 1%"}
rows = {}
for path in sorted(glob.glob(os.path.join(out, "*.json"))):
    net, kind = os.path.basename(path)[:-5].split("_")
    for line in open(path):
        r = json.loads(line)
        rows.setdefault((net, r["size"]), {}).setdefault(kind, []).append(r)
for net in ("shm", "netem"):
    sizes = sorted(s for (n, s) in rows if n == net)
    if not sizes:
        continue
    print(f"\n### {NET[net]}\n")
    print("| size | dense ms (min-max) | 1-bit ms (min-max) | 1-bit speedup | 1-bit wire B/rank | 1-bit ratio "
          "| top-K 1% ms | top-K speedup | top-K wire B/rank | #wrong |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for size in sizes:
        g = rows[(net, size)]
        ob, tk = g.get("onebit", []), g.get("topk", [])
        dense = [r["dense_us"] for r in ob + tk]
        med = lambda rs, k: statistics.median(r[k] for r in rs) / 1e3 if rs else float("nan")
        lo = lambda rs, k: min(r[k] for r in rs) / 1e3 if rs else float("nan")
        hi = lambda rs, k: max(r[k] for r in rs) / 1e3 if rs else float("nan")
        dmed = statistics.median(dense) / 1e3
        wrong = sum(r["wrong"] for r in ob + tk)
        print(f"| {size / 2**20:g} MiB | {dmed:.2f} ({lo(ob + tk, 'dense_min_us'):.2f}-{hi(ob + tk, 'dense_max_us'):.2f}) "
              f"| {med(ob, 'dct_us'):.2f} ({lo(ob, 'dct_min_us'):.2f}-{hi(ob, 'dct_max_us'):.2f}) "
              f"| {dmed / med(ob, 'dct_us'):.2f}x | {statistics.median(r['wire_bytes'] for r in ob):.0f} "
              f"| {statistics.median(r['ratio'] for r in ob):.1f} | {med(tk, 'dct_us'):.2f} "
              f"| {dmed / med(tk, 'dct_us'):.2f}x | {statistics.median(r['wire_bytes'] for r in tk):.0f} | {wrong} |")
PY

{
  echo "# 1-bit compressed allreduce vs dense and top-K, $STARTED"
  echo
  echo "Machine: $(hostname -s), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs);" \
       "Open MPI $(mpirun --version | head -1 | awk '{print $NF}'); libdct $(git -C "$ROOT" rev-parse --short HEAD)."
  echo "Load average at start / end: $LOAD_START / $LOAD_END."
  echo "Dense: MPI_Allreduce, Open MPI's ring forced (coll_tuned_allreduce_algorithm 4), fp32 sum."
  echo "1-bit: \`dct_perf -C onebit\` (compression and error feedback included in the time)."
  echo "Top-K: \`dct_perf -C allreduce -D 0.01\` (DCT-DP, auto algorithm)."
  echo "Times: median over $REPEATS runs of each run's median of $ITERS timed iterations (per-iteration max"
  echo "over ranks, $WARMUPS warm-ups); min-max over all timed iterations. Wire bytes: what one rank sends"
  echo "(stats.bytesSent); ratio: dense bytes (count * 4) / wire bytes. #wrong: the -c 1 checks (bit-exact replay)."
  cat "$OUT/table.md"
  echo
  echo "Commands: \`bench/results/collect_onebit.sh\` (REPEATS=$REPEATS ITERS=$ITERS WARMUPS=$WARMUPS" \
       "NETS=\"$NETS\" SIZES=\"$SIZES\")."
} > "$OUT/README.md"
echo "results in $OUT"
