#!/usr/bin/env bash
# test_hook_checkpoint.py's three phases, each in fresh processes:
#   checkpoint_roundtrip.sh NP MPIEXEC PYTHON [mpiexec args...]
set -euo pipefail
np=$1 mpiexec=$2 python=$3
shift 3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
here=$(cd "$(dirname "$0")" && pwd)
for phase in full save resume; do
  "$mpiexec" -n "$np" "$@" "$python" "$here/test_hook_checkpoint.py" --phase "$phase" "$dir"
done
