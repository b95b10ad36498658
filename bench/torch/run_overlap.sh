#!/usr/bin/env bash
# overlap.py for dct_hook (1%) and allreduce_hook at 2 and 4 ranks, on shared
# memory and on 1 Gbit/s shaped links (bench/netem); one line per run.
# Usage: bench/torch/run_overlap.sh <libdct.so> [steps]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
lib="$1" steps="${2:-30}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
env=(LIBDCT_LIBRARY="$lib" PYTHONPATH="$root/python" MASTER_PORT=29761)
for np in 2 4; do
  for hook in dct allreduce; do
    args=(/usr/bin/python3 "$root/bench/torch/overlap.py" --hook "$hook" --steps "$steps")
    echo -n "shm   "
    env "${env[@]}" mpirun -np "$np" --oversubscribe "${args[@]}" | tail -1
    echo -n "1gbit "
    # Rank 0's address on the shaped subnet; gloo must use that interface.
    "$root/bench/netem/run.sh" -np "$np" --rate 1gbit -- \
      env "${env[@]}" MASTER_ADDR=10.213.77.1 GLOO_SOCKET_IFNAME=data "${args[@]}" | tail -1
  done
done
