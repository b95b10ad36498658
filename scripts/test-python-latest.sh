#!/usr/bin/env bash
# The Python package's tests on the current PyTorch from the package index
# (CI keeps Debian's python3-torch 1.13): a venv with the newest torch and
# numpy, the package pip-installed into it from the checkout (the wheel, with
# the libdct.so it builds), every tests/python test under mpirun at 1-4 ranks
# against the installed package.
#   bash scripts/test-python-latest.sh [VENV]      (default: build/venv-latest)
set -euo pipefail
source "$(dirname "$0")/setup.sh"
venv="${1:-$DCT_ROOT/build/venv-latest}"
unset LIBDCT_LIBRARY
# Debian's mpi4py (built for its Open MPI) shows through; torch and numpy come from the index.
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$venv"
"$venv/bin/pip" install -q --upgrade torch numpy
"$venv/bin/pip" install -q "$DCT_ROOT"
"$venv/bin/python" -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__)'
cd "$DCT_ROOT/tests/python"
export PYTHONPATH=. MASTER_PORT=29900  # the tests' harness; libdct is the installed one
for np in 1 2 3 4; do
  for t in test_comm test_hook test_hook_groups test_hook_lifecycle test_hook_mass test_fixed_capacity test_onebit_adam \
           test_library_agree; do
    echo "== $t at $np ranks"
    timeout 600 mpirun -n "$np" --oversubscribe -x PYTHONPATH -x MASTER_PORT \
      "$venv/bin/python" "$t.py" | tail -1
  done
  echo "== test_hook_checkpoint at $np ranks"
  timeout 600 bash checkpoint_roundtrip.sh "$np" mpirun "$venv/bin/python" --oversubscribe -x PYTHONPATH -x MASTER_PORT
  echo "== test_onebit_adam_checkpoint at $np ranks"
  CHECKPOINT_SCRIPT=test_onebit_adam_checkpoint.py timeout 600 bash checkpoint_roundtrip.sh "$np" mpirun \
    "$venv/bin/python" --oversubscribe -x PYTHONPATH -x MASTER_PORT
done
timeout 600 "$venv/bin/python" test_hook.py --spawn 2 | tail -1
echo "python tests passed on torch $("$venv/bin/python" -c 'import torch; print(torch.__version__)')"
