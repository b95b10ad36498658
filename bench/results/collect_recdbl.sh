#!/usr/bin/env bash
# Recursive doubling for the sparse-input allreduce (dct_perf -C coo, issue
# 51): 4 ranks, every plan side by side with auto, 1M and 16M fp32 at 0.1%,
# 1% and 10% on shared memory; with NETEM=1 also 16M at 0.1% and 1% on 1 Gbit/s
# shaped links (bench/netem/run.sh, needs root). Open MPI's rings forced for
# MPI_Allreduce and MPI_Allgatherv, as collect_coo.sh does. Writes shm.json /
# netem.json (dct_perf's JSON lines), *.log and tables.md.
#   bench/results/collect_recdbl.sh [build-dir] [out-dir]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="$(cd "${1:-$ROOT/build}" && pwd)"
OUT="${2:-$ROOT/bench/results/$(date +%Y-%m-%d)-recursive-doubling}"
PERF="$BUILD/bench/dct_perf"
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967296
RING=(OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_allreduce_algorithm=4
      OMPI_MCA_coll_tuned_allgatherv_algorithm=3)
ITERS=(-n "${N:-9}" -w 3)
PLANS="${PLANS:-auto allgather split dense recursivedoubling}"
shm() { env "${RING[@]}" timeout 900 mpirun -np 4 --oversubscribe -x GLIBC_TUNABLES "$PERF" -C coo "${ITERS[@]}" "$@"; }
netem() { env "${RING[@]}" timeout 1800 "$ROOT/bench/netem/run.sh" -np 4 --rate 1gbit --timeout 1700 -- "$PERF" -C coo -l 1 "${ITERS[@]}" "$@"; }
if [ "${SHM:-1}" = 1 ]; then
  rm -f "$OUT/shm.json" "$OUT/shm.log"
  for bytes in 4M 64M; do
    for d in 0.001 0.01 0.1; do
      for a in $PLANS; do shm -b "$bytes" -e "$bytes" -D "$d" -a "$a" -J "$OUT/shm.json" | tee -a "$OUT/shm.log"; done
    done
  done
fi
if [ "${NETEM:-0}" = 1 ]; then
  rm -f "$OUT/netem.json" "$OUT/netem.log"
  for d in 0.001 0.01; do
    for a in $PLANS; do netem -b 64M -e 64M -D "$d" -a "$a" -J "$OUT/netem.json" | tee -a "$OUT/netem.log"; done
  done
fi
python3 - "$OUT" <<'PY' > "$OUT/tables.md"
import json, sys, os, collections
out = sys.argv[1]
for where in ("shm", "netem"):
    path = os.path.join(out, where + ".json")
    if not os.path.exists(path):
        continue
    rows = collections.OrderedDict()
    plans = []
    for line in open(path):
        r = json.loads(line)
        key = (r["count"], r["density"])
        a = r["algo_requested"]
        if a not in plans:
            plans.append(a)
        rows.setdefault(key, {})[a] = r
    print(f"## {where}: dct_us (median of the per-iteration max over ranks), ms; auto's plan in brackets\n")
    print("| count | density | " + " | ".join(plans) + " | dense MPI_Allreduce | wire bytes (rec. doubling / allgather) |")
    print("|---:|---:|" + "---:|" * (len(plans) + 2))
    for (count, d), by in rows.items():
        cells = []
        for a in plans:
            r = by.get(a)
            cells.append("" if r is None else f"{r['dct_us']/1e3:.2f}" + (f" ({r['algo']})" if a == "auto" else ""))
        dense = [r["dense_us"] for r in by.values()]
        dense.sort()
        rd, ag = by.get("recursivedoubling"), by.get("allgather")
        wire = f"{rd['wire_bytes']/1e3:.0f} KB / {ag['wire_bytes']/1e3:.0f} KB" if rd and ag else ""
        print(f"| {count} | {d*100:g}% | " + " | ".join(cells) + f" | {dense[len(dense)//2]/1e3:.2f} | {wire} |")
    print()
PY
echo "results in $OUT"
