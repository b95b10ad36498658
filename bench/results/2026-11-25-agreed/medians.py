#!/usr/bin/env python3
"""Medians over repetitions of ab.sh's raw lines: per (ranks, size, density)
and build, dense_us, dct_us, speedup, wire bytes, the algorithms auto ran
(how many runs each) and tau estimates per run.
usage: medians.py ab-output.txt"""
import collections
import statistics
import sys

rows = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 12 or f[0] not in ("old", "new"):
        continue
    tag, np = f[0], int(f[1])
    if f[3] == "est":
        rows[(np, int(f[4]), None)][tag + "_est"].append(int(f[5]))
        continue
    size, density, algo = int(f[3]), float(f[6]), f[7]
    r = rows[(np, size, density)][tag]
    r.append((float(f[8]), float(f[9]), float(f[10]), float(f[11]), algo))

def med(xs):
    return statistics.median(xs) if xs else float("nan")

print("| ranks | size | density | dense_us old / new | dct_us old / new | speedup old / new | wire bytes old / new | auto ran (old; new) |")
print("|---:|---:|---:|---|---|---|---|---|")
for (np, size, density), r in sorted((k, v) for k, v in rows.items() if k[2] is not None):
    o, n = r["old"], r["new"]
    algos = lambda rs: ", ".join(f"{a} {c}" for a, c in collections.Counter(x[4] for x in rs).most_common())
    print(f"| {np} | {size // 1024} KiB | {density * 100:g}% | {med([x[0] for x in o]):.1f} / {med([x[0] for x in n]):.1f} | "
          f"{med([x[1] for x in o]):.1f} / {med([x[1] for x in n]):.1f} | "
          f"{med([x[2] for x in o]):.2f} / {med([x[2] for x in n]):.2f} | "
          f"{med([x[3] for x in o]):.0f} / {med([x[3] for x in n]):.0f} | {algos(o)}; {algos(n)} |")
