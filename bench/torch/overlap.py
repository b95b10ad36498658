"""Does dct_hook overlap communication with the backward pass? Per-step
medians, side by side in one run, of: compute alone (DDP with a hook that
communicates nothing), communication alone (the same buckets through the
hook with no backward running), and the full step. hidden = compute + comm -
step, the part of the communication the backward pass covered.

    mpirun -np 4 --oversubscribe -x LIBDCT_LIBRARY -x PYTHONPATH \\
        /usr/bin/python3 bench/torch/overlap.py [--hook dct|allreduce] [--density 0.01]
"""
import argparse
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

from libdct.launch import init_process_group
from libdct.torch import Bucket, DctState, dct_hook


def net(width, depth):
    """depth layers of width x width: most of the backward runs after the
    first buckets are ready, so there is something to overlap."""
    torch.manual_seed(0)
    layers = [torch.nn.Linear(784, width), torch.nn.ReLU()]
    for _ in range(depth - 1):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, 10))


def silent_hook(_, bucket):
    done = torch.futures.Future()
    done.set_result(bucket.buffer())
    return done


def step_times(ddp, steps, batch, rank):
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(rank)
    times = []
    for _ in range(steps):
        x, y = torch.randn(batch, 784, generator=g), torch.randint(0, 10, (batch,), generator=g)
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad()
        F.cross_entropy(ddp(x), y).backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hook", choices=("dct", "allreduce"), default="dct")
    ap.add_argument("--density", type=float, default=0.01)
    ap.add_argument("--algorithm", default="allgather", help="dct: libdct's exchange (dense: wire-bound)")
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--bucket-mb", type=float, default=4)
    a = ap.parse_args()
    rank, size = init_process_group("gloo")
    if a.hook == "dct":
        state, hook = DctState(density=a.density, algorithm=a.algorithm), dct_hook
    else:
        state, hook = dist.new_group(), default_hooks.allreduce_hook

    compute = DDP(net(a.width, a.depth), bucket_cap_mb=a.bucket_mb)
    compute.register_comm_hook(None, silent_hook)
    t_compute = step_times(compute, a.steps, a.batch, rank)

    full = DDP(net(a.width, a.depth), bucket_cap_mb=a.bucket_mb)
    full.register_comm_hook(state, hook)
    t_full = step_times(full, a.steps, a.batch, rank)

    kept = []
    probe = DDP(net(a.width, a.depth), bucket_cap_mb=a.bucket_mb)

    def keeping(_, bucket):
        kept.append(Bucket(bucket.index(), bucket.buffer().clone(), bucket.parameters(), bucket.is_last()))
        return silent_hook(_, bucket)
    probe.register_comm_hook(None, keeping)
    step_times(probe, 2, a.batch, rank)  # DDP re-buckets after its first step: keep the second's
    kept = kept[len(kept) // 2:]
    t_comm = []
    for _ in range(a.steps):
        dist.barrier()
        t0 = time.perf_counter()
        for f in [hook(state, b) for b in kept]:
            f.wait()
        t_comm.append(time.perf_counter() - t0)

    skip = max(1, a.steps // 5)  # first steps: allocation, re-bucketing, the tuner's exploration
    c, m, s = (statistics.median(t[skip:]) * 1e3 for t in (t_compute, t_comm, t_full))
    hidden = c + m - s
    if rank == 0:
        params = sum(p.numel() for p in full.parameters())
        print(f"hook={a.hook} density={a.density} algorithm={a.algorithm} ranks={size} params={params} buckets={len(kept)} "
              f"threads={torch.get_num_threads()} "
              f"batch={a.batch}: compute {c:.1f} ms, comm {m:.1f} ms, step {s:.1f} ms, "
              f"hidden {hidden:.1f} ms ({100 * hidden / m if m > 0 else 0:.0f}% of comm)", flush=True)
    if a.hook == "dct":
        state.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
