#!/usr/bin/env python3
"""Medians of pipeline_ab.sh's runs: the forward, backward and dense
all-to-all (ms) per network and DCT_PIPELINE, as a markdown table.
Usage: pipeline_ab.py [raw/pipeline]"""
import glob
import os
import statistics
import sys

here = os.path.dirname(os.path.abspath(__file__))
raw = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "raw", "pipeline")
BOUND_MS = 7.86  # 1 Gbit/s: the busiest rank's forward wire bytes / link rate (README)


def row(path):
    for line in open(path):
        f = line.split()
        if f and f[0] == "16777216":
            return float(f[9]) / 1e3, float(f[10]) / 1e3, float(f[11]) / 1e3  # dense, fwd, bwd
    return None


print("| network | forward | runs | dense ms | forward ms (min-max) | backward ms | forward / dense | forward / bound |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
for net in ("netem", "shm"):
    for pl, name in (("0", "unchunked"), ("1", "pipelined")):
        rows = [r for r in map(row, sorted(glob.glob(f"{raw}/{net}-pl{pl}-*.log"))) if r]
        if not rows:
            continue
        dense, fwd, bwd = (statistics.median(c) for c in zip(*rows))
        spread = f"{min(r[1] for r in rows):.1f}-{max(r[1] for r in rows):.1f}"
        bound = f"{fwd / BOUND_MS:.2f}x" if net == "netem" else "-"
        print(f"| {'1 Gbit/s' if net == 'netem' else 'shm'} | {name} | {len(rows)} | {dense:.1f} | {fwd:.1f} ({spread}) "
              f"| {bwd:.1f} | {fwd / dense:.2f} | {bound} |")
