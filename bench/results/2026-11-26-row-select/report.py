#!/usr/bin/env python3
"""Before/after table of row-select from collect.sh's raw/ runs of one tag
(argv[1], default sweep): medians over runs of row-select's time, GB/s and
ratio to memcpy (kernel_perf's x_memcpy), and of memcpy's GB/s."""
import collections, glob, gzip, os, statistics, sys

here = os.path.dirname(os.path.abspath(__file__))
runs = collections.defaultdict(list)  # (L, threads, n, side) -> [(sel_us, sel_gbs, x_memcpy, copy_gbs)]
tag = sys.argv[1] if len(sys.argv) > 1 else "sweep"
for path in glob.glob(os.path.join(here, "raw", f"*.{tag}*.txt*")):  # as written, or gzipped
    side, L, t, _ = os.path.basename(path).split(".")[:4]
    rows = {}
    for line in (gzip.open(path, "rt") if path.endswith(".gz") else open(path)):
        f = line.split()
        if len(f) == 6 and f[1] in ("row-select", "memcpy"):
            rows[(int(f[0]), f[1])] = (float(f[3]), float(f[4]), float(f[5]))
    for (n, name), (us, gbs, x) in rows.items():
        if name == "row-select":
            runs[(int(L[1:]), t[1:], n, side)].append((us, gbs, x, rows[(n, "memcpy")][1]))

sizes = sorted({k[2] for k in runs})
print("| L | threads | n | memcpy GB/s | before GB/s | before x memcpy | before ns/el | after GB/s | after x memcpy | after ns/el | speedup |")
print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for L in (64, 256):
    for t in ("1", "all"):
        for n in sizes:
            if (L, t, n, "base") not in runs:
                continue
            b, a = runs[(L, t, n, "base")], runs[(L, t, n, "new")]
            med = lambda v, i: statistics.median(x[i] for x in v)
            copy = statistics.median([x[3] for x in b + a])
            bus, aus = med(b, 0), med(a, 0)
            print(f"| {L} | {t} | {n} ({len(a)} runs) | {copy:.1f} | {med(b, 1):.2f} | {med(b, 2):.2f} | {bus * 1e3 / n:.2f} "
                  f"| {med(a, 1):.2f} | {med(a, 2):.2f} | {aus * 1e3 / n:.3f} | {bus / aus:.1f}x |")
