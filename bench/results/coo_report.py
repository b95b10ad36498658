#!/usr/bin/env python3
"""Tables (tables.md) and gnuplot data (<where>.dat) from collect_coo.sh's JSON lines."""
import json
import sys
from pathlib import Path

# Issue 35's targets at 4 ranks, 1 Gbit/s, 16M fp32, uniform input: ms by density.
TARGETS = {0.001: 4.3, 0.01: 58.0, 0.1: 500.0}


def rows(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def table(where, data):
    out = [f"### {where}", "",
           "| density | indices | plan asked | plan run | dense MPI ms | libdct ms | allgather+scatter ms "
           "| vs dense | vs allgather+scatter | wire KB/rank | bound ms | x bound | #wrong | target |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in data:
        ms = r["dct_us"] / 1e3
        target = ""
        if where.startswith("netem") and r["indices"] == "uniform" and r["algo_requested"] == "auto":
            goal = TARGETS.get(r["density"])
            slower = ms > r["dense_us"] / 1e3
            if goal:
                target = f"{'met' if ms <= goal else 'missed'} ({goal:g} ms)"
            target += "; slower than dense" if slower else ("; <= dense" if not goal else "")
        out.append(f"| {r['density'] * 100:g}% | {r['indices']} | {r['algo_requested']} | {r['algo']} "
                   f"| {r['dense_us'] / 1e3:.1f} | {ms:.1f} | {r['peer_us'] / 1e3:.1f} "
                   f"| {r['dense_us'] / r['dct_us']:.2f}x | {r['peer_us'] / r['dct_us']:.2f}x "
                   f"| {r['wire_bytes'] / 1024:.0f} | {r['bound_us'] / 1e3:.1f} "
                   f"| {r['dct_us'] / r['bound_us'] if r['bound_us'] else 0:.2f} | {r['wrong']} | {target} |")
    return out + [""]


def main():
    out = Path(sys.argv[1])
    lines = ["# dct_perf -C coo: tables", ""]
    for where in ("netem", "shm", "netem-defaults"):
        path = out / f"{where}.json"
        if not path.exists():
            continue
        data = rows(path)
        lines += table(where, data)
        with open(out / f"{where}.dat", "w") as f:
            f.write("# density dense_ms auto_ms allgather_ms split_ms dense_plan_ms peer_ms zipf_auto_ms\n")
            for d in sorted({r["density"] for r in data}):
                pick = {}
                for r in data:
                    if r["density"] != d:
                        continue
                    key = r["algo_requested"] if r["indices"] == "uniform" else "zipf"
                    pick[key] = r
                auto = pick.get("auto", {})
                cols = [auto.get("dense_us", 0)] + [pick.get(k, {}).get("dct_us", 0)
                                                     for k in ("auto", "allgather", "split", "dense")]
                cols += [auto.get("peer_us", 0), pick.get("zipf", {}).get("dct_us", 0)]
                f.write(f"{d * 100:g} " + " ".join(f"{c / 1e3:.3f}" for c in cols) + "\n")
    (out / "tables.md").write_text("\n".join(lines))


if __name__ == "__main__":
    main()
