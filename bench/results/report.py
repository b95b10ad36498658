#!/usr/bin/env python3
"""Turns dct_perf JSON rows (-J) into markdown tables and gnuplot data.

usage: report.py ROWS.json TITLE OUT_PREFIX
Writes OUT_PREFIX.md (a table per density / the density sweep) and
OUT_PREFIX.dat (whitespace columns for plots.gp).
"""
import json
import sys


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    rows_path, title, prefix = sys.argv[1:4]
    rows = load(rows_path)
    cols = ["size", "density", "algo", "dense_us", "dense_min_us", "dense_max_us", "dct_us",
            "dct_min_us", "dct_max_us", "speedup", "wire_bytes", "ratio", "tau_estimates", "wrong"]
    with open(prefix + ".md", "w") as md, open(prefix + ".dat", "w") as dat:
        md.write(f"### {title}\n\n")
        md.write("| size (B) | density | algo | dense ms (min-max) | libdct ms (min-max) | speedup "
                 "| wire B/rank | ratio | tau est. | #wrong |\n")
        md.write("|---:|---:|:--|---:|---:|---:|---:|---:|---:|---:|\n")
        dat.write("# " + " ".join(cols) + "\n")
        for r in rows:
            md.write(f"| {r['size']} | {r['density']:g} | {r['algo']} "
                     f"| {r['dense_us']/1e3:.2f} ({r['dense_min_us']/1e3:.2f}-{r['dense_max_us']/1e3:.2f}) "
                     f"| {r['dct_us']/1e3:.2f} ({r['dct_min_us']/1e3:.2f}-{r['dct_max_us']/1e3:.2f}) "
                     f"| {r['speedup']:.2f}x | {r['wire_bytes']:.0f} | {r['ratio']:.1f}x "
                     f"| {r['tau_estimates']} | {r['wrong']} |\n")
            dat.write(" ".join(str(r[c]) for c in cols) + "\n")
        first = rows[0] if rows else {}
        md.write(f"\n{first.get('nranks', '?')} ranks, {first.get('type', '?')}, {first.get('iters', '?')} "
                 f"iterations after {first.get('warmups', '?')} warm-ups, medians of the per-iteration "
                 f"max over ranks; GLIBC_TUNABLES=`{first.get('glibc_tunables', '')}`.\n\n")


if __name__ == "__main__":
    main()
