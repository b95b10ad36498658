#!/usr/bin/env bash
# A checkpoint test's three phases (full, save, resume), each in fresh processes:
#   [CHECKPOINT_SCRIPT=test_onebit_adam_checkpoint.py] checkpoint_roundtrip.sh NP MPIEXEC PYTHON [mpiexec args...]
# (default: test_hook_checkpoint.py)
set -euo pipefail
np=$1 mpiexec=$2 python=$3
shift 3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
here=$(cd "$(dirname "$0")" && pwd)
for phase in full save resume; do
  "$mpiexec" -n "$np" "$@" "$python" "$here/${CHECKPOINT_SCRIPT:-test_hook_checkpoint.py}" --phase "$phase" "$dir"
done
