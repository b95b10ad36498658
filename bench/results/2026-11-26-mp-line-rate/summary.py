#!/usr/bin/env python3
"""Tables (tables.md) and plot data (phases.dat) from collect.sh's raw/.

  summary.py [DIR]   (default: this script's folder)
"""
import glob
import json
import os
import re
import statistics
import sys

D = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
RAW = os.path.join(D, "raw")
BUILDS = ("before", "after")
NETS = (("netem", "1 Gbit/s shaped links"), ("shm", "shared memory"))
PHASES = ("local", "agree", "exchange", "unpack", "vote", "tail")
med = statistics.median


def rng(xs, scale=1e3, f="%.1f"):
    return (f + " (" + f + "-" + f + ")") % (med(xs) / scale, min(xs) / scale, max(xs) / scale)


def kernels():
    """build -> threads -> kernel -> (us, GB/s)"""
    out = {}
    for path in glob.glob(os.path.join(RAW, "kernel", "*-t*.log")):
        b, t = re.match(r"(\w+)-t(\d)\.log", os.path.basename(path)).groups()
        for line in open(path):
            f = line.split()
            if len(f) == 6 and f[0].isdigit():
                out.setdefault(b, {}).setdefault(int(t), {})[f[1]] = (float(f[3]), float(f[4]))
    return out


def a2a(net, b):
    runs = []
    for d in sorted(glob.glob(os.path.join(RAW, "a2a", net, b, "r*"))):
        try:
            row = json.loads(open(os.path.join(d, "row.json")).readline())
            ph = json.load(open(os.path.join(d, "phases.json")))
            load = float(open(os.path.join(d, "load.txt")).read().split()[2])
        except (OSError, ValueError, IndexError):
            continue
        runs.append((row, ph, load))
    return runs


K = kernels()
# Memory floor of the forward on this machine: every rank reads its 16 MiB of
# rows and writes 16 MiB of received rows once, 4 ranks through the 2 cores'
# memory bandwidth, taken as kernel_perf's memcpy (read + write counted) on
# both cores at the same 16 MiB buffers (after build; the same memcpy).
mem_gbps = K.get("after", {}).get(2, {}).get("memcpy", (0, 0))[1]
MEM_BYTES = 4 * 2 * 16 * 2**20
mem_ms = MEM_BYTES / (mem_gbps * 1e9) * 1e3 if mem_gbps else float("nan")

L = ["# Tables (summary.py)", ""]
L.append("## DCT-MP all-to-all, 16 MiB per rank, D = 64, density 5% (K = 4), fp32, 4 ranks on 2 cores")
L.append("")
L.append("Times in ms: median of the per-run medians (min-max of the run medians); each run is one process, "
         "7 timed iterations after 3 warm-ups, each iteration the max over ranks (dct_perf). `load` = the 1-min "
         "load average before each run (min-max). Wire floor: the busiest rank's forward bytes / 1 Gbit/s. "
         f"Memory floor: 4 ranks x (16 MiB read + 16 MiB written) = 128 MiB at kernel_perf's memcpy rate on both "
         f"cores ({mem_gbps:.1f} GB/s) = {mem_ms:.2f} ms. bound = max(wire, memory).")
L.append("")
L.append("| network | build | runs | dense | forward | backward | fwd x dense | wire fwd B/rank | floor wire / mem ms "
         "| fwd / bound | #wrong | load |")
