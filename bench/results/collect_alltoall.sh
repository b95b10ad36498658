#!/usr/bin/env bash
# DCT-MP sparse all-to-all (dct_perf -C alltoall): 4 ranks, fp32, on shared
# memory and on 1 Gbit/s shaped links (bench/netem), row lengths 64 and 256,
# densities 0.05 / 0.025 / 0.01, sizes 1M..64M bytes of send buffer per rank,
# values on the wire as fp32 (WIRES adds fp16 / bf16: dct_perf -W).
# Every configuration runs REPEATS times, each in its own process; the tables
# give the median of the per-run medians and the min-max over all timed
# iterations of all runs. Writes markdown, .dat, gnuplot PNGs and a README.md
# with the commands and the physical bound into bench/results/<date>-alltoall/.
#   bench/results/collect_alltoall.sh [build-dir]      (default: build)
# Environment knobs (defaults): REPEATS=3 ITERS=7 WARMUPS=3 NETS="shm netem"
#   ROWLENGTHS="64 256" DENSITIES="0.05 0.025 0.01" SIZES="-b 1M -e 64M -f 4"
#   WIRES="fp32" OUT=bench/results/<date>-alltoall
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="$(cd "${1:-$ROOT/build}" && pwd)"
PERF="$BUILD/bench/dct_perf"
OUT="${OUT:-$ROOT/bench/results/$(date +%Y-%m-%d)-alltoall}"
REPEATS=${REPEATS:-3} ITERS=${ITERS:-7} WARMUPS=${WARMUPS:-3}
NETS=${NETS:-shm netem}
ROWLENGTHS=${ROWLENGTHS:-64 256}
DENSITIES=${DENSITIES:-0.05 0.025 0.01}
SIZES=${SIZES:--b 1M -e 64M -f 4}
WIRES=${WIRES:-fp32}
RATE_BPS=1000000000  # what netem() below shapes to
[[ -x $PERF ]] || { echo "no $PERF: build dct_perf first" >&2; exit 2; }
mkdir -p "$OUT"
rm -f "$OUT"/*.json "$OUT"/*.log "$OUT"/*.dat "$OUT"/*.md "$OUT"/*.png
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Stable allocations for both sides (DESIGN.md §6): no mmap/trim churn.
export GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967296
# Dense baseline: Open MPI's basic linear alltoallv (every send and receive
# posted at once), forced so both networks use the same one; it is also
# Open MPI 4.1's fixed choice for 4..63 ranks. libdct's own exchange goes
# through the same MPI. run.sh passes OMPI_MCA_* on through mpirun.
export OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_alltoallv_algorithm=1

shm() { timeout 900 mpirun -np 4 --oversubscribe -x GLIBC_TUNABLES "$PERF" "$@"; }
netem() { timeout 1800 "$ROOT/bench/netem/run.sh" -np 4 --rate 1gbit --timeout 1700 -- "$PERF" "$@"; }

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
LOAD_START=$(loadavg)
LOADS=""
STARTED=$(date -u +%Y-%m-%dT%H:%MZ)
for net in $NETS; do
  for D in $ROWLENGTHS; do
    for d in $DENSITIES; do
      for w in $WIRES; do
        for ((r = 1; r <= REPEATS; r++)); do
          LOADS+="$(loadavg | cut -d' ' -f1) "
          # shellcheck disable=SC2086  # SIZES is a list of flags
          $net -C alltoall $SIZES -R "$D" -D "$d" -W "$w" -n "$ITERS" -w "$WARMUPS" \
            -J "$OUT/${net}_R${D}_D${d}_W${w}.json" | tee -a "$OUT/${net}.log"
        done
      done
    done
  done
done
LOAD_END=$(loadavg)

# Tables (.md), plot data (.dat) and the README, from the JSON rows.
python3 - "$OUT" "$RATE_BPS" <<'PY'
import glob, json, os, statistics, sys
out, rate = sys.argv[1], float(sys.argv[2])
NET = {"shm": "shared memory (4 ranks on 2 cores)", "netem": "1 Gbit/s shaped links (tc tbf)"}
groups = {}  # (net, D, density, wire) -> size -> [rows]
for path in sorted(glob.glob(os.path.join(out, "*.json"))):
    net = os.path.basename(path).split("_")[0]
    for line in open(path):
        if line.strip():
            r = json.loads(line)
            key = (net, r["row_length"], r["density"], r.get("wire_type", "fp32"))
            groups.setdefault(key, {}).setdefault(r["size"], []).append(r)

def summary(rows):
    med = lambda k: statistics.median(r[k] for r in rows)
    s = {k: med(k) for k in ("dense_us", "fwd_us", "bwd_us", "wire_fwd", "wire_bwd",
                             "dense_bytes", "link_bytes_dense", "link_bytes_fwd",
                             "link_bytes_bwd", "kept_density")}
    for k in ("dense", "fwd", "bwd"):
        s[k + "_lo"] = min(r[k + "_min_us"] for r in rows)
        s[k + "_hi"] = max(r[k + "_max_us"] for r in rows)
    s["wrong"] = sum(max(r["wrong"], 0) for r in rows)
    s["unchecked"] = any(r["wrong"] < 0 for r in rows)
    s["runs"] = len(rows)
    for k in ("k", "mask_format", "rows", "nranks", "type", "iters", "warmups", "glibc_tunables"):
        s[k] = rows[0][k]
    s["fwd_x"] = s["dense_us"] / s["fwd_us"] if s["fwd_us"] else 0
    s["bwd_x"] = s["dense_us"] / s["bwd_us"] if s["bwd_us"] else 0
    s["ratio"] = s["dense_bytes"] / s["wire_fwd"] if s["wire_fwd"] else 0
    # Physical floor on a link of `rate` bit/s per direction per rank: the
    # busiest rank's bytes (sent or received, other ranks only) / rate.
    for k in ("dense", "fwd", "bwd"):
        s["floor_" + k] = s["link_bytes_" + k] * 8 / rate * 1e3  # ms
    return s

def ms(s, k):
    return f"{s[k + '_us']/1e3:.2f} ({s[k + '_lo']/1e3:.2f}-{s[k + '_hi']/1e3:.2f})"

md_all = []
for net in ("netem", "shm"):
    for D in sorted({k[1] for k in groups if k[0] == net}):
        wires = ["fp32", "fp64", "fp16", "bf16"]
        keys = sorted((k for k in groups if k[0] == net and k[1] == D), key=lambda k: (-k[2], wires.index(k[3])))
        if not keys:
            continue
        shaped = net == "netem"
        lines = [f"### {NET.get(net, net)}, row length {D}\n",
                 "| size (B) | density | wire | K | mask | dense ms (min-max) | fwd ms (min-max) "
                 "| bwd ms (min-max) | fwd x | bwd x | wire fwd B/rank | wire bwd B/rank | ratio "
                 + ("| floor dense / fwd / bwd ms " if shaped else "") + "| #wrong |",
                 "|---:|---:|:--|---:|:--|---:|---:|---:|---:|---:|---:|---:|---:|"
                 + ("---:|" if shaped else "") + "---:|"]
        first = None
        for key in keys:
            dat = [f"# {NET.get(net, net)}, D={D}, density {key[2]:g}, wire {key[3]}",
                   "# size dense_us fwd_us bwd_us fwd_x bwd_x wire_fwd wire_bwd ratio "
                   "floor_dense_ms floor_fwd_ms floor_bwd_ms wrong runs"]
            for size in sorted(groups[key]):
                s = summary(groups[key][size])
                first = first or s
                wrong = f"{s['wrong']}" + (" (unchecked runs)" if s["unchecked"] else "")
                floor = (f"| {s['floor_dense']:.2f} / {s['floor_fwd']:.2f} / {s['floor_bwd']:.2f} "
                         if shaped else "")
                lines.append(f"| {size} | {key[2]:g} | {key[3]} | {s['k']} | {s['mask_format']} | {ms(s, 'dense')} "
                             f"| {ms(s, 'fwd')} | {ms(s, 'bwd')} | {s['fwd_x']:.2f}x | {s['bwd_x']:.2f}x "
                             f"| {s['wire_fwd']:.0f} | {s['wire_bwd']:.0f} | {s['ratio']:.1f}x "
                             f"{floor}| {wrong} |")
                dat.append(" ".join(str(x) for x in (
                    size, s["dense_us"], s["fwd_us"], s["bwd_us"], round(s["fwd_x"], 4),
                    round(s["bwd_x"], 4), s["wire_fwd"], s["wire_bwd"], round(s["ratio"], 4),
                    round(s["floor_dense"], 4), round(s["floor_fwd"], 4), round(s["floor_bwd"], 4),
                    s["wrong"], s["runs"])))
            with open(os.path.join(out, f"{net}_R{D}_D{key[2]:g}_W{key[3]}.dat"), "w") as f:
                f.write("\n".join(dat) + "\n")
        lines.append(f"\n{first['nranks']} ranks, {first['type']}; {first['runs']} runs per row, "
                     f"each {first['iters']} timed iterations after {first['warmups']} warm-ups; "
                     "times are the median over runs of each run's median of the per-iteration max "
                     "over ranks, (min-max) over every timed iteration of every run. "
                     f"GLIBC_TUNABLES=`{first['glibc_tunables']}`.\n")
        text = "\n".join(lines) + "\n"
        with open(os.path.join(out, f"{net}_R{D}.md"), "w") as f:
            f.write(text)
        md_all.append(text)
with open(os.path.join(out, "tables.md"), "w") as f:
    f.write("\n".join(md_all))
PY

# Time vs size, one panel per row length: dense, forward (solid), backward
# (dashed) per density; on the shaped links also the dense floor.
cat > "$OUT/plots.gp" <<'GP'
set terminal pngcairo size 1400,600 noenhanced
set grid
set key top left font ",9"
set logscale xy
do for [net in nets] {
  set output sprintf("%s/%s_time_vs_size.png", dir, net)
  set multiplot layout 1,2 title sprintf("DCT-MP all-to-all, 4 ranks, fp32, %s: time per call (median of runs)", net eq "netem" ? "1 Gbit/s shaped links" : "shared memory, 4 ranks on 2 cores")
  do for [D in rowlengths] {
    set title sprintf("row length %s", D)
    set xlabel "send buffer bytes per rank"
    set ylabel "ms"
    first = sprintf("%s/%s_R%s_D%s.dat", dir, net, D, word(series, 1))
    file(i) = sprintf("%s/%s_R%s_D%s.dat", dir, net, D, word(series, i))
    # The dense floor only exists on the shaped links: an extra curve there.
    floor = net eq "netem" ? "1 Gbit/s floor of dense (bytes / rate)" : ""
    plot first using 1:($2/1e3) with linespoints lw 2 lc rgb "black" title "dense MPI_Alltoallv", \
         for [i=1:words(series)] file(i) using 1:($3/1e3) with linespoints lc i title sprintf("forward, density %s", word(series, i)), \
         for [i=1:words(series)] file(i) using 1:($4/1e3) with linespoints dt 2 lc i title sprintf("backward, density %s", word(series, i)), \
         for [k=1:(net eq "netem")] first using 1:10 with lines dt 3 lc rgb "gray40" title floor
  }
  unset multiplot
}
GP
series=""; for d in $DENSITIES; do for w in $WIRES; do series+="$(python3 -c "print('%g' % $d)")_W$w "; done; done
gnuplot -e "dir='$OUT'; nets='$NETS'; rowlengths='$ROWLENGTHS'; series='${series% }'" "$OUT/plots.gp"

DIRTY=""
if git -C "$ROOT" status --porcelain -- src include bench | grep -q .; then DIRTY=" + uncommitted changes"; fi
{
  echo "# DCT-MP sparse all-to-all, $STARTED"
  echo
  echo "Machine: $(hostname -s), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
       "$(free -g | awk '/Mem/{print $2}') GiB; Open MPI $(mpirun --version | head -1 | awk '{print $NF}');" \
       "libdct $(git -C "$ROOT" rev-parse --short HEAD)$DIRTY."
  echo "Load average (1/5/15 min) at the start: $LOAD_START; at the end: $LOAD_END;" \
       "1-min load before each of the $(wc -w <<<"$LOADS") runs: $(xargs -n1 <<<"$LOADS" | sort -g | sed -n '1p;$p' | paste -sd- ) (min-max)." \
       "The benchmark itself keeps 4 busy-polling ranks on the 2 cores (load ~4); a start load" \
       "well above 0 means other work shared the cores."
  echo
  echo "What is timed (per iteration, barrier + MPI_Wtime, max over ranks, fresh rows every"
  echo "iteration): dense \`MPI_Alltoallv\` of the full rows (Open MPI's basic linear alltoallv,"
  echo "forced: \`coll_tuned_alltoallv_algorithm 1\`, also its own choice at 4 ranks);"
  echo "\`dctSparseAlltoall\` (per-row top-K selection, packing, exchange, scatter into zero rows)"
  echo "and \`dctSparseAlltoallBackward\` (values at the kept positions only, sent back)."
  echo "\`fwd x\`/\`bwd x\` = dense time / forward or backward time. Rows = size / (D * 4 B),"
  echo "split evenly over the 4 ranks; \`wire\` = the plan's bytes sent to other ranks"
  echo "(\`dctAlltoallPlanGetStats\`), \`ratio\` = dense bytes / forward wire bytes."
  echo "\`#wrong\`: elements of the forward result that differ bit for bit from a per-row"
  echo "top-K reference (ties to the lower column) rebuilt by the receiver, of the backward"
  echo "result from the gradient restricted to the sender's own masks, and of the dense result"
  echo "from the rebuilt rows (2 checked steps per size and run)."
  echo
  echo "Physical bound on the shaped links: every rank has its own 1 Gbit/s link each way,"
  echo "so a call takes at least (bytes the busiest rank sends or receives to/from other"
  echo "ranks) * 8 / 1e9 s: the \`floor\` column, for dense and for libdct's wire bytes."
  echo "About 96% of the tbf rate is usable payload (bench/netem/README.md), so ~1.04x the"
  echo "floor is the practical limit. Shared memory has no such link: 4 ranks share 2"
  echo "cores there, and the CPU work of selection and packing is what the times show."
  echo
  echo "Commands (from the repository root; each configuration is its own process):"
  echo
  echo '```sh'
  echo "bench/results/collect_alltoall.sh ${1:-build}    # REPEATS=$REPEATS ITERS=$ITERS WARMUPS=$WARMUPS"
  echo "# which runs, for D in {$ROWLENGTHS}, d in {$DENSITIES}, w in {$WIRES}, $REPEATS times each:"
  echo "export GLIBC_TUNABLES=$GLIBC_TUNABLES"
  echo "export OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_alltoallv_algorithm=1"
  echo "mpirun -np 4 --oversubscribe -x GLIBC_TUNABLES build/bench/dct_perf -C alltoall $SIZES -R \$D -D \$d -W \$w -n $ITERS -w $WARMUPS -J shm_R\${D}_D\${d}_W\${w}.json"
  echo "bench/netem/run.sh -np 4 --rate 1gbit --timeout 1700 -- build/bench/dct_perf -C alltoall $SIZES -R \$D -D \$d -W \$w -n $ITERS -w $WARMUPS -J netem_R\${D}_D\${d}_W\${w}.json"
  echo '```'
  echo
  # shellcheck disable=SC2016  # the backquotes are markdown
  echo "Plots: $(for n in $NETS; do printf '`%s_time_vs_size.png` ' "$n"; done)(solid forward, dashed backward,"
  echo "black dense; dotted the dense floor). Raw rows: \`*.json\`; plot data: \`*.dat\`; full output: \`*.log\`."
  echo
  cat "$OUT/tables.md"
} > "$OUT/README.md"
echo "results in $OUT"
