#!/usr/bin/env bash
# The sweep behind README.md: every hook trains 10 epochs at 4 ranks over
# shared memory (accuracy, bytes, time per epoch), then 3 epochs at 4 ranks
# over 1 Gbit/s links shaped by bench/netem (time per epoch); writes
# results/<run>.{json,csv,log}, results/netem/<run>.*, results/summary.md and
# results/accuracy.png.
#
# Usage: examples/torch_ddp/run_all.sh          (needs root for bench/netem)
#   LIBDCT_LIBRARY  libdct.so to load (default: build/src/libdct.so); PYTHONPATH
#                   ahead of python/ (another copy of the libdct package)
#   RANKS=4 EPOCHS=10 NETEM_EPOCHS=3 RATE=1gbit
#   ONLY="allreduce dct-0.01"   a subset of the runs
#   SKIP_SHM=1 / SKIP_NETEM=1   one half only; REPORT_ONLY=1: table and plot from the files there
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
export LIBDCT_LIBRARY="${LIBDCT_LIBRARY:-$root/build/src/libdct.so}"
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$root/python"  # a PYTHONPATH of yours comes first
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
py=/usr/bin/python3   # Debian's, with torch; the pyenv python3 on PATH has none
ranks="${RANKS:-4}" epochs="${EPOCHS:-10}" netem_epochs="${NETEM_EPOCHS:-3}" rate="${RATE:-1gbit}"
out="$here/results"
mkdir -p "$out/netem"

# One epoch is 60000 / (64 x 4) = 234 steps. The dense starts are that one
# epoch (10% of the 10-epoch run), for PowerSGD (its documentation's
# suggested starting point, 10% of training) and for libdct's *-warm runs
# alike, given explicitly so the short netem runs keep the same start.
warm=$((60000 / (64 * ranks)))
# libdct runs its allgather exchange: "auto" also runs dense steps here,
# which would hide the traffic under comparison (see README.md).
declare -A runs=(
  [allreduce]="--hook allreduce"
  [fp16]="--hook fp16"
  [powersgd-r1]="--hook powersgd --rank-approx 1 --start-powersgd-iter $warm"
  [powersgd-r4]="--hook powersgd --rank-approx 4 --start-powersgd-iter $warm"
  [dct-0.01]="--hook dct --density 0.01 --algorithm allgather"
  [dct-0.01-warm]="--hook dct --density 0.01 --algorithm allgather --start-iter $warm"
  [dct-0.01-fp16]="--hook dct --density 0.01 --algorithm allgather --wire-type fp16"
  [dct-0.001]="--hook dct --density 0.001 --algorithm allgather"
  [dct-0.001-warm]="--hook dct --density 0.001 --algorithm allgather --start-iter $warm"
  [onebit]="--hook onebit"
  [onebit-tensors]="--hook onebit --per-tensor-buckets"  # DDP's buckets per tensor (the hook's compressors are already)
)
order=(allreduce fp16 powersgd-r1 powersgd-r4 dct-0.01 dct-0.01-warm dct-0.01-fp16 dct-0.001 dct-0.001-warm onebit
       onebit-tensors)
read -r -a selected <<<"${ONLY:-${order[*]}}"

if [ "${REPORT_ONLY:-0}" != 1 ]; then
  started=$(date +%s)
  rm -f "$out/failures.txt"
  [ "${SKIP_SHM:-0}" = 1 ] || for name in "${selected[@]}"; do
    echo "== shm $name: ${runs[$name]}"
    # shellcheck disable=SC2086  # the run's flags split on purpose
    mpirun --oversubscribe -np "$ranks" -x LIBDCT_LIBRARY -x PYTHONPATH -x MASTER_PORT=29617 \
      $py "$here/train.py" ${runs[$name]} --epochs "$epochs" --out "$out/$name.json" 2>&1 | tee "$out/$name.log" ||
      echo "FAILED: shm $name" | tee -a "$out/failures.txt"
  done
  # bench/netem/run.sh forwards only DCT_* to mpirun -x, so the rest goes
  # through env. Its ranks live in network namespaces: gloo must bind the
  # shaped "data" link, and rank 0's store listens on its unshaped
  # management address (10.213.78.1, bench/netem/README.md).
  [ "${SKIP_NETEM:-0}" = 1 ] || for name in "${selected[@]}"; do
    echo "== netem $rate $name: ${runs[$name]}"
    # shellcheck disable=SC2086
    bash "$root/bench/netem/run.sh" -np "$ranks" --rate "$rate" --timeout 900 --stats -- \
      env LIBDCT_LIBRARY="$LIBDCT_LIBRARY" PYTHONPATH="$PYTHONPATH" GLOO_SOCKET_IFNAME=data \
      MASTER_ADDR=10.213.78.1 MASTER_PORT=29617 \
      $py "$here/train.py" ${runs[$name]} --epochs "$netem_epochs" --out "$out/netem/$name.json" 2>&1 |
      tee "$out/netem/$name.log" || echo "FAILED: netem $name" | tee -a "$out/failures.txt"
  done
  echo "sweep took $(($(date +%s) - started)) s"
