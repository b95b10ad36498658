"""Does dct_hook overlap the backward pass? One rank (or more) of DDP on an
MLP whose backward is long enough to hide communication, timed three ways
on the same model and data, interleaved, medians of --repeats:

  compute   DDP with a hook that hands the bucket back untouched
  comm      the hook's work alone: DDP's own buckets (their sizes,
            parameters and order, recorded in a step of `compute`)
            replayed through dct_hook (Bucket), no backward running
  dct       DDP with dct_hook: overlapped when dct < compute + comm

and, with --trace, a torch.profiler timeline (Chrome JSON) of a few dct
steps, where libdct's kernels run on the state's own stream beside the
backward's. On a GPU (nccl: buffers stay on the device):

    python3 bench/hook_overlap.py --backend nccl --trace OUT/trace.json
On the CPU (gloo) it runs as a smoke test; the numbers mean little there.
"""
import argparse
import json
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from libdct import hook_step
from libdct.launch import init_process_group
from libdct.torch import Bucket, DctState, dct_hook


def args_():
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default="nccl")
    p.add_argument("--width", type=int, default=4096)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--density", type=float, default=0.01)
    p.add_argument("--no-find-unused", dest="find_unused", action="store_false",
                   help="DctState(find_unused_parameters=False): no zero-gradient read-back a bucket")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--bucket-mb", type=float, default=25)
    p.add_argument("--trace", default=None)
    p.add_argument("--out", default=None, help="JSON of the medians")
    p.add_argument("--stream-priority", type=int, default=None,
                   help="the hook's stream priority (libdct.hook_step.STREAM_PRIORITY; torch's 0 or -1)")
    p.add_argument("--switch-interval", type=float, default=None,
                   help="sys.setswitchinterval, seconds: how long a thread waits for the GIL before asking")
    return p.parse_args()


def passthrough(_, bucket):
    fut = torch.futures.Future(devices=[bucket.buffer().device] if bucket.buffer().is_cuda else None)
    fut.set_result(bucket.buffer())
    return fut


class Recorder:
    """A pass-through hook that keeps the last whole step's buckets:
    (index, size, parameters, is_last), in DDP's order."""

    def __init__(self):
        self.buckets, self._step = [], []

    def hook(self, _, bucket):
        self._step.append((bucket.index(), bucket.buffer().numel(), list(bucket.parameters()), bucket.is_last()))
        if bucket.is_last():
            self.buckets, self._step = self._step, []
        return passthrough(None, bucket)


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_steps(ddp, x, y, steps, device):
    sync(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        ddp.zero_grad(set_to_none=False)
        F.mse_loss(ddp(x), y).backward()
    sync(device)
    return (time.perf_counter() - t0) / steps


def main():
    a = args_()
    if a.stream_priority is not None:
        hook_step.STREAM_PRIORITY = a.stream_priority
    if a.switch_interval is not None:
        sys.setswitchinterval(a.switch_interval)
    rank, size = init_process_group(a.backend)
    device = torch.device("cuda", rank % torch.cuda.device_count()) if a.backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    torch.manual_seed(1)
    net = torch.nn.Sequential(*[torch.nn.Linear(a.width, a.width) for _ in range(a.layers)]).to(device)
    x = torch.randn(a.batch, a.width, device=device)
    y = torch.randn(a.batch, a.width, device=device)
    plain = DDP(net, device_ids=[device] if device.type == "cuda" else None, bucket_cap_mb=a.bucket_mb)
    recorder = Recorder()
    plain.register_comm_hook(None, recorder.hook)
    state = DctState(density=a.density, algorithm="allgather", model=net, find_unused_parameters=a.find_unused)
    ddp = DDP(net, device_ids=[device] if device.type == "cuda" else None, bucket_cap_mb=a.bucket_mb)
    ddp.register_comm_hook(state, dct_hook)
    timed_steps(ddp, x, y, 3, device)  # warm-up: DDP re-buckets, compressors made, thresholds estimated
    timed_steps(plain, x, y, 3, device)
    grads = [torch.randn(n, device=device) for _, n, _, _ in recorder.buckets]
    # its own compressors: the DDP state's stay put
    alone = DctState(density=a.density, algorithm="allgather", find_unused_parameters=a.find_unused)
    times = {"compute": [], "comm": [], "dct": []}
    for _ in range(a.repeats):
        times["compute"].append(timed_steps(plain, x, y, a.steps, device))
        times["dct"].append(timed_steps(ddp, x, y, a.steps, device))
        sync(device)
        t0 = time.perf_counter()
        for _ in range(a.steps):  # the hook's work alone, on DDP's buckets
            futures = [dct_hook(alone, Bucket(i, g.clone(), ps, last))
                       for (i, _, ps, last), g in zip(recorder.buckets, grads)]
            torch.futures.wait_all(futures)
        sync(device)
        times["comm"].append((time.perf_counter() - t0) / a.steps)
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    med["serial_ms"] = med["compute"] + med["comm"]
    med["hidden_fraction"] = max(0.0, min(1.0, (med["serial_ms"] - med["dct"]) / med["comm"])) if med["comm"] else 0
    if a.trace and rank == 0:
        from torch.profiler import ProfilerActivity, profile
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
        with profile(activities=acts) as prof:
            timed_steps(ddp, x, y, 3, device)
        prof.export_chrome_trace(a.trace)
    if rank == 0:
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
        print(f"{size} rank(s) on {name}, {a.backend}, {len(recorder.buckets)} buckets, stream priority "
              f"{hook_step.STREAM_PRIORITY}, switch interval {sys.getswitchinterval() * 1e3:g} ms: "
              f"compute {med['compute']:.2f} ms, hook alone {med['comm']:.2f} ms, "
              f"DDP + dct_hook {med['dct']:.2f} ms (serial would be {med['serial_ms']:.2f}); "
              f"{100 * med['hidden_fraction']:.0f}% of the hook's time hidden", flush=True)
        if a.out:
            with open(a.out, "w") as f:
                json.dump({"device": name, "ranks": size, "args": vars(a), "median_ms": med,
                           "samples_s": times}, f, indent=1)
    state.close()
    alone.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
