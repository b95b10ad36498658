#!/usr/bin/env bash
# Stop and resume, bit for bit: the same run three times at 4 ranks over
# shared memory, 300 steps (into the second epoch): once uninterrupted, once
# stopped after --stop-at steps with a checkpoint (model, optimizer, LR
# schedule and DctState.state_dict() per rank), once resumed from it in fresh
# processes. The two finished runs must end with the same parameter bits
# (their sha256 in results/checkpoint/*.json). For each hook given:
#   examples/torch_ddp/run_checkpoint.sh ["--hook dct --density 0.01 --algorithm allgather" ...]
# (auto is left out on purpose: it picks plans by timing, so no two runs of
# it, interrupted or not, need end with the same bits.)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
export LIBDCT_LIBRARY="${LIBDCT_LIBRARY:-$root/build/src/libdct.so}"
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$root/python"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export MASTER_PORT="${MASTER_PORT:-29570}"
ranks="${RANKS:-4}" steps="${STEPS:-300}" stop="${STOP_AT:-150}"
out="$here/results/checkpoint"
mkdir -p "$out"
[ $# -gt 0 ] || set -- "--hook dct --density 0.01 --algorithm allgather" "--hook onebit"
status=0
for hook in "$@"; do
  name=$(echo "$hook" | sed 's/--hook //; s/--density /d/; s/--algorithm //; s/--momentum-correction/mc/; s/ /-/g')
  run() { mpirun -n "$ranks" --oversubscribe -x LIBDCT_LIBRARY -x PYTHONPATH -x MASTER_PORT /usr/bin/python3 "$here/train.py" \
            $hook --max-steps "$steps" "$@"; }
  ckpt=$(mktemp -d)
  run --out "$out/$name-uninterrupted.json" | tee "$out/$name-uninterrupted.log"
  run --stop-at "$stop" --checkpoint "$ckpt/c" | tee "$out/$name-stopped.log"
  run --resume --checkpoint "$ckpt/c" --out "$out/$name-resumed.json" | tee "$out/$name-resumed.log"
  rm -rf "$ckpt"
  a=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['parameters_sha256'])" "$out/$name-uninterrupted.json")
  b=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['parameters_sha256'])" "$out/$name-resumed.json")
  if [ "$a" = "$b" ]; then echo "$name: resumed at step $stop of $steps, same bits ($a)"
  else echo "$name: DIFFERENT: uninterrupted $a, resumed $b"; status=1; fi
done
exit $status
