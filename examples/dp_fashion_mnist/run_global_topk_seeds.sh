#!/usr/bin/env bash
# Global top-k against allgather and dense at 8 ranks, 10 epochs, three seeds:
# records <out>/<name>-s<seed>.csv|.log, summary.md (mean and sample sd over
# seeds) and accuracy.png (mean test accuracy per epoch).
# Each run holds /tmp/dct_timing.lock so it does not disturb timed runs.
# Usage: examples/dp_fashion_mnist/run_global_topk_seeds.sh [build dir] [ranks] [epochs]
# Environment: SEEDS ("1 2 3"); OUT (results/global-topk-8ranks-seeds);
# RUNS (configs "sync density algorithm[ tag]" separated by ';', the tag names
# a variant run with the environment VARIANT_ENV, e.g. DCT_FOO=1, and the
# extra arguments VARIANT_ARGS, e.g. --momentum-correction 1);
# DENSE (the dense runs' folder, when OUT has none); REPORT_ONLY=1: only the
# tables and plot, from the CSVs already there.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-$here/../../build}" ranks="${2:-8}" epochs="${3:-10}"
bin="$build/examples/dp_fashion_mnist/dp_fashion_mnist"
out="${OUT:-$here/results/global-topk-8ranks-seeds}"
seeds=(${SEEDS:-1 2 3})
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
IFS=';' read -r -a runs <<<"${RUNS:-dense 1 -;dct 0.01 allgather;dct 0.001 allgather;dct 0.01 globaltopk;dct 0.001 globaltopk}"
name() { [ "$1" = dense ] && echo dense || echo "$3${4:+-$4}-$2"; }

[ "${REPORT_ONLY:-0}" = 1 ] || for seed in "${seeds[@]}"; do
  for run in "${runs[@]}"; do
    read -r mode density algo tag <<<"$run"
    n=$(name "$mode" "$density" "$algo" "$tag")-s$seed
    args=(--sync "$mode" --density "$density" --epochs "$epochs" --seed "$seed" --csv "$out/$n.csv")
    [ "$algo" = - ] || args+=(--algorithm "$algo")
    envs=(); [ -z "$tag" ] || read -r -a envs <<<"${VARIANT_ENV:-}"
    [ -z "$tag" ] || { read -r -a extra <<<"${VARIANT_ARGS:-}"; args+=("${extra[@]}"); }
    echo "== $n ${envs[*]} ${args[*]}"
    flock /tmp/dct_timing.lock env "${envs[@]}" mpirun --oversubscribe -np "$ranks" "$bin" "${args[@]}" 2>&1 |
      tee "$out/$n.log"
  done
done

dense_dir="${DENSE:-$out}"
# stats FILES...: per seed file, the last epoch's and the mean of the last 3 epochs' accuracy (percent),
# and the last epoch's train loss.
stats() { for f in "$@"; do awk -F, 'NR > 1 { a[NR] = 100 * $5 } END {
  printf "%.4f %.4f %.6f\n", a[NR], (a[NR] + a[NR - 1] + a[NR - 2]) / 3, $4 }' "$f"; done; }
# meansd COLUMN: mean and sample sd of a column of stats' output.
meansd() { awk -v c="$1" '{ x[NR] = $c; s += $c } END { m = s / NR; for (i = 1; i <= NR; i++) v += (x[i] - m) ^ 2
  printf "%.4f %.4f\n", m, (NR > 1 ? sqrt(v / (NR - 1)) : 0) }'; }
files() { for s in "${seeds[@]}"; do echo "$1/$2-s$s.csv"; done; }
read -r dfin _ <<<"$(stats $(files "$dense_dir" dense) | meansd 1)"
read -r dlate _ <<<"$(stats $(files "$dense_dir" dense) | meansd 2)"
{
  echo "Command: \`examples/dp_fashion_mnist/run_global_topk_seeds.sh\` ($ranks ranks sharing $(nproc) cores, $epochs epochs,"
  echo "batch 64 per rank, SGD lr 0.05 momentum 0.9, MLP 784-512-256-10, seeds ${seeds[*]}${VARIANT_ENV:+; variants run with $VARIANT_ENV}${VARIANT_ARGS:+; variants run with $VARIANT_ARGS})."
  echo
  echo "Mean ± sample sd over the seeds; \"gap\" is the mean's distance to dense's mean."
  echo
  echo "| run | final test accuracy | gap | mean of epochs $((epochs - 2))-$epochs | gap | per seed (mean of $((epochs - 2))-$epochs) | train loss |"
  echo "| --- | ---: | ---: | ---: | ---: | --- | ---: |"
  for run in "${runs[@]}"; do
    read -r mode density algo tag <<<"$run"
    n=$(name "$mode" "$density" "$algo" "$tag")
    st=$(stats $(files "$out" "$n"))
    read -r fm fs <<<"$(meansd 1 <<<"$st")"
    read -r lm ls <<<"$(meansd 2 <<<"$st")"
    read -r tm ts <<<"$(meansd 3 <<<"$st")"
    per=$(awk '{ printf "%s%.2f", (NR > 1 ? ", " : ""), $2 }' <<<"$st")
    awk -v n="$n" -v fm="$fm" -v fs="$fs" -v lm="$lm" -v ls="$ls" -v df="$dfin" -v dl="$dlate" -v per="$per" -v tm="$tm" -v ts="$ts" 'BEGIN {
      printf "| %s | %.2f ± %.2f | %+.2f | %.2f ± %.2f | %+.2f | %s | %.3f ± %.3f |\n", n, fm, fs, fm - df, lm, ls, lm - dl, per, tm, ts }'
  done
} >"$out/summary.md"
cat "$out/summary.md"

# Mean accuracy per epoch over the seeds, one column per run, for the plot.
for run in "${runs[@]}"; do
  read -r mode density algo tag <<<"$run"
  n=$(name "$mode" "$density" "$algo" "$tag")
  awk -F, 'FNR > 1 { s[$1] += 100 * $5; c[$1]++ } END { for (e in s) printf "%d %.4f\n", e, s[e] / c[e] }' \
    $(files "$out" "$n") | sort -n >"$out/$n.mean"
done
plot="set terminal pngcairo size 900,560; set output '$out/accuracy.png';"
plot+="set title 'Fashion-MNIST, $ranks ranks: mean test accuracy per epoch over seeds ${seeds[*]}';"
plot+="set xlabel 'epoch'; set ylabel 'test accuracy (%)'; set key bottom right; set grid; plot "
for run in "${runs[@]}"; do
  read -r mode density algo tag <<<"$run"
  n=$(name "$mode" "$density" "$algo" "$tag")
  label="dense"; [ "$mode" = dense ] || label="$algo${tag:+ $tag} $density"
  plot+="'$out/$n.mean' using 1:2 with linespoints title '$label',"
done
gnuplot -e "${plot%,}"
rm -f "$out"/*.mean
echo "wrote $out/summary.md and $out/accuracy.png"
