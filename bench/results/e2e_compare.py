#!/usr/bin/env python3
"""Two collect_e2e.sh sweeps side by side: every row's speedup over dense MPI
and the algorithm auto ran, how many rows are at >= 0.95x of dense, and the
T1/T2 rows (64 MiB, 1%: 4 ranks on 1 Gbit/s links; 2 ranks, shared memory).

usage: e2e_compare.py BEFORE_DIR AFTER_DIR [> comparison.md]
"""
import glob
import json
import os
import sys

FLOOR = 0.95
SETTINGS = {"shm2": "2 ranks, shm", "shm4": "4 ranks, shm", "netem4": "4 ranks, 1 Gbit/s"}


def rows(folder):
    out = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        net, sweep = os.path.basename(path)[:-5].split("_")
        for line in open(path):
            if line.strip():
                r = json.loads(line)
                out[(net, sweep, r["size"], r["density"])] = r
    return out


def size_text(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"


def main():
    before, after = rows(sys.argv[1]), rows(sys.argv[2])
    keys = sorted(set(before) & set(after), key=lambda k: (list(SETTINGS).index(k[0]), k[1], k[2], k[3]))
    print(f"Rows compared: {len(keys)}. Speedup = dense MPI time / libdct time, each measured in its own run.\n")
    for label, data in (("before", before), ("after", after)):
        ok = sum(data[k]["speedup"] >= FLOOR for k in keys)
        # Below the floor on the dense plan is the agreement's cost, not a choice; the rest are auto's misses.
        chosen = sum(data[k]["speedup"] < FLOOR and data[k]["algo"] != "dense" for k in keys)
        print(f"* {label}: **{ok} of {len(keys)}** rows at >= {FLOOR}x of dense; below it, {len(keys) - ok - chosen} "
              f"ran the dense plan all along and {chosen} ran a sparse plan or switched (mixed)")
    ratios = sorted(after[k]["dct_us"] / before[k]["dct_us"] for k in keys)
    print(f"* libdct time after / before, over the rows: median {ratios[len(ratios) // 2]:.2f}, "
          f"quartiles {ratios[len(ratios) // 4]:.2f}-{ratios[3 * len(ratios) // 4]:.2f}")
    print("\n## T1 and T2 (64 MiB, 1%)\n")
    print("| row | before ms | before x_bound | after ms | after x_bound | dense ms (before / after) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for net, sweep in (("netem4", "size"), ("netem4", "density"), ("shm2", "size"), ("shm2", "density")):
        k = (net, sweep, 64 << 20, 0.01)
        if k in before and k in after:
            b, a = before[k], after[k]
            print(f"| {SETTINGS[net]}, {sweep} sweep | {b['dct_us'] / 1e3:.1f} | {b['dct_us'] / b['bound_us']:.2f} | "
                  f"{a['dct_us'] / 1e3:.1f} | {a['dct_us'] / a['bound_us']:.2f} | "
                  f"{b['dense_us'] / 1e3:.1f} / {a['dense_us'] / 1e3:.1f} |")
    print("\n## Every row\n")
    print("| setting | sweep | size | density | before | after | after / before (time) |")
    print("| --- | --- | ---: | ---: | --- | --- | ---: |")
    for k in keys:
        b, a = before[k], after[k]
        mark = lambda r: ("**" if r["speedup"] < FLOOR else "") + f"{r['speedup']:.2f}x {r['algo']}" + (
            "**" if r["speedup"] < FLOOR else "")
        print(f"| {SETTINGS[k[0]]} | {k[1]} | {size_text(k[2])} | {k[3]:g} | {mark(b)} | {mark(a)} | "
              f"{a['dct_us'] / b['dct_us']:.2f} |")


if __name__ == "__main__":
    main()