fi

# The table: accuracy and bytes from the shared-memory runs; time per epoch
# from both: the mean of epochs 2.., after any one-epoch dense start.
$py - "$out" "$ranks" "$(nproc)" "$rate" "${order[@]}" >"$out/summary.md" <<'EOF'
import json, os, sys
out, ranks, cores, rate, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
def load(path):
    return json.load(open(path)) if os.path.exists(path) else None
dense = load(f"{out}/allreduce.json")
print(f"{ranks} ranks sharing {cores} cores; batch 64 per rank; SGD lr 0.05, momentum 0.9, cosine decay; seed 1.\n")
print(f"| run | hook | test acc. (last epoch) | vs allreduce | bytes/step/rank (mean of run) | less than allreduce "
      f"| bytes/step/rank (last epoch) | less than allreduce | s/epoch shm (epochs 2..) | s/epoch {rate} (epochs 2..) |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for name in names:
    r, n = load(f"{out}/{name}.json"), load(f"{out}/netem/{name}.json")
    if r is None:
        continue
    e = r["epochs"]
    acc = e[-1]["test_accuracy"]
    gap = f"{100 * (acc - dense['epochs'][-1]['test_accuracy']):+.2f} pp" if dense else "-"
    mean_bytes = sum(x["bytes_per_step_per_rank"] * x["steps"] for x in e) / r["steps"]
    dense_step = r["dense_bytes_total"] / r["steps"]
    steady = lambda run: [x["seconds"] for x in run["epochs"][1:]] or [run["epochs"][0]["seconds"]]
    shm, net = steady(r), (f"{sum(steady(n)) / len(steady(n)):.1f}" if n else "-")
    hook = r["described"] + (f", wire {r['wire_type']}" if r.get("wire_type") and "wire" not in r["described"] else "")
    print(f"| {name} | {hook} | {100 * acc:.2f}% | {gap} | {mean_bytes / 1e3:.1f} KB | "
          f"{dense_step / mean_bytes:.1f}x | {e[-1]['bytes_per_step_per_rank'] / 1e3:.1f} KB | "
          f"{e[-1]['reduction_vs_allreduce']:.1f}x | {sum(shm) / len(shm):.1f} | {net} |")
EOF
cat "$out/summary.md"

# Zoomed on 80-92%: a run below that (1-bit from the first step diverges to
# chance) says so in the key instead of flattening every other curve. One
# colour per run; PowerSGD dashed, 1-bit dotted.
declare -A style=(
  [allreduce]="lc rgb 'black' lw 2" [fp16]="lc rgb '#888888'"
  [powersgd-r1]="lc rgb '#74a9cf' dt 2" [powersgd-r4]="lc rgb '#08519c' dt 2"
  [dct-0.01]="lc rgb '#e31a1c' lw 2" [dct-0.01-warm]="lc rgb '#fb9a99'" [dct-0.01-fp16]="lc rgb '#ff7f00'"
  [dct-0.001]="lc rgb '#33a02c'" [dct-0.001-warm]="lc rgb '#b2df8a'"
  [onebit]="lc rgb '#6a3d9a' dt 3" [onebit-tensors]="lc rgb '#b15928' dt 3"
)
plot="set datafile separator ','; set terminal pngcairo size 1100,620; set output '$out/accuracy.png';"
plot+="set title 'Fashion-MNIST CNN, DDP over gloo, $ranks ranks: test accuracy per epoch'; set xlabel 'epoch';"
plot+="set ylabel 'test accuracy (%)'; set yrange [80:92]; set key outside right Left reverse; set grid; plot "
for name in "${order[@]}"; do
  [ -f "$out/$name.csv" ] || continue
  last=$(tail -1 "$out/$name.csv" | cut -d, -f2)
  label="$name"
  awk -v a="$last" 'BEGIN {exit !(a < 0.8)}' && label+=" ($(awk -v a="$last" 'BEGIN {printf "%.0f", 100 * a}')%: off scale)"
  plot+="'$out/$name.csv' using 1:(\$2*100) with linespoints ${style[$name]:-} title '$label',"
done
gnuplot -e "${plot%,}"
echo "wrote $out/summary.md and $out/accuracy.png"
