#!/usr/bin/env bash
# The runs of README.md: examples/torch_ddp/train.py at 4 ranks over gloo,
# three seeds each of Adam, OnebitAdam and Adam with 1-bit-compressed
# gradients, on the Fashion-MNIST CNN (3 epochs) and the byte-level
# transformer LM (300 steps, half an epoch: what the shared cores allowed),
# eps 1e-4 and lr 1e-3 with cosine decay for all.
#   bash bench/results/2026-11-29-onebit-adam-seeds/run.sh        (from the repository root, after building build/)
# A run whose JSON exists is skipped. TASKS and OPTS select runs, e.g.
#   TASKS=lm OPTS=onebit-adam-preconditioned bash .../run.sh
# (onebit-adam-freeze30: the LM's warm-up at 30% of its 300 steps)
set -uo pipefail
here=bench/results/2026-11-29-onebit-adam-seeds
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LIBDCT_LIBRARY=$PWD/build/src/libdct.so \
  PYTHONPATH=$PWD/python MASTER_PORT=${MASTER_PORT:-29790}
declare -A optimizers=([adam]="--optimizer adam --hook allreduce" [onebit-adam]="--optimizer onebit_adam"
                       [adam-onebit-gradients]="--optimizer adam --hook onebit"
                       [onebit-adam-preconditioned]="--optimizer onebit_adam --exchange preconditioned"
                       [onebit-adam-freeze30]="--optimizer onebit_adam --freeze-step 90")
declare -A tasks=([cnn]="--task fashion --epochs 3 --batch 64" [lm]="--task charlm --epochs 1 --max-steps 300 --batch 16")
run() {  # task optimizer seed out-dir [launcher...]
  local task=$1 opt=$2 seed=$3 out=$4; shift 4
  local name="$out/$task-$opt-seed$seed"
  [ -e "$name.json" ] && return 0
  # shellcheck disable=SC2086
  "$@" /usr/bin/python3 examples/torch_ddp/train.py ${tasks[$task]} ${optimizers[$opt]} --eps 1e-4 --lr 0.001 \
    --seed "$seed" --out "$name.json" 2>&1 | grep --line-buffered -v "return func" | tee "$name.log"
}
for task in ${TASKS:-cnn lm}; do for seed in 1 2 3; do for opt in ${OPTS:-adam onebit-adam adam-onebit-gradients}; do
  run "$task" "$opt" "$seed" "$here" mpirun --oversubscribe -np 4 -x LIBDCT_LIBRARY -x PYTHONPATH -x MASTER_PORT
done; done; done
