#!/bin/bash
# One run of examples/torch_ddp/train.py at 4 ranks on shared memory with
# libdct's hook, 1% density, under the machine's timing lock.
#   run.sh <label> <libdct.so> <algorithm> <epochs> [extra train.py args...]
# PY_ROOT (default: the repository root) holds python/ and
# examples/torch_ddp/train.py. Rank 0 logs with DCT_DEBUG=TRACE to
# raw/<label>.trace.gz (every step's algorithm and auto's decisions; ranks
# plan alike, so one rank's trace is every rank's plan).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
label=$1 lib=$2 algorithm=$3 epochs=$4
shift 4
py=${PY_ROOT:-$root}
out=$here/raw
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
wrap=$(mktemp)
cat > "$wrap" <<WRAP
#!/bin/bash
if [ "\$OMPI_COMM_WORLD_RANK" = 0 ]; then
  export DCT_DEBUG=TRACE
  exec "\$@" 2> "$out/$label.trace"
fi
exec "\$@"
WRAP
chmod +x "$wrap"
{
  echo "# $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg) lib: $lib ($(sha256sum "$lib" | cut -c1-12))"
  flock /tmp/dct_timing.lock mpirun --oversubscribe -np 4 -x LIBDCT_LIBRARY="$lib" -x PYTHONPATH="$py/python" \
    "$wrap" /usr/bin/python3 "$py/examples/torch_ddp/train.py" --hook dct --density 0.01 \
    --algorithm "$algorithm" --threads 1 --epochs "$epochs" --out "$out/$label.json" "$@"
  echo "# $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg)"
} 2>&1 | tee "$out/$label.log"
rm -f "$wrap"
gzip -f "$out/$label.trace"
