#!/usr/bin/env bash
# Full comparison of the DLRM example: every mode at 2 and 4 ranks (table
# sharding, and row sharding with the dense and DES reduce-scatter), then a
# markdown table, a .dat file and a gnuplot PNG of held-out AUC per epoch.
#
#   examples/dlrm_hybrid/run_all.sh [BUILD_DIR] [OUT_DIR]
#
# BUILD_DIR: a configured and built libdct tree (default: build), holding
# examples/dlrm_hybrid/dlrm_hybrid. OUT_DIR: where logs and results go
# (default: examples/dlrm_hybrid/results). Extra flags for every run can be
# passed in DLRM_FLAGS (e.g. DLRM_FLAGS="--epochs 2" for a quick look), the
# rank counts in DLRM_NPS (default "2 4"). DLRM_REPORT_ONLY=1 skips the runs
# and rebuilds the table, .dat and plot from the logs in OUT_DIR.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BUILD="$(cd "${1:-$ROOT/build}" && pwd)"
OUT="${2:-$HERE/results}"
BIN="$BUILD/examples/dlrm_hybrid/dlrm_hybrid"
NPS="${DLRM_NPS:-2 4}"
[ -x "$BIN" ] || { echo "run_all.sh: $BIN not found: build the dlrm_hybrid target first" >&2; exit 1; }
mkdir -p "$OUT"

# Open MPI refuses root without these; 4 ranks on 2 cores need oversubscribe.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Keep glibc from returning (and re-faulting) large blocks between steps, so
# every mode runs under the same allocator behaviour (see DESIGN.md).
export GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967296

# tag | flags. The same data, model, seed and schedule in every run.
RUNS=(
  "dense|--mode dense"
  "mp-0.05|--mode mp --mp-density 0.05"
  "mp-0.025|--mode mp --mp-density 0.025"
  "dp-0.01|--mode dp --dp-density 0.01"
  "mpdp-0.05-0.01|--mode mpdp --mp-density 0.05 --dp-density 0.01"
  "mpdp-0.05-0.01-w10|--mode mpdp --mp-density 0.05 --dp-density 0.01 --dp-warmup 10"
  "mpdp-0.025-0.005-w10|--mode mpdp --mp-density 0.025 --dp-density 0.005 --dp-warmup 10"
  "mp-1-fp16|--mode mp --mp-density 1 --mp-wire fp16"
  "mp-0.05-fp16|--mode mp --mp-density 0.05 --mp-wire fp16"
  "mp-0.06-thr-fp16|--mode mp --mp-density 0.06 --mp-selection threshold --mp-interval 10 --mp-wire fp16"
  "dp-0.01-fp16|--mode dp --dp-density 0.01 --dp-wire fp16"
  "mpdp-0.05-0.01-fp16-w10|--mode mpdp --mp-density 0.05 --dp-density 0.01 --mp-wire fp16 --dp-wire fp16 --dp-warmup 10"
  "mpdp-0.05-0.005-fp16-w10|--mode mpdp --mp-density 0.05 --dp-density 0.005 --mp-wire fp16 --dp-wire fp16 --dp-warmup 10"
  "row-dense|--mode dense --sharding row"
  "row-des|--mode mp --sharding row"
  "row-des-0.05|--mode mp --sharding row --mp-density 0.05"
)

# 1. The runs, one log each (skipped with DLRM_REPORT_ONLY=1: the table and
#    plot are then rebuilt from the logs already in OUT_DIR).
if [ -z "${DLRM_REPORT_ONLY:-}" ]; then
  for np in $NPS; do
    for run in "${RUNS[@]}"; do
      tag="${run%%|*}"
      flags="${run#*|}"
      log="$OUT/$tag.np$np.log"
      cmd="mpirun -np $np --oversubscribe $BIN $flags --tag $tag ${DLRM_FLAGS:-}"
      echo "== $cmd"
      start=$(date +%s)
      { echo "# $cmd"; echo "# GLIBC_TUNABLES=$GLIBC_TUNABLES"; } > "$log"
      # shellcheck disable=SC2086
      $cmd < /dev/null >> "$log" 2>&1 || { echo "run failed: see $log" >&2; tail -5 "$log" >&2; exit 1; }
      echo "   $(( $(date +%s) - start )) s, $(grep -c '^RESULT' "$log") epochs -> $log"
    done
  done
fi

# 2. The .dat: the RESULT lines of every log, one block per (np, run).
DAT="$OUT/dlrm_hybrid.dat"
{
  echo "# DLRM hybrid example: one block per (np, run), blocks separated by two blank lines"
  echo "# columns: np tag epoch samples train_logloss logloss auc auc_full mp_bytes mp_dense dp_bytes dp_dense step_ms mp_ms dp_ms identical mp_fwd_bytes mp_bwd_bytes"
} > "$DAT"
SERIES=()
for np in $NPS; do
  for run in "${RUNS[@]}"; do
    tag="${run%%|*}"
    log="$OUT/$tag.np$np.log"
    [ -f "$log" ] || { echo "missing $log" >&2; exit 1; }
    echo "# np $np run $tag" >> "$DAT"
    grep '^RESULT' "$log" | awk -v np="$np" '{
      for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
      print np, v["tag"], v["epoch"], v["samples"], v["train_logloss"], v["logloss"], v["auc"], v["auc_full"],
            v["mp_bytes"], v["mp_dense"], v["dp_bytes"], v["dp_dense"], v["step_ms"], v["mp_ms"], v["dp_ms"],
            v["identical"], v["mp_fwd_bytes"], v["mp_bwd_bytes"] }' >> "$DAT"
    printf '\n\n' >> "$DAT"
    SERIES+=("$np $tag")
  done