L.append("|:--|:--|---:|---:|---:|---:|---:|---:|---:|---:|---:|:--|")
summary = {}
for net, label in NETS:
    for b in BUILDS:
        runs = a2a(net, b)
        if not runs:
            continue
        rows = [r for r, _, _ in runs]
        fwd = [r["fwd_us"] for r in rows]
        wire_ms = med([r["link_bytes_fwd"] for r in rows]) * 8 / 1e9 * 1e3
        bound = max(wire_ms, mem_ms) if net == "netem" else mem_ms
        summary[(net, b)] = dict(fwd=med(fwd), bound=bound, dense=med(r["dense_us"] for r in rows),
                                 bwd=med(r["bwd_us"] for r in rows), runs=runs)
        loads = [l for _, _, l in runs]
        floor = f"{wire_ms:.2f} / {mem_ms:.2f}" if net == "netem" else f"- / {mem_ms:.2f}"
        L.append(f"| {label} | {b} | {len(runs)} | {rng([r['dense_us'] for r in rows])} | {rng(fwd)} "
                 f"| {rng([r['bwd_us'] for r in rows])} | {med(r['dense_us'] for r in rows) / med(fwd):.2f}x "
                 f"| {med(r['wire_fwd'] for r in rows):.0f} | {floor} | {med(fwd) / 1e3 / bound:.2f}x "
                 f"| {sum(max(r['wrong'], 0) for r in rows)} | {min(loads):.1f}-{max(loads):.1f} |")
L.append("")

for direction, title in (("fwd", "Forward"), ("bwd", "Backward")):
    L.append(f"## {title} phases (phase_shim.c), ms")
    L.append("")
    L.append("Median over runs of each run's median over the 7 timed calls of the phase averaged over the 4 ranks; "
             "`crit` = the same phase on the rank whose call took longest. local = entry to the header allgather "
             "(forward: row select + offsets + zero + pack; backward: pack); agree = header allgather + vote "
             "(waiting for the slowest rank's local work lands here); exchange = MPI_Alltoallv; unpack = decode "
             "and scatter into dense rows; vote = the exchange vote (waiting for the slowest unpack).")
    L.append("")
    L.append("| network | build | call (shim) | " + " | ".join(PHASES) + " | crit local | crit exchange | crit unpack |")
    L.append("|:--|:--|---:|" + "---:|" * (len(PHASES) + 3))
    for net, label in NETS:
        for b in BUILDS:
            s = summary.get((net, b))
            if not s:
                continue
            ph = [p[direction] for _, p, _ in s["runs"] if direction in p]
            cell = lambda k, p: f"{med(x[k][p] for x in ph) / 1e3:.2f}"
            L.append(f"| {label} | {b} | {med(x['total'] for x in ph) / 1e3:.2f} | "
                     + " | ".join(cell("mean", p) for p in PHASES)
                     + f" | {cell('crit', 'local')} | {cell('crit', 'exchange')} | {cell('crit', 'unpack')} |")
    L.append("")

with open(os.path.join(D, "phases.dat"), "w") as f:
    f.write("# forward phases, ms (mean over ranks, median over runs): label " + " ".join(PHASES) + "\n")
    for net, label in NETS:
        for b in BUILDS:
            s = summary.get((net, b))
            if s:
                ph = [p["fwd"] for _, p, _ in s["runs"] if "fwd" in p]
                f.write(f'"{net}\\n{b}" ' + " ".join(f"{med(x['mean'][p] for x in ph) / 1e3:.3f}" for p in PHASES)
                        + f" {s['fwd'] / 1e3:.3f} {s['bound']:.3f}\n")

if K:
    L.append("## Row kernels alone (kernel_perf -b 4M -e 4M -L 64 -K 0.05 -n 10: one rank's 16 MiB), us")
    L.append("")
    L.append("| build | threads | row-select | row-pack | row-unpack | memcpy | memcpy GB/s |")
    L.append("|:--|---:|---:|---:|---:|---:|---:|")
    for b in BUILDS:
        for t in (1, 2):
            k = K.get(b, {}).get(t)
            if k:
                L.append(f"| {b} | {t} | " + " | ".join(f"{k[n][0]:.0f}" for n in ("row-select", "row-pack",
                         "row-unpack", "memcpy")) + f" | {k['memcpy'][1]:.1f} |")
    L.append("")

