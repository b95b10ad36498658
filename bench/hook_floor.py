"""The host time dct_hook spends on a bucket, where the bytes cost little:
--buckets buckets of --count elements (--params parameters each) replayed
through the hook (libdct.torch.Bucket) on the CPU (gloo), medians of
--repeats batches of --steps steps, per bucket; with --phases, where it
goes (prepare, the votes, the collectives, finish, commit) and how many
collectives libdct's step issued through the group. Under mpirun:

    mpirun -np 2 python3 bench/hook_floor.py --phases
"""
import argparse
import collections
import statistics
import time

import torch
import torch.distributed as dist

from libdct import hook_step, hook_work, torch_transport
from libdct.launch import init_process_group
from libdct.torch import Bucket, DctState, dct_hook


def args_():
    p = argparse.ArgumentParser()
    p.add_argument("--count", type=int, default=4096)
    p.add_argument("--buckets", type=int, default=8)
    p.add_argument("--params", type=int, default=4)
    p.add_argument("--density", type=float, default=0.01)
    p.add_argument("--no-find-unused", dest="find_unused", action="store_false",
                   help="DctState(find_unused_parameters=False): no zero-gradient read-back a bucket")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--phases", action="store_true", help="time each phase (adds a little to each)")
    return p.parse_args()


class Meter:
    """Seconds spent in, and calls of, the functions it wraps."""

    def __init__(self):
        self.seconds, self.calls = collections.Counter(), collections.Counter()

    def wrap(self, owner, name, label, timed=True):
        real = getattr(owner, name)

        def measured(*args, **kwargs):
            self.calls[label] += 1
            t0 = time.perf_counter()
            try:
                return real(*args, **kwargs)
            finally:
                if timed:
                    self.seconds[label] += time.perf_counter() - t0
        setattr(owner, name, measured)

    def clear(self):
        self.seconds.clear()
        self.calls.clear()


def main():
    a = args_()
    rank, size = init_process_group("gloo")
    meter = Meter()
    for name in ("all_gather", "all_reduce", "all_to_all_single", "sum_in_place"):
        meter.wrap(torch_transport, name, "libdct's " + name, timed=False)
    if a.phases:
        meter.wrap(hook_step, "vote", "hook votes")
        for name, label in (("__init__", "prepare"), ("exchange", "collectives"), ("finish", "finish"),
                            ("commit", "commit")):
            meter.wrap(hook_work._Work, name, label)
    per = a.count // a.params
    params = [[torch.nn.Parameter(torch.zeros(per)) for _ in range(a.params)] for _ in range(a.buckets)]
    g = torch.Generator().manual_seed(1 + rank)
    grads = [torch.randn(per * a.params, generator=g) for _ in range(a.buckets)]
    state = DctState(density=a.density, algorithm="allgather", min_compression_bytes=0,
                     find_unused_parameters=a.find_unused)

    def step():
        futures = [dct_hook(state, Bucket(i, grad.clone(), ps, i == a.buckets - 1))
                   for i, (grad, ps) in enumerate(zip(grads, params))]
        torch.futures.wait_all(futures)

    for _ in range(10):  # compressors made, thresholds estimated
        step()
    meter.clear()
    samples = []
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        for _ in range(a.steps):
            step()
        samples.append((time.perf_counter() - t0) / (a.steps * a.buckets) * 1e6)
    if rank == 0:
        n = a.repeats * a.steps * a.buckets
        print(f"{size} rank(s), {a.buckets} buckets of {a.count} fp32 ({a.params} parameters), density "
              f"{a.density}: {statistics.median(samples):.0f} us a bucket (batches: "
              f"{' '.join(f'{s:.0f}' for s in samples)})")
        for label in sorted(meter.calls):
            spent = f"{meter.seconds[label] / n * 1e6:8.1f} us" if label in meter.seconds else " " * 11
            print(f"  {label:24s}{spent}  {meter.calls[label] / n:5.2f} calls a bucket")
    state.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
