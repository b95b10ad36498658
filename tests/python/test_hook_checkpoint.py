"""DctState.state_dict() / load_state_dict() into fresh processes (mpirun,
1-4 ranks; checkpoint_roundtrip.sh runs the phases):

  --phase full DIR     8 steps uninterrupted, final parameters saved
  --phase save DIR     4 steps, then model, optimizer and hook state saved
  --phase resume DIR   a fresh process loads them, 4 more steps: the final
                       parameters equal the uninterrupted run's bit for bit;
                       a state that does not fit (settings, model, another
                       rank's file, an older format) fails on every rank,
                       nothing loaded.
DDP re-buckets after its first step in each process, so the resumed run's
first buckets differ from the saved units and dense groups: they keep their
partition (the wide model's biases are dense in one bucket then, in two
after the re-bucketing, on every torch version)."""
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

from harness import finish, raises, start
from libdct import Config
from libdct.torch import DctState
from torch.nn.parallel import DistributedDataParallel as DDP

from test_hook import model

SETTINGS = dict(density=0.05, algorithm="allgather", config=Config(threshold_interval=3))
# (compressor, min_compression_bytes, model, momentum): 1-bit with the biases
# dense too, whose allreduce sums each element in an order set by its place in
# the buffer; top-K whose 32 KB threshold DDP's first buckets in a fresh
# process cross differently than the saved units; with momentum correction
# (velocities saved).
RUNS = (("topk", 0, "mlp", 0), ("onebit", 0, "mlp", 0), ("onebit", 1024, "mlp", 0), ("onebit", 32768, "wide", 0),
        ("topk", 32768, "wide", 0), ("topk", 32768, "wide", 0.9))


class Wide(torch.nn.Module):
    """Over DDP's 1 MB first bucket: rebuilt, its buckets are [5, 4, 3, 2],
    [1], [0] by parameter position; 1 and 3-5 are dense at 32 KB."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = torch.nn.Linear(32, 4100), torch.nn.Linear(4100, 64), torch.nn.Linear(64, 10)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


def wide():
    torch.manual_seed(7)
    return DDP(Wide(), bucket_cap_mb=0.01)


def steps(ddp, opt, first, count):
    for step in range(first, first + count):
        g = torch.Generator().manual_seed(1000 * step + dist.get_rank())
        x, y = torch.randn(16, 32, generator=g), torch.randint(0, 10, (16,), generator=g)
        opt.zero_grad()
        F.cross_entropy(ddp(x), y).backward()
        opt.step()


def setup(compressor, min_bytes, net, momentum):
    ddp = model() if net == "mlp" else wide()
    state = DctState(model=ddp, compressor=compressor, min_compression_bytes=min_bytes, momentum=momentum, **SETTINGS)
    ddp.register_comm_hook(state, __import__("libdct.torch", fromlist=["dct_hook"]).dct_hook)
    return ddp, state, torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0 if momentum else 0.9)


def flat(ddp):
    return torch.cat([p.detach().flatten() for p in ddp.parameters()])


def main():
    rank, size = start()
    phase, folder = sys.argv[sys.argv.index("--phase") + 1], sys.argv[-1]
    for compressor, min_bytes, net, momentum in RUNS:
        path = lambda what, r=rank: os.path.join(folder, f"{net}-{compressor}-{min_bytes}-{momentum}.{what}.rank{r}.pt")
        ddp, state, opt = setup(compressor, min_bytes, net, momentum)
        if phase == "full":
            steps(ddp, opt, 0, 8)
            torch.save(flat(ddp), path("full"))
        elif phase == "save":
            steps(ddp, opt, 0, 4)
            torch.save({"model": ddp.module.state_dict(), "opt": opt.state_dict(), "hook": state.state_dict()},
                       path("ckpt"))
        else:
            saved = torch.load(path("ckpt"))
            misfits = [dict(saved["hook"], settings=dict(saved["hook"]["settings"], density=0.5)),
                       torch.load(path("ckpt", (rank + 1) % size))["hook"] if size > 1 else None,
                       dict(saved["hook"], version=1)]
            for i, bad in enumerate(misfits):  # on one rank only: every rank fails
                if bad is None:
                    continue
                err = raises(lambda: state.load_state_dict(bad if rank == size - 1 else saved["hook"]), RuntimeError)
                assert err is not None and "load_state_dict" in str(err), err
                if rank == size - 1:
                    assert ("density", "group rank", "version 1; this libdct reads (2, 3)")[i] in str(err), err
            ddp.module.load_state_dict(saved["model"])
            opt.load_state_dict(saved["opt"])
            state.load_state_dict(saved["hook"])
            steps(ddp, opt, 4, 4)
            full = torch.load(path("full"))
            assert torch.equal(flat(ddp), full), (net, compressor, min_bytes, (flat(ddp) - full).abs().max())
            if rank == 0:
                print(f"{net}, {compressor}, min_compression_bytes {min_bytes}, momentum {momentum}: resumed run equals the uninterrupted one bit for bit at {size} ranks",
                      flush=True)
        state.close()
    finish()


if __name__ == "__main__":
    main()
