"""GPU check of dct_hook (bench/README.md, device steps): CUDA buckets on an
NCCL process group (a libdct NCCL comm from a broadcast unique id, buffers
stay on the device) and on a gloo group (through host memory). Needs a CUDA
build of torch and of libdct. World size 1 or more:

    python3 tests/python/gpu_hook_check.py                     # one GPU
    mpirun -np 2 -x LIBDCT_LIBRARY -x PYTHONPATH python3 tests/python/gpu_hook_check.py
"""
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

from libdct.launch import init_process_group
from libdct.torch import DctState, dct_hook


def train(backend_group, hook_state, hook, dtype, steps=6):
    torch.manual_seed(3)
    net = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    net = net.to(device=DEVICE, dtype=dtype)
    ddp = DDP(net, device_ids=[DEVICE], process_group=backend_group, bucket_cap_mb=0.25)
    ddp.register_comm_hook(hook_state, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    g = torch.Generator(device=DEVICE).manual_seed(RANK + 1)
    for _ in range(steps):
        x = torch.randn(32, 256, generator=g, device=DEVICE, dtype=dtype)
        y = torch.randint(0, 10, (32,), generator=g, device=DEVICE)
        opt.zero_grad()
        F.cross_entropy(ddp(x).float(), y).backward()
        opt.step()
    torch.cuda.synchronize()
    return torch.cat([p.detach().float().flatten() for p in ddp.parameters()])


def identical_on_all_ranks(t, group):
    parts = [torch.empty_like(t) for _ in range(SIZE)]
    dist.all_gather(parts, t, group=group)
    return all(torch.equal(parts[0], p) for p in parts)


def momentum_correction(gloo):
    """DGC's momentum correction on CUDA buckets (global top-k, fp32): the
    NCCL group (device buffers, CUDA twin) and the gloo group (host buffers,
    CPU twin) train alike, identical on every rank; the velocities are kept
    and nonzero. The two groups' parameters need not match bit for bit (a
    velocity's last bit may differ between torch's CPU and CUDA kernels and
    move a selection), so their distance is reported and bounded loosely."""
    params = {}
    for group, name in ((None, "nccl"), (gloo, "gloo")):
        state = DctState(process_group=group, density=0.02, min_compression_bytes=0, algorithm="globaltopk",
                         momentum=0.9)
        params[name] = train(group, state, dct_hook, torch.float32)
        assert identical_on_all_ranks(params[name], None), name
        velocities = state.velocities()
        assert velocities and any(u.abs().sum() > 0 for u in velocities.values()), name
        state.close()
    diff = (params["nccl"] - params["gloo"]).abs().max().item()
    assert diff <= 1e-2, diff
    if RANK == 0:
        print(f"momentum correction: nccl and gloo groups train alike (max parameter difference {diff:.3g})", flush=True)


def main():
    global RANK, SIZE, DEVICE
    RANK, SIZE = init_process_group("nccl")
    DEVICE = torch.device("cuda", int(os.environ.get("LOCAL_RANK", RANK)) % torch.cuda.device_count())
    torch.cuda.set_device(DEVICE)
    gloo = dist.new_group(backend="gloo")
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        dense = train(None, None, default_hooks.allreduce_hook, dtype)
        for group, name in ((None, "nccl"), (gloo, "gloo")):
            state = DctState(process_group=group, density=1.0, min_compression_bytes=0)
            exact = train(group, state, dct_hook, dtype)
            assert state.comm.device_buffers == (name == "nccl"), name
            tol = 1e-5 if dtype == torch.float32 else 2e-2
            assert torch.allclose(exact, dense, rtol=tol, atol=tol), (name, dtype, (exact - dense).abs().max())
            state.close()
            for compressor in ("topk", "onebit"):
                state = DctState(process_group=group, density=0.02, min_compression_bytes=0, compressor=compressor)
                params = train(group, state, dct_hook, dtype)
                assert torch.isfinite(params).all() and identical_on_all_ranks(params, None), (name, dtype)
                assert SIZE == 1 or state.bytes_sent < state.dense_bytes
                if RANK == 0:
                    print(f"{name} {dtype} {compressor}: ok, {state.bytes_sent} of {state.dense_bytes} bytes, "
                          f"{state.rebuilds} rebuilds", flush=True)
                state.close()
    momentum_correction(gloo)
    if RANK == 0:
        print(f"gpu hook check passed at {SIZE} ranks on {torch.cuda.get_device_name(DEVICE)}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
