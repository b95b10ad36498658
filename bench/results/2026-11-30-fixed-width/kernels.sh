#!/usr/bin/env bash
# Interleaved A/B of two kernel_perf builds (before / after), one worker
# thread, 2M fp32, densities 0.001-0.3, two rounds; writes kernels.txt
# (raw rows, prefixed "base|head density round"), then kernels.md and
# kernels.png through summarize.py and kernels.gp.
#   kernels.sh <before/kernel_perf> <after/kernel_perf>
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
[ $# -eq 2 ] || { sed -n 2,7p "$0"; exit 2; }
for rep in 1 2; do for D in 0.001 0.01 0.1 0.3; do for v in base head; do
  if [ "$v" = base ]; then K="$1"; else K="$2"; fi
  "$K" -b 2M -e 2M -D "$D" -t 1 -n 7 2>&1 | grep -E '^ +2097152' | sed "s/^/$v $D $rep /"
done; done; done > "$HERE/kernels.txt"
python3 "$HERE/summarize.py" "$HERE/kernels.txt" > "$HERE/kernels.md"
(cd "$HERE" && gnuplot kernels.gp)
