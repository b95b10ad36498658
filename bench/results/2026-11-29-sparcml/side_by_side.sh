#!/usr/bin/env bash
# libdct's sparse-input allreduce (dct_perf -C coo) side by side with SparCML
# (Renggli et al., SC'19; the authors' headers from SPARCML_DIR, built into <out>) on the
# same job: RANKS ranks (4; RANKS=8 for 8, RANKS="4 8" for both), each with a
# uniform COO over n fp32 elements at density d, values in [-1,1), the same
# generator and seed on both sides. For each row SparCML's driver (all four algorithms + dense
# MPI_Allreduce) and dct_perf -C coo -a auto (and -O coo / -O dense when this
# dct_perf has -O) run back to back in the same environment: GLIBC_TUNABLES as
# libdct's collect scripts, Open MPI's ring forced for MPI_Allreduce and
# MPI_Allgatherv, medians of N (7) iterations after W (3) warmups.
# Rows: shared memory n = 1M at 1%, 16M at 0.1%, 1%, 10%; with NETEM=1 also
# 16M at 0.1%, 1%, 10% on 1 Gbit/s shaped links (libdct's bench/netem/run.sh,
# needs root). Writes <out>/{shm,netem}-np<R>.{sparcml,dct-<mode>}.json, *.log,
# env.txt and table.md (the table is rebuilt from every JSON file in <out>).
#   side_by_side.sh <libdct-build-dir> <out-dir>
# Env: RANKS (4), N (7), W (3), SEED (1), SHM (1), NETEM (0), MODES (dct_perf
#      output modes; default "coo dense" when dct_perf -h lists -O, else "default"),
#      SHM_ROWS / NETEM_ROWS ("count:density ...", counts in elements, K/M = 2^10/2^20),
#      LIBDCT_SRC (libdct's source tree; default: from the build dir's CMakeCache),
#      SPARCML_DIR (SparCML's headers), SPARCML_RUNS=0 (libdct's rows only),
#      KEEP=1 (add to the JSON files already in <out> instead of starting over).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
[ $# -ge 2 ] || { sed -n 2,20p "$0"; exit 2; }
BUILD="$(cd "$1" && pwd)"
OUT="$2"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
PERF="$BUILD/bench/dct_perf"
[ -x "$PERF" ] || { echo "no $PERF (configure libdct with -DDCT_BUILD_BENCH=ON)" >&2; exit 2; }
# SparCML's published headers stay outside the repository (README.md).
SPARCML_DIR="${SPARCML_DIR:?set SPARCML_DIR to the directory holding the SparCML c_*.h headers, see README.md}"
SPARCML="$OUT/bench_sparcml"
mpicxx -O3 -march=native -std=c++17 -fopenmp-simd -w -I"$SPARCML_DIR" -o "$SPARCML" "$HERE/bench_sparcml.cc"
SRC="${LIBDCT_SRC:-$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD/CMakeCache.txt")}"
RANKS="${RANKS:-4}"
ITERS=(-n "${N:-7}" -w "${W:-3}")
SEED="${SEED:-1}"
SHM_ROWS="${SHM_ROWS:-1M:0.01 16M:0.001 16M:0.01 16M:0.1}"
NETEM_ROWS="${NETEM_ROWS:-16M:0.001 16M:0.01 16M:0.1}"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967296
export OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_allreduce_algorithm=4 \
       OMPI_MCA_coll_tuned_allgatherv_algorithm=3

# Output modes of dct_perf -C coo: "-O coo" (the union as COO) and "-O dense"
# when it has -O; otherwise its one mode, the dense result.
if [ -z "${MODES:-}" ]; then
  help="$("$PERF" -h 2>&1 || true)"  # whole: grep -q would close the pipe under pipefail
  if grep -Eq '^[[:space:]]*-O[[:space:],]' <<<"$help"; then MODES="coo dense"; else MODES="default"; fi
fi

count_of() {  # 64K / 1M / 16777216 -> elements
  local v=$1
  case $v in
    *K|*k) echo $(( ${v%[Kk]} * 1024 )) ;;
    *M|*m) echo $(( ${v%[Mm]} * 1048576 )) ;;
    *G|*g) echo $(( ${v%[Gg]} * 1073741824 )) ;;
    *) echo "$v" ;;
  esac
}