done

# Markdown table: the last epoch of every run (AUC and MP bytes against the
# dense run, table sharding's MPI_Alltoallv, at the same np), plus the DP
# reduction over the whole run (warm-up included).
TABLE="$OUT/results.md"
awk '
  /^#/ || NF == 0 { next }
  { key = $1 " " $2; last[key] = $0; if (!(key in seen)) { seen[key] = 1; order[n++] = key }
    dpSent[key] += $11; dpDense[key] += $12 }
  END {
    print "| np | run | held-out AUC | AUC - dense | AUC, full rows at eval | held-out logloss | MP bytes/step | MP fwd + bwd | MP reduction | DP bytes/step | DP reduction | DP reduction, whole run | DP reduction, ring est. | ms/step (MP, DP) | DP replicas |"
    print "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
    for (i = 0; i < n; i++) {
      split(last[order[i]], f, " ")
      if (f[2] == "dense") { dense[f[1]] = f[7]; denseMp[f[1]] = f[9] }
    }
    for (i = 0; i < n; i++) {
      k = order[i]
      split(last[k], f, " ")
      d = (f[1] in dense) ? sprintf("%+.4f", f[7] - dense[f[1]]) : "n/a"
      # Ring estimate: dense ring allreduce sends 2(P-1)/P of the tensor per
      # rank, a ring allgather (P-1) messages: ratio 2 dense / (P sent).
      ring = (f[12] == f[11]) ? 1 : 2 * f[12] / (f[1] * f[11])
      mpx = (f[1] in denseMp) ? sprintf("%.2fx", denseMp[f[1]] / f[9]) : "n/a"
      fb = (f[17] != "") ? sprintf("%.0f + %.0f", f[17], f[18]) : "n/a"
      printf "| %s | %s | %.4f | %s | %.4f | %.4f | %.0f | %s | %s | %.0f | %.1fx | %.1fx | %.1fx | %.1f (%.1f, %.1f) | %s |\n",
             f[1], f[2], f[7], d, f[8], f[6], f[9], fb, mpx, f[11], f[12] / f[11], dpDense[k] / dpSent[k], ring,
             f[13], f[14], f[15], f[16] == 1 ? "bit-identical" : "DIFFER"
    }
  }' "$DAT" > "$TABLE"
cat "$TABLE"

# 3. gnuplot: held-out AUC per epoch, one column per rank count, the same
#    style for a run in every panel; top row all epochs, bottom row a zoom on
#    the second half of training (where differences of 0.002 are visible).
GP="$OUT/auc.gp"
yrange() {  # the AUC range of epochs >= $1, padded
  awk -v from="$1" '!/^#/ && NF && $3 >= from { if (lo == "" || $7 < lo) lo = $7; if ($7 > hi) hi = $7 }
                    END { printf "[%.3f:%.3f]", lo - 0.003, hi + 0.003 }' "$DAT"
}
EPOCHS=$(awk '!/^#/ && NF && $3 > m { m = $3 } END { print m }' "$DAT")
ZOOM=$(( EPOCHS / 2 > 1 ? EPOCHS / 2 : 1 ))
NCOLS=$(echo $NPS | wc -w)
{
  echo "# generated by run_all.sh; run in this directory: gnuplot auc.gp"
  echo "set terminal pngcairo size $(( 600 * NCOLS )),900 font ',10'"
  echo "set output 'auc.png'"
  echo "set multiplot layout 2,$NCOLS title 'DLRM hybrid example: held-out AUC per epoch (dense MPI vs DCT-MP, DCT-DP, both; row sharding)'"
  echo "set xlabel 'epoch (200 steps of 1024 samples)'; set ylabel 'held-out AUC'; set grid; set key bottom right; set xtics 1"
  for row in full zoom; do
    for np in $NPS; do
      if [ "$row" = full ]; then
        echo "set title '$np ranks'; set xrange [1:$EPOCHS]; set yrange $(yrange 1)"
      else
        echo "set title '$np ranks, epochs $ZOOM-$EPOCHS'; set xrange [$ZOOM:$EPOCHS]; set yrange $(yrange "$ZOOM")"
      fi
      plot="plot"
      j=0
      colors=(9400d3 009e73 56b4e9 e69f00 8b6914 0072b2 e51e10 000000 cc79a7 d55e00 f0e442 999999)
      for i in "${!SERIES[@]}"; do
        read -r snp stag <<< "${SERIES[$i]}"
        [ "$snp" = "$np" ] || continue
        j=$((j + 1))
        plot="$plot 'dlrm_hybrid.dat' index $i using 3:7 with linespoints lw 2 lc rgb '#${colors[(j - 1) % 12]}' dt $(( (j - 1) % 5 + 1 )) pt $j title '$stag',"
      done
      echo "${plot%,}"
    done
  done
  echo "unset multiplot"
} > "$GP"
if command -v gnuplot > /dev/null; then (cd "$OUT" && gnuplot auc.gp) && echo "wrote $OUT/auc.png"; else echo "gnuplot not found: $GP not rendered"; fi
