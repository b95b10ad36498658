#!/usr/bin/env python3
"""Phases of dctSparseAlltoall / ...Backward from phase_shim.c's records.

  phases.py DIR WARMUPS ITERS   ->  prints one JSON object (per direction:
                                    per-phase medians, us) to stdout

DIR holds phases.<rank>.txt of one dct_perf run (one size). Records per
direction: WARMUPS warm-ups, ITERS timed calls, then dct_perf's 2 checked
steps; only the timed ones are used. For each timed call and rank the
phases are cut at the MPI calls libdct makes (see phase_shim.c):

  local     entry -> first MPI call (forward: select + offsets + zero + pack;
            backward: pack)
  agree     header allgather(s) + their votes, up to the exchange
            (includes waiting for the slowest rank's local work)
  exchange  MPI_Alltoallv of the blocks
  unpack    exchange end -> the exchange vote (decode, scatter into rows)
  vote      the exchange vote (includes waiting for the slowest unpack)
  tail      after the vote (commit, stream end)

Each phase: median over the timed calls of the mean over ranks ("mean"),
and median over calls of the value on the rank whose call took longest
("crit"). "total" is the call as the shim saw it, max over ranks.
"""
import glob
import json
import os
import statistics
import sys

PHASES = ("local", "agree", "exchange", "unpack", "vote", "tail")


def cut(total, events):
    """events: [(name, start, end)] in call order -> dict of phases."""
    names = [e[0] for e in events]
    if "alltoallv" not in names or names[0] != "allgather":
        return None
    x = names.index("alltoallv")
    ex = events[x]
    last = events[-1]
    return {
        "local": events[0][1],
        "agree": ex[1] - events[0][1],
        "exchange": ex[2] - ex[1],
        "unpack": (last[1] - ex[2]) if last is not ex else 0.0,
        "vote": (last[2] - last[1]) if last is not ex else 0.0,
        "tail": total - last[2],
    }


def main():
    d, warm, iters = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    calls = {"F": {}, "B": {}}  # dir -> rank -> [(total, phases)]
    for path in glob.glob(os.path.join(d, "phases.*.txt")):
        for line in open(path):
            f = line.split()
            if len(f) < 5:
                continue
            direction, rank, total = f[0], int(f[1]), float(f[3])
            ev = []
            for tok in f[5:]:
                name, s, e = tok.split(":")
                ev.append((name, float(s), float(e)))
            calls[direction].setdefault(rank, []).append((total, cut(total, ev)))
    out = {}
    for direction, key in (("F", "fwd"), ("B", "bwd")):
        ranks = sorted(calls[direction])
        if not ranks:
            continue
        n = min(len(calls[direction][r]) for r in ranks)
        timed = range(warm, min(warm + iters, n))
        mean = {p: [] for p in PHASES}
        crit = {p: [] for p in PHASES}
        totals = []
        for i in timed:
            recs = [calls[direction][r][i] for r in ranks]
            if any(ph is None for _, ph in recs):
                continue
            for p in PHASES:
                mean[p].append(sum(ph[p] for _, ph in recs) / len(recs))
            slow = max(recs, key=lambda t: t[0])
            for p in PHASES:
                crit[p].append(slow[1][p])
            totals.append(slow[0])
        if not totals:
            continue
        out[key] = {
            "calls": len(totals),
            "total": statistics.median(totals),
            "mean": {p: statistics.median(mean[p]) for p in PHASES},
            "crit": {p: statistics.median(crit[p]) for p in PHASES},
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
