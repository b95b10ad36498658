#!/usr/bin/env bash
# Trains every synchronisation mode (10 epochs, 4 ranks by default) and
# records results/<mode>.csv, results/summary.md and results/accuracy.png.
# Usage: examples/dp_fashion_mnist/run_all.sh [build dir] [ranks] [epochs]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../../build}" ranks="${2:-4}" epochs="${3:-10}"
bin="$build/examples/dp_fashion_mnist/dp_fashion_mnist"
out="$here/results"
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
runs=("dense 1" "dct 0.01" "dct 0.003" "dct 0.001" "dct-noef 0.01" "dct-noef 0.001" "onebit 1")
# REPORT_ONLY=1: only the table and plot, from the CSVs already there.
[ "${REPORT_ONLY:-0}" = 1 ] || for run in "${runs[@]}"; do
  read -r mode density <<<"$run"
  name="$mode-$density"
  echo "== $name"
  mpirun --oversubscribe -np "$ranks" "$bin" --sync "$mode" --density "$density" --epochs "$epochs" \
    --csv "$out/$name.csv" | tee "$out/$name.log"
done

{
  echo "Command: \`examples/dp_fashion_mnist/run_all.sh\` ($ranks ranks sharing $(nproc) cores, $epochs epochs,"
  echo "batch 64 per rank, SGD lr 0.05 momentum 0.9, MLP 784-512-256-10, seed 1)."
  echo
  echo "| sync | density | test accuracy (epoch $epochs) | vs dense | train loss | bytes/step/rank | less than a ring | s/epoch (mean) |"
  echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
  dense=$(tail -1 "$out/dense-1.csv" | cut -d, -f5)
  for run in "${runs[@]}"; do
    read -r mode density <<<"$run"
    awk -F, -v d="$dense" -v m="$mode" -v den="$density" 'END {
      t = 0; for (i = 2; i <= NR; i++) t += s[i]
      printf "| %s | %s | %.2f%% | %+.2f pp | %.4f | %.1f KB | %.1fx | %.1f |\n",
             m, (m == "dense" || m == "onebit") ? "-" : den, 100 * $5, 100 * ($5 - d), $4, $6 / 1e3, $8, t / (NR - 1) }
      { s[NR] = $9 }' "$out/$mode-$density.csv"
  done
} >"$out/summary.md"
cat "$out/summary.md"

plot="set datafile separator ','; set terminal pngcairo size 900,560; set output '$out/accuracy.png';"
plot+="set title 'Fashion-MNIST, $ranks ranks: test accuracy per epoch'; set xlabel 'epoch'; set ylabel 'test accuracy (%)';"
plot+="set key bottom right; set grid; plot "
for run in "${runs[@]}"; do
  read -r mode density <<<"$run"
  label="$mode"; [ "$mode" = dct ] || [ "$mode" = dct-noef ] && label="$mode $density"
  plot+="'$out/$mode-$density.csv' every ::1 using 1:(\$5*100) with linespoints title '$label',"
done
gnuplot -e "${plot%,}"
echo "wrote $out/summary.md and $out/accuracy.png"
