#!/usr/bin/env bash
# Time per epoch side by side: the CNN for 2 epochs (OnebitAdam's warm-up is
# 15% of 468 steps = 70, so epoch 2 is all compression stage), seed 1, each
# optimizer once on shared memory and once over 1 Gbit/s links
# (bench/netem, root), alternating, on an otherwise idle machine.
#   bash bench/results/2026-11-29-onebit-adam-seeds/timing.sh   (from the repository root)
set -uo pipefail
out=bench/results/2026-11-29-onebit-adam-seeds/timing
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LIBDCT_LIBRARY=$PWD/build/src/libdct.so \
  PYTHONPATH=$PWD/python MASTER_PORT=${MASTER_PORT:-29790}
declare -A optimizers=([adam]="--optimizer adam --hook allreduce" [onebit-adam]="--optimizer onebit_adam"
                       [adam-onebit-gradients]="--optimizer adam --hook onebit")
for opt in adam onebit-adam adam-onebit-gradients; do
  args="--task fashion --epochs 2 --batch 64 ${optimizers[$opt]} --eps 1e-4 --lr 0.001 --seed 1"
  # shellcheck disable=SC2086
  mpirun --oversubscribe -np 4 -x LIBDCT_LIBRARY -x PYTHONPATH -x MASTER_PORT /usr/bin/python3 \
    examples/torch_ddp/train.py $args --out "$out/cnn-$opt-shm.json" 2>&1 | grep --line-buffered -v "return func" \
    | tee "$out/cnn-$opt-shm.log"
  # shellcheck disable=SC2086
  bash bench/netem/run.sh -np 4 --rate 1gbit --timeout 1800 --stats -- \
    env LIBDCT_LIBRARY="$LIBDCT_LIBRARY" PYTHONPATH="$PYTHONPATH" GLOO_SOCKET_IFNAME=data \
    MASTER_ADDR=10.213.78.1 MASTER_PORT="$MASTER_PORT" /usr/bin/python3 examples/torch_ddp/train.py $args \
    --out "$out/cnn-$opt-netem.json" 2>&1 | grep --line-buffered -v "return func" | tee "$out/cnn-$opt-netem.log"
done
