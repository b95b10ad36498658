#!/usr/bin/env python3
"""dct_perf rows with bound and phase columns -> markdown tables + gnuplot data.

usage: e2e_report.py DIR   (reads DIR/*.json written by collect_e2e.sh;
writes DIR/tables.md and DIR/<name>.dat, one per JSON file)
"""
import glob
import json
import os
import sys

PHASES = ["compress", "agree", "exchange", "reduce", "other"]
TITLES = {"shm2": "2 ranks, shared memory", "shm4": "4 ranks on 2 cores, shared memory",
          "netem4": "4 ranks on 2 cores, 1 Gbit/s shaped links (tc tbf), -l 1"}
SWEEPS = {"size": "time vs size, density 1%", "density": "64 MiB, time vs density",
          "grid": "every size to 16 MiB at every density"}


def speedup_matrix(md, rows):
    """Auto's speedup over dense MPI, sizes down, densities across."""
    densities = sorted({r["density"] for r in rows})
    cell = {(r["size"], r["density"]): r for r in rows}
    md.write("Speedup of libdct (auto) over dense MPI_Allreduce, the algorithm auto ran:\n\n")
    md.write("| size (B) | " + " | ".join(f"{d:g}" for d in densities) + " |\n")
    md.write("|---:|" + "---:|" * len(densities) + "\n")
    for size in sorted({r["size"] for r in rows}):
        md.write(f"| {size} | " + " | ".join(
            f"{cell[size, d]['speedup']:.2f}x {cell[size, d]['algo']}" if (size, d) in cell else "-"
            for d in densities) + " |\n")
    md.write("\n")


def main():
    out = sys.argv[1]
    with open(os.path.join(out, "tables.md"), "w") as md:
        for path in sorted(glob.glob(os.path.join(out, "*.json"))):
            name = os.path.basename(path)[:-5]
            net, sweep = name.split("_")
            with open(path) as f:
                rows = [json.loads(line) for line in f if line.strip()]
            md.write(f"### {TITLES[net]}, {SWEEPS[sweep]}\n\n")
            md.write("| size (B) | density | algo | dense ms | libdct ms | speedup | ratio | bound ms | x bound "
                     "| compress | agree | exchange | reduce | other |\n")
            md.write("|---:|---:|:--|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
            with open(os.path.join(out, name + ".dat"), "w") as dat:
                dat.write("# size density dense_us dct_us bound_us wire_bound_us memory_bound_us "
                          + " ".join(PHASES) + "\n")
                for r in rows:
                    ph = r["phase_us"]
                    xb = r["dct_us"] / r["bound_us"] if r["bound_us"] > 0 else 0
                    md.write(f"| {r['size']} | {r['density']:g} | {r['algo']} | {r['dense_us']/1e3:.3f} "
                             f"| {r['dct_us']/1e3:.3f} | {r['speedup']:.2f}x | {r['ratio']:.1f}x "
                             f"| {r['bound_us']/1e3:.3f} | {xb:.2f} | "
                             + " | ".join(f"{ph[p]/1e3:.3f}" for p in PHASES) + " |\n")
                    dat.write(f"{r['size']} {r['density']} {r['dense_us']} {r['dct_us']} {r['bound_us']} "
                              f"{r['wire_bound_us']} {r['memory_bound_us']} "
                              + " ".join(str(ph[p]) for p in PHASES) + "\n")
            first = rows[0] if rows else {}
            if sweep == "grid":
                md.write("\n")
                speedup_matrix(md, rows)
            md.write(f"\n{first.get('iters', '?')} iterations after {first.get('warmups', '?')} warm-ups; "
                     "times in ms: medians of the per-iteration max over ranks; phases: mean over ranks of "
                     "each rank's median (they add up to a rank's own time, not to the max over ranks).\n\n")


if __name__ == "__main__":
    main()
