#!/usr/bin/env python3
"""Per-epoch table of the runs in raw/: bytes per step per rank (train.py's
JSON) and, from rank 0's DCT_DEBUG=TRACE log, the algorithm each step ran
(ranks plan alike) and what auto measured.

    summarize.py RUN [RUN...]   # labels of raw/<label>.json + raw/<label>.trace.gz
"""
import gzip
import json
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ALGO = {1: "allgather", 2: "dense", 3: "split", 4: "global top-k"}
SHORT = {"allgather": "ag", "dense": "d", "split": "s", "global top-k": "g"}
SLOT = {0: "allgather", 1: "dense", 2: "split", 3: "global top-k"}
STEP = re.compile(r"step (\d+): nnz \d+ tau \S+ algo (\d+) chunks of \d+; ms: compress (\S+) agree (\S+) "
                  r"exchange (\S+) reduce (\S+) total ([0-9.]+)")
TOOK = re.compile(r"auto: slot (\d) took (\d+) us \(model (\d+)(, cold)?\)")


def load(label):
    with open(os.path.join(HERE, "raw", label + ".json")) as f:
        run = json.load(f)
    per_epoch = run["steps_per_epoch"]
    steps, took = {}, {}
    with gzip.open(os.path.join(HERE, "raw", label + ".trace.gz"), "rt", errors="replace") as f:
        for line in f:
            m = STEP.search(line)
            if m:
                # Training steps in order: DDP rebuilds its bucket after the
                # first step, so the hook's compressor (and its step count)
                # starts over once.
                steps[len(steps) + 1] = (int(m.group(2)), float(m.group(4)), float(m.group(7)))
                continue
            m = TOOK.search(line)
            if m and not m.group(4):
                # learned at the step after the one it times: the next step line's number
                took.setdefault(len(steps) + 1, []).append((int(m.group(1)), float(m.group(2)) / 1e3))
    epochs = []
    for row in run["epochs"]:
        e = row["epoch"]
        lo, hi = (e - 1) * per_epoch + 1, e * per_epoch
        algos = [steps[s][0] for s in range(lo, hi + 1) if s in steps]
        agree = [steps[s][1] for s in range(lo, hi + 1) if s in steps]
        samples = {}
        for s in range(lo, hi + 1):
            for slot, ms in took.get(s, []):
                samples.setdefault(SLOT[slot], []).append(ms)
        epochs.append({
            "epoch": e, "kb": row["bytes_per_step_per_rank"] / 1e3, "seconds": row["seconds"],
            "acc": row["test_accuracy"], "traced": len(algos),
            "mix": {ALGO[a]: algos.count(a) for a in sorted(set(algos))},
            "agree_ms": statistics.median(agree) if agree else None,
            "sample_ms": {k: statistics.median(v) for k, v in samples.items()},
        })
    return run, epochs


def mix(m, traced):
    return " / ".join(f"{SHORT[k]} {m[k]}" for k in ("allgather", "dense", "split", "global top-k") if k in m) + \
        ("" if traced == 234 else f" (of {traced})")


def main(labels):
    runs = {label: load(label) for label in labels}
    n = max(len(e) for _, e in runs.values())
    print("Bytes per step per rank (KB = 1000 B), per epoch:")
    print()
    print("| epoch | " + " | ".join(labels) + " |")
    print("| ---: | " + " | ".join("---:" for _ in labels) + " |")
    for i in range(n):
        cells = [f"{runs[l][1][i]['kb']:.1f}" if i < len(runs[l][1]) else "" for l in labels]
        print(f"| {i + 1} | " + " | ".join(cells) + " |")
    auto = [l for l in labels if runs[l][0]["algorithm"] == "auto"]
    if auto:
        print()
        print("Steps by algorithm, per epoch of 234 (ag allgather, d dense, s split; rank 0's trace):")
        print()
        print("| epoch | " + " | ".join(auto) + " |")
        print("| ---: | " + " | ".join("---" for _ in auto) + " |")
        for i in range(n):
            cells = [mix(runs[l][1][i]["mix"], runs[l][1][i]["traced"]) if i < len(runs[l][1]) else "" for l in auto]
            print(f"| {i + 1} | " + " | ".join(cells) + " |")
    print()
    print("| run | KB/step (mean of epochs) | s/epoch (epochs 2..) | test acc. (last) | last algorithm |")
    print("| --- | ---: | ---: | ---: | --- |")
    for l in labels:
        run, ep = runs[l]
        kb = statistics.mean(e["kb"] for e in ep)
        sec = statistics.mean(e["seconds"] for e in ep[1:]) if len(ep) > 1 else ep[0]["seconds"]
        print(f"| {l} | {kb:.1f} | {sec:.1f} | {100 * ep[-1]['acc']:.2f}% | "
              f"{ALGO.get(run.get('libdct_last_algorithm'), run.get('libdct_last_algorithm'))} |")
    if auto:
        print()
        print("What auto learned: per epoch, the median warm sample (ms) the tuner took for each plan that ran "
              "(the slowest rank's time; before: whole steps, after: without the wait for late ranks).")
        print()
        print("| epoch | " + " | ".join(auto) + " |")
        print("| ---: | " + " | ".join("---" for _ in auto) + " |")
        for i in range(n):
            cells = []
            for l in auto:
                e = runs[l][1][i] if i < len(runs[l][1]) else None
                cells.append(" / ".join(f"{SHORT[k]} {e['sample_ms'][k]:.0f}" for k in ("allgather", "dense", "split")
                                        if e and k in e["sample_ms"]))
            print(f"| {i + 1} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
