#!/usr/bin/env bash
# Interleaved A/B of the hook's host time a bucket (bench/hook_floor.py) between
# two copies of the Python package: run.sh OLD_SITE NEW_SITE [reps] > log
# (each SITE holds a libdct/ package with its libdct.so, as build/tests/python/site).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
old="$1" new="$2" reps="${3:-3}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LIBDCT_LIBRARY= MASTER_ADDR=127.0.0.1
floor="$here/../../hook_floor.py"
run() {  # run SITE NP [args]
  PYTHONPATH="$1" mpirun --oversubscribe -np "$2" -x LIBDCT_LIBRARY -x PYTHONPATH -x MASTER_ADDR \
    -x MASTER_PORT=$((29600 + RANDOM % 300)) /usr/bin/python3 "$floor" "${@:3}"
}
for rep in $(seq "$reps"); do
  for np in 1 2 3 4; do
    for v in old new; do
      site=$old; [ $v = new ] && site=$new
      echo "[$v np$np rep$rep] $(run "$site" "$np" | head -1)"
    done
  done
done
for v in old new; do
  site=$old; [ $v = new ] && site=$new
  echo "[$v np2 phases]"; run "$site" 2 --phases
done
