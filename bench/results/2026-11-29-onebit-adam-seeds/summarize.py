"""README.md's tables and the loss curves' data from the runs' JSON files:
    python3 bench/results/2026-11-29-onebit-adam-seeds/summarize.py > table.md
    gnuplot bench/results/2026-11-29-onebit-adam-seeds/curves.gp
Per task and optimizer: the final metric and train loss over the seeds
(mean, sample standard deviation, each seed) and bytes per rank; from
timing/ (timing.sh), seconds per epoch on shared memory and 1 Gbit/s links."""
import glob
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OPTIMIZERS = ("adam", "onebit-adam", "adam-onebit-gradients", "onebit-adam-preconditioned", "onebit-adam-freeze30")
WINDOW = 25  # steps in the curves' moving mean


def runs(folder, task, opt):
    found = []
    for path in sorted(glob.glob(f"{folder}/{task}-{opt}-seed*.json")):
        with open(path) as f:
            found.append(json.load(f))
    return found


def spread(values, fmt):
    if not values:
        return "-"
    mean = statistics.fmean(values)
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{fmt(mean)} ± {fmt(sd)}"


def compressed_bytes_per_step(r):
    """Bytes per step and rank after the warm-up: the whole run's count less
    the warm-up's dense buckets (the hook allreduces each one whole)."""
    steps, dense_step = r["steps"], r["dense_bytes_total"] / r["steps"]
    if r["optimizer"] != "onebit_adam":
        return r["bytes_sent_total"] / steps
    warm = min(r["freeze_step"], steps)
    return (r["bytes_sent_total"] - warm * dense_step) / (steps - warm)


def table(task):
    rows, base = [], None
    for opt in OPTIMIZERS:
        rs = runs(HERE, task, opt)
        if not rs:
            continue
        metric = rs[0]["metric"]
        finals = [r["epochs"][-1][metric] for r in rs]
        scale = (lambda v: f"{100 * v:.2f}%") if metric == "test_accuracy" else (lambda v: f"{v:.4f}")
        total = statistics.fmean(r["bytes_sent_total"] for r in rs)
        stage = statistics.fmean(compressed_bytes_per_step(r) for r in rs)
        base = base or (total, stage)
        rows.append([opt, rs[0]["described"].split(" (")[0], str(len(rs)), spread(finals, scale),
                     ", ".join(scale(v) for v in finals),
                     spread([statistics.fmean(r["epochs"][-1]["step_losses"][-50:]) for r in rs],
                            lambda v: f"{v:.4f}"),
                     f"{total / 1e6:.1f} MB", f"{base[0] / total:.1f}x", f"{stage / 1e3:.1f} KB",
                     f"{base[1] / stage:.1f}x", str(all(r["replicas_identical"] for r in rs))])
    name = "test accuracy" if task == "cnn" else "held-out bits/byte"
    head = ["run", "hook", "seeds", f"final {name} (mean ± sd)", "each seed", "train loss, last 50 steps",
            "bytes/rank, whole run", "less than Adam", "bytes/step/rank after warm-up", "less than Adam",
            "replicas identical"]
    out = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    return "\n".join(out + ["| " + " | ".join(r) + " |" for r in rows])


def timing():
    """Epoch 2 (all compression stage) of timing.sh's runs: shared memory
    against 1 Gbit/s, and the wire's bound on the difference: the bytes a
    step puts on each rank's link (a ring allreduce 2 (P - 1) / P of the
    bucket; libdct's count is what it sends) at 125 MB/s."""
    head = ["run", "s/epoch, shm", "s/epoch, 1 Gbit/s", "1 Gbit/s - shm", "bytes/step/rank on the link",
            "wire time/epoch at 1 Gbit/s", "replicas identical"]
    out = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    for opt in OPTIMIZERS:
        pair = [f"{HERE}/timing/cnn-{opt}-{where}.json" for where in ("shm", "netem")]
        if not all(os.path.exists(p) for p in pair):
            continue
        shm, net = (json.load(open(p)) for p in pair)
        e2 = [r["epochs"][1] for r in (shm, net)]
        ring = 2 * (net["ranks"] - 1) / net["ranks"]
        link = e2[1]["bytes_per_step_per_rank"] * (ring if opt == "adam" else 1.0)
        out.append(f"| {opt} | {e2[0]['seconds']:.1f} | {e2[1]['seconds']:.1f} | "
                   f"{e2[1]['seconds'] - e2[0]['seconds']:+.1f} | {link / 1e3:.1f} KB | "
                   f"{link * e2[1]['steps'] / 125e6:.1f} s | {shm['replicas_identical'] and net['replicas_identical']} |")
    return "\n".join(out)


def curves(task):
    """<task>-curves.dat: step, then per optimizer the seeds' mean loss (moving mean over WINDOW steps)."""
    series = []
    for opt in OPTIMIZERS:
        rs = runs(HERE, task, opt)
        if not rs:
            series.append(None)
            continue
        per_seed = [[x for e in r["epochs"] for x in e["step_losses"]] for r in rs]
        n = min(len(s) for s in per_seed)
        mean = [statistics.fmean(s[i] for s in per_seed) for i in range(n)]
        series.append([statistics.fmean(mean[max(0, i - WINDOW + 1):i + 1]) for i in range(n)])
    n = min((len(s) for s in series if s), default=0)
    with open(f"{HERE}/{task}-curves.dat", "w") as f:
        f.write("# step " + " ".join(OPTIMIZERS) + f" (seeds' mean train loss, moving mean over {WINDOW} steps)\n")
        for i in range(n):
            f.write(f"{i + 1} " + " ".join(f"{s[i]:.5f}" if s else "nan" for s in series) + "\n")


for task in ("cnn", "lm"):
    print(f"### {task}\n\n{table(task)}\n")
    curves(task)
print(f"### time per epoch (CNN, epoch 2)\n\n{timing()}\n")
sys.stdout.flush()