dl = {}
for path in glob.glob(os.path.join(RAW, "dlrm", "*-r*.log")):
    b = os.path.basename(path).split("-r")[0]
    res = [dict(kv.split("=", 1) for kv in line.split()[1:]) for line in open(path) if line.startswith("RESULT")]
    if len(res) < 8:
        continue
    ep = res[1:]  # epochs 2-8
    phf = os.path.join(RAW, "dlrm", "phases-" + os.path.basename(path)[:-4], "phases.json")
    ph = json.load(open(phf)) if os.path.exists(phf) else {}
    dl.setdefault(b, []).append(dict(
        last=float(res[-1]["step_ms"]), last_mp=float(res[-1]["mp_ms"]), last_dp=float(res[-1]["dp_ms"]),
        step=med(float(r["step_ms"]) for r in ep), mp=med(float(r["mp_ms"]) for r in ep),
        dp=med(float(r["dp_ms"]) for r in ep), auc=float(res[-1]["auc"]), ph=ph,
        rep=int(re.search(r"-r(\d+)\.log", path).group(1))))
if dl:
    L.append("## DLRM example, `mp-0.05` at 4 ranks on shared memory (run_all.sh's command), ms/step")
    L.append("")
    L.append("`last epoch` = epoch 8's step time (what run_all.sh's table shows); `epochs 2-8` = the median of "
             "epochs 2-8 in the run. Both: median over runs (min-max). `MP` = the example's own timer around "
             "the all-to-all forward + backward; the fwd/bwd columns are the library calls as the shim saw "
             "them (median over calls from epoch 2 on, evaluation forwards included; mean over ranks, phases as above).")
    L.append("")
    L.append("| build | runs | step, last epoch | MP, last epoch | step, epochs 2-8 | MP, epochs 2-8 | DP, epochs 2-8 "
             "| fwd call | fwd local / agree / exchange / unpack / vote | bwd call | AUC |")
    L.append("|:--|---:|---:|---:|---:|---:|---:|---:|:--|---:|---:|")
    for b in ("before", "after", "dense"):
        rs = dl.get(b)
        if not rs:
            continue
        f = lambda k: rng([r[k] for r in rs], 1, "%.1f")
        phs = [r["ph"] for r in rs if r["ph"]]
        tot = lambda p, d: sum(p[d]["mean"].values())  # the call, mean over ranks
        fc = f"{med(tot(p, 'fwd') for p in phs) / 1e3:.2f}" if phs else "-"
        bc = f"{med(tot(p, 'bwd') for p in phs) / 1e3:.2f}" if phs else "-"
        parts = " / ".join(f"{med(p['fwd']['mean'][q] for p in phs) / 1e3:.2f}"
                           for q in PHASES[:5]) if phs else "-"
        L.append(f"| {b} | {len(rs)} | {f('last')} | {f('last_mp')} | {f('step')} | {f('mp')} | {f('dp')} "
                 f"| {fc} | {parts} | {bc} | {med(r['auc'] for r in rs):.4f} |")
    L.append("")
    L.append("Per run (the runs fall in two groups, ~16-20 and ~37-40 ms/step, by what else ran on the cores; "
             "compare within a group): step / MP ms in epoch 8, and the forward's local phase (ms, mean over "
             "ranks).")
    L.append("")
    L.append("| rep | before step / MP | before fwd local | after step / MP | after fwd local |")
    L.append("|---:|---:|---:|---:|---:|")
    byrep = {b: {r["rep"]: r for r in dl.get(b, [])} for b in ("before", "after")}
    for rep in sorted(set(byrep["before"]) | set(byrep["after"])):
        c = []
        for b in ("before", "after"):
            r = byrep[b].get(rep)
            c.append(f"{r['last']:.1f} / {r['last_mp']:.1f} | {r['ph']['fwd']['mean']['local'] / 1e3:.2f}" if r else "- | -")
        L.append(f"| {rep} | " + " | ".join(c) + " |")
    L.append("")

open(os.path.join(D, "tables.md"), "w").write("\n".join(L) + "\n")
print("\n".join(L))