launch() {  # launch <where> <timeout> <log> PROGRAM ARGS...: a failed run is logged, the sweep goes on
  local where=$1 t=$2 log=$3 rc=0; shift 3
  if [ "$where" = shm ]; then
    timeout "$t" mpirun -np "$NP" --oversubscribe -x GLIBC_TUNABLES "$@" 2>&1 | tee -a "$log" || rc=$?
  else
    timeout "$((t + 100))" "$SRC/bench/netem/run.sh" -np "$NP" --rate 1gbit --timeout "$t" -- "$@" 2>&1 \
      | tee -a "$log" || rc=$?
  fi
  if [ "$rc" = 77 ]; then echo "bench/netem/run.sh: no namespaces/tbf here (needs root); stopping" >&2; exit 77; fi
  [ "$rc" = 0 ] || echo "# FAILED (exit $rc): $*" | tee -a "$log" >&2
}

row() {  # row <where> <count> <density>
  local where=$1 n; n=$(count_of "$2"); local d=$3 t=900 link=()
  [ "$where" = netem ] && { t=1700; link=(-l 1); }
  local tag="$where-np$NP"
  echo "## $where n=$n density=$d ranks=$NP $(date -u +%H:%M:%S)" | tee -a "$OUT/$tag.log"
  [ "${SPARCML_RUNS:-1}" = 1 ] && launch "$where" "$t" "$OUT/$tag.log" "$SPARCML" -N "$n" -D "$d" -s "$SEED" \
    "${ITERS[@]}" -J "$OUT/$tag.sparcml.json"
  for m in $MODES; do
    local mode=()
    [ "$m" != default ] && mode=(-O "$m")
    launch "$where" "$t" "$OUT/$tag.log" "$PERF" -C coo -b "$((n * 4))" -e "$((n * 4))" -D "$d" -s "$SEED" -a auto "${mode[@]}" \
      "${link[@]}" "${ITERS[@]}" -J "$OUT/$tag.dct-$m.json"
  done
}

