#!/usr/bin/env bash
# Issue 38, end to end: the DCT-MP all-to-all (dct_perf -C alltoall, 16 MiB,
# D = 64, 5%, 4 ranks) on shared memory and on 1 Gbit/s shaped links, the
# row kernels alone (kernel_perf), and the DLRM example's mp-0.05 run,
# before (BEFORE build: 5d6f17c, the first parent of the rowsel-simd merge
# 6cff58a) and after (AFTER build: main), interleaved rep by rep with the
# order alternating. Every timed command holds /tmp/dct_timing.lock (the
# 2-core machine is shared); nothing is built under it.
#
#   bench/results/2026-11-26-mp-line-rate/collect.sh BEFORE_BUILD AFTER_BUILD [PARTS]
#     PARTS (default "a2a kernel dlrm"); REPS=5 ITERS=7 WARMUPS=3 DLRM_REPS=5
#     DLRM_DENSE=1 adds the dense DLRM run (after build only) to every rep
#
# The all-to-all commands are collect_alltoall.sh's (same env, same flags,
# ROWLENGTHS=64 DENSITIES=0.05 SIZES="-b 16M -e 16M"), with phase_shim.so
# preloaded through a wrapper (phase timings, see phase_shim.c) in every run
# of both builds. Raw output: raw/<part>/...; summary.py makes the tables.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
BEFORE="$(cd "$1" && pwd)" AFTER="$(cd "$2" && pwd)"
PARTS=${3:-a2a kernel dlrm}
REPS=${REPS:-5} ITERS=${ITERS:-7} WARMUPS=${WARMUPS:-3} DLRM_REPS=${DLRM_REPS:-5}
LOCK=/tmp/dct_timing.lock
RAW="$HERE/raw"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967296
export OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_alltoallv_algorithm=1

# The shim and its wrapper (run.sh forwards only DCT_* and GLIBC_TUNABLES, so
# LD_PRELOAD is set by a wrapper that runs inside each rank's namespace).
TMP=$(mktemp -d /tmp/mpline.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
mpicc -O2 -shared -fPIC -o "$TMP/phase_shim.so" "$HERE/phase_shim.c" -ldl
cat > "$TMP/wrap.sh" <<EOF
#!/bin/sh
export MP_PHASE_DIR="\$1" LD_PRELOAD="$TMP/phase_shim.so"
shift
exec "\$@"
EOF
chmod +x "$TMP/wrap.sh"

build_of() { if [[ $1 == before ]]; then echo "$BEFORE"; else echo "$AFTER"; fi; }
order() { if (($1 % 2)); then echo "before after"; else echo "after before"; fi; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
mkdir -p "$RAW"
{
  echo "started $(date -u +%FT%TZ) load $(load)"
  echo "before: $BEFORE ($(git -C "$BEFORE/.." rev-parse --short HEAD)); after: $AFTER ($(git -C "$AFTER/.." rev-parse --short HEAD))"
  echo "host $(hostname -s), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(mpirun --version | head -1)"
} >> "$RAW/session.txt"

A2A=(-C alltoall -b 16M -e 16M -R 64 -D 0.05 -W fp32 -n "$ITERS" -w "$WARMUPS")
a2a_run() {  # net build rep
  local net=$1 b=$2 r=$3 dir="$RAW/a2a/$1/$2/r$3" perf
  perf="$(build_of "$b")/bench/dct_perf"
  rm -rf "$dir" && mkdir -p "$dir"
  echo "load before: $(load)" > "$dir/load.txt"
  if [[ $net == shm ]]; then
    flock "$LOCK" timeout 900 mpirun -np 4 --oversubscribe -x GLIBC_TUNABLES \
      "$TMP/wrap.sh" "$dir" "$perf" "${A2A[@]}" -J "$dir/row.json" > "$dir/dct_perf.log" 2>&1
  else
    flock "$LOCK" timeout 1800 "$ROOT/bench/netem/run.sh" -np 4 --rate 1gbit --timeout 1700 -- \
      "$TMP/wrap.sh" "$dir" "$perf" "${A2A[@]}" -J "$dir/row.json" > "$dir/dct_perf.log" 2>&1
  fi
  python3 "$HERE/phases.py" "$dir" "$WARMUPS" "$ITERS" > "$dir/phases.json"
  echo "a2a $net $b r$r: $(grep -E '^ +[0-9]+ ' "$dir/dct_perf.log" | head -1)"
}

for part in $PARTS; do
  case $part in
    a2a)
      for ((r = 1; r <= REPS; r++)); do
        for net in shm netem; do
          for b in $(order "$r"); do a2a_run "$net" "$b" "$r"; done
        done
      done ;;
    kernel)  # per-rank size: 16 MiB = 4M fp32 elements; 1 thread and both cores
      mkdir -p "$RAW/kernel"
      for t in 1 2; do
        for b in $(order "$t"); do
          flock "$LOCK" "$(build_of "$b")/bench/kernel_perf" -b 4M -e 4M -L 64 -K 0.05 -t "$t" -n 10 \
            > "$RAW/kernel/$b-t$t.log" 2>&1
          echo "kernel $b t$t: $(grep -E 'row-select|memcpy' "$RAW/kernel/$b-t$t.log" | tr -s ' ' | paste -sd';')"
        done
      done ;;
    dlrm)  # examples/dlrm_hybrid/run_all.sh's mp-0.05 run at 4 ranks, and its dense run (after only)
      mkdir -p "$RAW/dlrm"
      for ((r = 1; r <= DLRM_REPS; r++)); do
        for b in $(order "$r") ${DLRM_DENSE:+dense}; do
          tag=mp-0.05 flags=(--mode mp --mp-density 0.05) bin="$(build_of "$b")"
          if [[ $b == dense ]]; then tag=dense flags=(--mode dense) bin="$AFTER"; fi
          log="$RAW/dlrm/$b-r$r.log" pdir="$RAW/dlrm/phases-$b-r$r"
          rm -rf "$pdir" && mkdir -p "$pdir"
          { echo "# mpirun -np 4 --oversubscribe $bin/examples/dlrm_hybrid/dlrm_hybrid ${flags[*]} --tag $tag"
            echo "# GLIBC_TUNABLES=$GLIBC_TUNABLES load $(load)"; } > "$log"
          # run_all.sh's environment: Open MPI's own alltoallv choice
          flock "$LOCK" env -u OMPI_MCA_coll_tuned_use_dynamic_rules -u OMPI_MCA_coll_tuned_alltoallv_algorithm \
            mpirun -np 4 --oversubscribe "$TMP/wrap.sh" "$pdir" "$bin/examples/dlrm_hybrid/dlrm_hybrid" "${flags[@]}" \
            --tag "$tag" < /dev/null >> "$log" 2>&1
          # epoch 1 (200 steps) skipped; eval forwards are among the F records
          [[ $b == dense ]] || python3 "$HERE/phases.py" "$pdir" 200 100000 > "$pdir/phases.json"
          echo "dlrm $b r$r: $(grep '^RESULT' "$log" | tail -1 | grep -o 'step_ms=[0-9.]* mp_ms=[0-9.]*')"
        done
      done ;;
  esac
done
echo "ended $(date -u +%FT%TZ) load $(load)" >> "$RAW/session.txt"
