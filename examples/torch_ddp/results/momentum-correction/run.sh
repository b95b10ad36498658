#!/usr/bin/env bash
# DctState(momentum=0.9) on the Fashion-MNIST CNN: 4 ranks, 10 epochs, global
# top-k at 1%, against allreduce and global top-k with SGD's own momentum.
# Writes <name>-s<seed>.{json,csv,log} here. Usage: run.sh (SEEDS="1 2 ...").
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../../.." && pwd)"
# pairwise: global top-k's exchange pinned, so a rerun repeats the bits (docs/design.md, "Run to run")
export LIBDCT_LIBRARY=$root/build/src/libdct.so PYTHONPATH=$root/python DCT_SPLIT_EXCHANGE=pairwise
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
gtopk="--hook dct --density 0.01 --algorithm globaltopk"
for seed in ${SEEDS:-1}; do
  for run in "allreduce|--hook allreduce" "gtopk|$gtopk" "gtopk-mc|$gtopk --momentum-correction" \
             "gtopk-mcnm|$gtopk --momentum-correction --momentum-masking 0"; do
    name=${run%%|*} args=${run#*|}
    mpirun --oversubscribe -np 4 -x LIBDCT_LIBRARY -x PYTHONPATH -x DCT_SPLIT_EXCHANGE -x MASTER_PORT=29777 \
      /usr/bin/python3 "$root/examples/torch_ddp/train.py" $args --seed "$seed" --out "$here/$name-s$seed.json" \
      > "$here/$name-s$seed.log" 2>&1
  done
done
