#!/usr/bin/env bash
# Global top-k against allgather and dense at 8 ranks (10 epochs): records
# results/global-topk-8ranks/<name>.csv|.log, summary.md and accuracy.png.
# Each run holds /tmp/dct_timing.lock so it does not disturb timed runs.
# Usage: examples/dp_fashion_mnist/run_global_topk.sh [build dir] [ranks] [epochs]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../../build}" ranks="${2:-8}" epochs="${3:-10}"
bin="$build/examples/dp_fashion_mnist/dp_fashion_mnist"
out="$here/results/global-topk-8ranks"
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# sync density algorithm
runs=("dense 1 -" "dct 0.01 allgather" "dct 0.01 globaltopk" "dct 0.001 allgather" "dct 0.001 globaltopk")
name() { [ "$1" = dense ] && echo dense || echo "$3-$2"; }
# REPORT_ONLY=1: only the table and plot, from the CSVs already there.
[ "${REPORT_ONLY:-0}" = 1 ] || for run in "${runs[@]}"; do
  read -r mode density algo <<<"$run"
  n=$(name "$mode" "$density" "$algo")
  args=(--sync "$mode" --density "$density" --epochs "$epochs" --csv "$out/$n.csv")
  [ "$algo" = - ] || args+=(--algorithm "$algo")
  echo "== $n"
  flock /tmp/dct_timing.lock mpirun --oversubscribe -np "$ranks" "$bin" "${args[@]}" 2>&1 | tee "$out/$n.log"
done

{
  echo "Command: \`examples/dp_fashion_mnist/run_global_topk.sh\` ($ranks ranks sharing $(nproc) cores, $epochs epochs,"
  echo "batch 64 per rank, SGD lr 0.05 momentum 0.9, MLP 784-512-256-10, seed 1)."
  echo
  echo "| sync | density | algorithm | test accuracy (epoch $epochs) | vs dense | train loss | bytes/step/rank | less than a ring | s/epoch (mean) |"
  echo "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
  dense=$(tail -1 "$out/dense.csv" | cut -d, -f5)
  for run in "${runs[@]}"; do
    read -r mode density algo <<<"$run"
    awk -F, -v d="$dense" -v m="$mode" -v den="$density" -v a="$algo" 'END {
      t = 0; for (i = 2; i <= NR; i++) t += s[i]
      printf "| %s | %s | %s | %.2f%% | %+.2f pp | %.4f | %.1f KB | %.1fx | %.1f |\n",
             m, m == "dense" ? "-" : den, a, 100 * $5, 100 * ($5 - d), $4, $6 / 1e3, $8, t / (NR - 1) }
      { s[NR] = $9 }' "$out/$(name "$mode" "$density" "$algo").csv"
  done
} >"$out/summary.md"
cat "$out/summary.md"

plot="set datafile separator ','; set terminal pngcairo size 900,560; set output '$out/accuracy.png';"
plot+="set title 'Fashion-MNIST, $ranks ranks: test accuracy per epoch'; set xlabel 'epoch'; set ylabel 'test accuracy (%)';"
plot+="set key bottom right; set grid; plot "
for run in "${runs[@]}"; do
  read -r mode density algo <<<"$run"
  n=$(name "$mode" "$density" "$algo")
  label="dense"; [ "$mode" = dense ] || label="$algo $density"
  plot+="'$out/$n.csv' every ::1 using 1:(\$5*100) with linespoints title '$label',"
done
gnuplot -e "${plot%,}"
echo "wrote $out/summary.md and $out/accuracy.png"
