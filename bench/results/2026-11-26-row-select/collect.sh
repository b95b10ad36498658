#!/bin/bash
# Before/after of the row-select kernel, interleaved: kernel_perf of the
# baseline build (BASE, the commit before the vector bodies) and of this
# branch (NEW), one thread and all threads, L = 64 and 256 at K = 5%,
# RUNS rounds, into raw/ (EXTRA: more kernel_perf flags; TAG: a name for
# such runs; THREADS: "1", "all" or both). Every run takes the machine's
# timing lock.
#   BASE=/path/to/base/build-cpu NEW=build-cpu bench/results/2026-11-26-row-select/collect.sh
#   RUNS=7 EXTRA="-b 16M -e 64M -f 4" TAG=large BASE=... collect.sh
set -eu
BASE=${BASE:?baseline build dir} NEW=${NEW:-build-cpu} RUNS=${RUNS:-3} EXTRA=${EXTRA:-} TAG=${TAG:-sweep} THREADS=${THREADS:-1 all}
OUT=$(dirname "$0")/raw
mkdir -p "$OUT"
for run in $(seq "$RUNS"); do
  for L in 64 256; do
    for threads in $THREADS; do
      t=$([ "$threads" = all ] && echo "" || echo "-t $threads")
      for side in base new; do
        bin=$([ "$side" = base ] && echo "$BASE" || echo "$NEW")/bench/kernel_perf
        flock /tmp/dct_timing.lock "$bin" -L "$L" -K 0.05 $t $EXTRA > "$OUT/$side.L$L.t$threads.$TAG$run.txt"
      done
    done
  done
done
