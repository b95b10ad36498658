#!/usr/bin/env bash
# Time per step of the DLRM example at 4 ranks on 1 Gbit/s shaped links
# (bench/netem/run.sh; root), for the exchanges that differ in bytes: table
# sharding's dense all-to-all and DCT-MP, row sharding's dense reduce-scatter
# and DES, each with dense and DCT-DP gradient sync. One epoch each (the
# shared-memory runs of run_all.sh give the accuracy); a markdown table of
# the last epoch's RESULT line.
#   examples/dlrm_hybrid/run_netem.sh [BUILD_DIR] [OUT_DIR]
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BUILD="$(cd "${1:-$ROOT/build}" && pwd)"
OUT="${2:-$HERE/results}"
BIN="$BUILD/examples/dlrm_hybrid/dlrm_hybrid"
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967296
RUNS=(
  "dense|--mode dense"
  "mp-0.05|--mode mp --mp-density 0.05"
  "mpdp-0.05-0.01|--mode mpdp --mp-density 0.05 --dp-density 0.01"
  "row-dense|--mode dense --sharding row"
  "row-des|--mode mp --sharding row"
  "row-des-0.05|--mode mp --sharding row --mp-density 0.05"
  "row-des-dp-0.01|--mode mpdp --sharding row --dp-density 0.01"
)
for run in "${RUNS[@]}"; do
  tag="${run%%|*}"
  # shellcheck disable=SC2086
  "$ROOT/bench/netem/run.sh" -np 4 --rate 1gbit -- "$BIN" ${run#*|} --epochs 1 --no-eval-full --tag "$tag" \
    ${DLRM_FLAGS:-} > "$OUT/netem-$tag.np4.log" 2>&1 || { tail -5 "$OUT/netem-$tag.np4.log" >&2; exit 1; }
  echo "$tag: $(grep -c '^RESULT' "$OUT/netem-$tag.np4.log") epoch(s)"
done
{
  echo "| run (4 ranks, 1 Gbit/s) | held-out AUC after 1 epoch | MP fwd + bwd bytes/step | DP bytes/step | ms/step | MP ms | DP ms |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
  for run in "${RUNS[@]}"; do
    tag="${run%%|*}"
    grep '^RESULT' "$OUT/netem-$tag.np4.log" | tail -1 | awk -v tag="$tag" '{
      for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
      printf "| %s | %.4f | %.0f + %.0f | %.0f | %.1f | %.1f | %.1f |\n", tag, v["auc"], v["mp_fwd_bytes"],
             v["mp_bwd_bytes"], v["dp_bytes"], v["step_ms"], v["mp_ms"], v["dp_ms"] }'
  done
} > "$OUT/netem.md"
cat "$OUT/netem.md"
