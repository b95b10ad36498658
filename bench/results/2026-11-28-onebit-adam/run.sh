#!/usr/bin/env bash
# The runs of README.md: examples/torch_ddp/train.py at 4 ranks, 3 epochs,
# seed 1, Adam's lr 1e-3 with the example's cosine decay, one per line.
#   bash bench/results/2026-11-28-onebit-adam/run.sh   (from the repository root, after building build/)
set -euo pipefail
here=bench/results/2026-11-28-onebit-adam
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LIBDCT_LIBRARY=$PWD/build/src/libdct.so \
  PYTHONPATH=$PWD/python MASTER_PORT=${MASTER_PORT:-29790}
run() {
  name=$1; shift
  mpirun --oversubscribe -np 4 -x LIBDCT_LIBRARY -x PYTHONPATH -x MASTER_PORT /usr/bin/python3 \
    examples/torch_ddp/train.py --epochs 3 --seed 1 --lr 0.001 --out "$here/$name.json" "$@" 2>&1 \
    | grep -v "return func" | tee "$here/$name.log"
}
run adam --optimizer adam --hook allreduce
run adam-eps1e-4 --optimizer adam --hook allreduce --eps 1e-4
# The first runs had one 1-bit scale for the flat buffer (--one-scale since per-tensor scales are the default).
run onebit-adam --optimizer onebit_adam --eps 1e-4 --one-scale
run onebit-adam-preconditioned --optimizer onebit_adam --eps 1e-4 --exchange preconditioned --one-scale
run adam-onebit-gradients --optimizer adam --hook onebit
run onebit-adam-eps1e-8 --optimizer onebit_adam --one-scale
# Per-tensor scales (dctCompressorSetSegments) against one scale, the same code otherwise.
run onebit-adam-per-tensor --optimizer onebit_adam --eps 1e-4
run onebit-adam-one-scale --optimizer onebit_adam --eps 1e-4 --one-scale