{
  echo "# side_by_side $(date -u +%FT%TZ): ranks $RANKS, ${ITERS[*]}, seed $SEED, dct_perf modes: $MODES"
  echo "# libdct $(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo '?') build $BUILD; SparCML: $SPARCML_DIR (README.md)"
  echo "# GLIBC_TUNABLES=$GLIBC_TUNABLES; OMPI_MCA_coll_tuned: allreduce 4 (ring), allgatherv 3 (ring)"
  echo "# nproc $(nproc); load $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$OUT/env.txt"
cat "$OUT/env.txt"

for NP in $RANKS; do
  if [ "${SHM:-1}" = 1 ]; then
    [ "${KEEP:-0}" = 1 ] || rm -f "$OUT/shm-np$NP".*.json "$OUT/shm-np$NP.log"
    for r in $SHM_ROWS; do row shm "${r%%:*}" "${r##*:}"; done
  fi
  if [ "${NETEM:-0}" = 1 ]; then
    [ "${KEEP:-0}" = 1 ] || rm -f "$OUT/netem-np$NP".*.json "$OUT/netem-np$NP.log"
    for r in $NETEM_ROWS; do row netem "${r%%:*}" "${r##*:}"; done
  fi
done

python3 - "$OUT" <<'PY' > "$OUT/table.md"
import glob, json, os, re, sys
out = sys.argv[1]
def load(path):
    rows = []
    if os.path.exists(path):
        for line in open(path):
            line = line.strip()
            if line:
                rows.append(json.loads(line))
    return rows
def ms(us):
    return "" if us is None else f"{us / 1e3:.3f}"
def ratio(a, b):
    return "" if a is None or b is None or b == 0 else f"{a / b:.2f}"
env = os.path.join(out, "env.txt")
if os.path.exists(env):
    print(open(env).read().replace("# ", "").replace("\n", "  \n"))
print("Times in ms: median over iterations of the per-iteration max over ranks. SparCML 'sparse result': the call "
      "alone, its result as it comes back (a sparse or dense stream; the kind in brackets); 'to dense': the call "
      "plus writing its result into n floats. libdct: dct_perf -C coo -a auto, 'COO out' with -O coo, 'dense out' "
      "with -O dense (or dct_perf's only mode, the dense result, when it has no -O), auto's plan in brackets. "
      "dense MPI_Allreduce: dct_perf's dense_us (ring forced). Ratios: libdct COO out / SparCML best sparse, "
      "libdct dense out / SparCML best to-dense (below 1: libdct faster), MPI / libdct dense out. "
      "#wrong: SparCML's worst algorithm / libdct per mode (0: every element within tolerance and the same bits "
      "on every rank).\n")
tags = []
for f in glob.glob(os.path.join(out, "*-np*.sparcml.json")):
    m = re.match(r"(shm|netem)-np(\d+)\.sparcml\.json$", os.path.basename(f))
    if m:
        tags.append((0 if m.group(1) == "shm" else 1, int(m.group(2)), m.group(1)))
for _, np_, where in sorted(tags):
    tag = f"{where}-np{np_}"
    link = "shared memory" if where == "shm" else "1 Gbit/s"
    sp = load(os.path.join(out, tag + ".sparcml.json"))
    dct = {}
    for f in glob.glob(os.path.join(out, tag + ".dct-*.json")):
        dct[os.path.basename(f)[len(tag) + 5:-5]] = load(f)
    keys = []
    for r in sp:
        k = (r["count"], r["density"])
        if k not in keys:
            keys.append(k)
    print(f"## {link} ({where}), {np_} ranks\n")
    print("| density | n | link | SparCML best (sparse result) | SparCML best (to dense) | libdct auto, COO out | "
          "libdct auto, dense out [plan] | dense MPI_Allreduce | COO / SparCML sparse | dense / SparCML to-dense | "
          "MPI / libdct dense | #wrong |")
    print("|---:|---:|---|---|---|---:|---|---:|---:|---:|---:|---|")
    for (n, d) in keys:
        algs = [r for r in sp if (r["count"], r["density"]) == (n, d) and r["algo"] != "dense"]
        mpi = [r for r in sp if (r["count"], r["density"]) == (n, d) and r["algo"] == "dense"]
        if not algs:
            continue
        best = min(algs, key=lambda r: r["call_us"])
        bestd = min(algs, key=lambda r: r["to_dense_us"])
        def pick(m):
            for r in dct.get(m, []):
                if r["count"] == n and abs(r["density"] - d) < 1e-12:
                    return r
            return None
        coo = pick("coo")
        den = pick("dense") or pick("default")
        dense_mpi = den["dense_us"] if den else (mpi[0]["call_us"] if mpi else None)
        wrong_sp = max(r["wrong"] for r in algs)
        wrong_dct = [str(r["wrong"]) for r in (coo, den) if r]
        print(f"| {d * 100:g}% | {n} | {link} "
              f"| {best['algo']} {ms(best['call_us'])} [{best['result']}] "
              f"| {bestd['algo']} {ms(bestd['to_dense_us'])} "
              f"| {ms(coo['dct_us']) if coo else 'n/a'} "
              f"| {ms(den['dct_us']) + ' [' + den['algo'] + ']' if den else 'n/a'} "
              f"| {ms(dense_mpi)} "
              f"| {ratio(coo['dct_us'], best['call_us']) if coo else ''} "
              f"| {ratio(den['dct_us'], bestd['to_dense_us']) if den else ''} "
              f"| {ratio(dense_mpi, den['dct_us']) if den else ''} "
              f"| {wrong_sp} / {','.join(wrong_dct) or 'n/a'} |")
    print()
    print(f"### SparCML, every algorithm ({where}, {np_} ranks): call (to dense) in ms, [result], #wrong; "
          "dense = the driver's own MPI_Allreduce\n")
    names = []
    for r in sp:
        if r["algo"] not in names:
            names.append(r["algo"])
    print("| density | n | " + " | ".join(names) + " |")
    print("|---:|---:|" + "---|" * len(names))
    for (n, d) in keys:
        cells = []
        for a in names:
            r = next((r for r in sp if (r["count"], r["density"], r["algo"]) == (n, d, a)), None)
            cells.append("" if r is None else
                         f"{ms(r['call_us'])} ({ms(r['to_dense_us'])}) [{r['result']}] {r['wrong']}")
        print(f"| {d * 100:g}% | {n} | " + " | ".join(cells) + " |")
    print()
PY
cat "$OUT/table.md"
echo "results in $OUT"
