#!/usr/bin/env python3
"""Tabulates collect.sh's JSON rows: per network and build, the median over
runs of each run's median time (per-iteration max over ranks), the min-max
over runs, the phase means and the bound. Usage: summary.py [folder]"""
import glob, json, os, statistics, sys

here = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
NET = {"shm": "shared memory (4 ranks on 2 cores)", "netem": "1 Gbit/s shaped links (4 ranks on 2 cores)"}
rows = {}
for path in sorted(glob.glob(os.path.join(here, "*.json"))):
    net, label = os.path.basename(path)[:-5].split("_", 1)
    rows.setdefault(net, {})[label] = [json.loads(line) for line in open(path) if line.strip()]
for net in ("shm", "netem"):
    if net not in rows:
        continue
    print(f"\n### {NET[net]}\n")
    print("| build | runs | 1-bit ms (min-max of runs) | dense ring ms | speedup vs dense | compress | agree | exchange "
          "| reduce | other | bound ms (wire / memory) | x bound | #wrong |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    order = ["head", "phases", "simd", "final"]  # then anything else, by name
    labels = sorted(rows[net], key=lambda l: (order.index(l) if l in order else len(order), l))
    for label in labels:
        rs = rows[net][label]
        med = lambda k: statistics.median(r[k] for r in rs) / 1e3
        ph = lambda k: statistics.median(r["phase_us"][k] for r in rs) / 1e3
        dct, dense = med("dct_us"), med("dense_us")
        lo, hi = min(r["dct_us"] for r in rs) / 1e3, max(r["dct_us"] for r in rs) / 1e3
        bound = med("bound_us")
        bcell = f"{bound:.1f} ({med('wire_bound_us'):.1f} / {med('memory_bound_us'):.1f})" if bound > 0 else "-"
        xb = f"{dct / bound:.2f}" if bound > 0 else "-"
        print(f"| {label} | {len(rs)} | {dct:.1f} ({lo:.1f}-{hi:.1f}) | {dense:.1f} | {dense / dct:.2f}x "
              f"| {ph('compress'):.1f} | {ph('agree'):.1f} | {ph('exchange'):.1f} | {ph('reduce'):.1f} | {ph('other'):.1f} "
              f"| {bcell} | {xb} | {sum(r['wrong'] for r in rs)} |")
