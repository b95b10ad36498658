"""PyTorch under libdct_nccl_preload.so, unmodified NCCL backend (GPU only).

    LD_PRELOAD=build/src/libdct_nccl_preload.so DCT_DEBUG=INFO \
        python3 examples/preload/torch_ddp.py [--steps 200]

World size 1 unless launched by torchrun. Checks, in order:
  1. all_reduce of a 4M-element fp32 tensor is intercepted: at world size 1
     dense NCCL returns the input itself, libdct its first compressed step,
     i.e. exactly the entries at or above the threshold, zeros elsewhere
     (about DCT_DENSITY of them, default 1%);
  2. all_reduce of a 1000-element tensor is exact (below the 1 MiB minimum);
  3. a short DDP training loop of an MLP on a synthetic task runs to the end
     and its loss falls.
Without the shim (or with DCT_PRELOAD=0) check 1 reports "dense" and the
script says the shim is not active. See bench/README.md, GPU steps."""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=200)
parser.add_argument("--count", type=int, default=4 << 20)
args = parser.parse_args()

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29533")
os.environ.setdefault("RANK", "0")
os.environ.setdefault("WORLD_SIZE", "1")
local = int(os.environ.get("LOCAL_RANK", 0))
torch.cuda.set_device(local)
dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
dev = torch.device("cuda", local)
gen = torch.Generator(device=dev).manual_seed(1234 + rank)

# 1. A large allreduce.
x = torch.randn(args.count, device=dev, generator=gen)
y = x.clone()
dist.all_reduce(y)
torch.cuda.synchronize()
if world == 1:
    if torch.equal(y, x):
        print("large all_reduce: dense (identical to the input): the shim is not active")
    else:
        kept = y != 0
        density = kept.float().mean().item()
        exact = torch.equal(y[kept], x[kept])
        # Threshold selection: every kept |x| is at least every dropped one.
        separated = x[kept].abs().min().item() >= x[~kept].abs().max().item()
        print(f"large all_reduce: compressed, {density:.4%} of entries kept, "
              f"kept values exact: {exact}, kept >= dropped: {separated}")
        assert exact and separated and 0.001 < density < 0.05
else:
    print(f"large all_reduce over {world} ranks: {(y != 0).float().mean().item():.4%} nonzero")

# 2. A small allreduce stays exact.
s = torch.randn(1000, device=dev, generator=gen)
t = s.clone()
dist.all_reduce(t)
if world == 1:
    assert torch.equal(t, s), "small all_reduce must be exact"
print("small all_reduce: exact" if world == 1 else "small all_reduce: done")

# 3. DDP on a synthetic 10-class problem (a fixed random teacher).
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                      nn.Linear(1024, 10)).to(dev)
ddp = nn.parallel.DistributedDataParallel(model, device_ids=[local])
teacher = nn.Linear(784, 10).to(dev)
opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
losses = []
for step in range(args.steps):
    xb = torch.randn(256, 784, device=dev, generator=gen)
    with torch.no_grad():
        yb = teacher(xb).argmax(1)
    loss = nn.functional.cross_entropy(ddp(xb), yb)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
first, last = sum(losses[:10]) / 10, sum(losses[-10:]) / 10
print(f"DDP: {args.steps} steps, loss {first:.3f} -> {last:.3f}")
assert last < first, "training loss did not fall"
dist.destroy_process_group()
print("done")
