#!/usr/bin/env bash
# The Python package's tests on the current PyTorch from the package index
# (CI keeps Debian's python3-torch 1.13): a venv with the newest torch and
# numpy, the package pip-installed into it, every tests/python test under
# mpirun at 1-4 ranks against the library built by scripts/test.sh (build/).
#   bash scripts/test-python-latest.sh [VENV]      (default: build/venv-latest)
set -euo pipefail
source "$(dirname "$0")/setup.sh"
venv="${1:-$DCT_ROOT/build/venv-latest}"
lib="$DCT_ROOT/build/src/libdct.so"
[ -e "$lib" ] || { echo "build the library first (bash scripts/test.sh, or cmake --preset default && cmake --build build)"; exit 2; }
# Debian's mpi4py (built for its Open MPI) shows through; torch and numpy come from the index.
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$venv"
"$venv/bin/pip" install -q --upgrade torch numpy
"$venv/bin/pip" install -q "$DCT_ROOT/python"
"$venv/bin/python" -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__)'
cd "$DCT_ROOT/tests/python"
export LIBDCT_LIBRARY="$lib" PYTHONPATH=. MASTER_PORT=29900
for np in 1 2 3 4; do
  for t in test_comm test_hook test_hook_groups test_hook_lifecycle test_hook_mass test_fixed_capacity test_onebit_adam; do
    echo "== $t at $np ranks"
    timeout 600 mpirun -n "$np" --oversubscribe -x LIBDCT_LIBRARY -x PYTHONPATH -x MASTER_PORT \
      "$venv/bin/python" "$t.py" | tail -1
  done
  echo "== test_hook_checkpoint at $np ranks"
  timeout 600 bash checkpoint_roundtrip.sh "$np" mpirun "$venv/bin/python" --oversubscribe \
    -x LIBDCT_LIBRARY -x PYTHONPATH -x MASTER_PORT
  echo "== test_onebit_adam_checkpoint at $np ranks"
  CHECKPOINT_SCRIPT=test_onebit_adam_checkpoint.py timeout 600 bash checkpoint_roundtrip.sh "$np" mpirun \
    "$venv/bin/python" --oversubscribe -x LIBDCT_LIBRARY -x PYTHONPATH -x MASTER_PORT
done
timeout 600 "$venv/bin/python" test_hook.py --spawn 2 | tail -1
echo "python tests passed on torch $("$venv/bin/python" -c 'import torch; print(torch.__version__)')"
