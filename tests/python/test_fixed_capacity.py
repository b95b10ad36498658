"""The fixed-capacity mode (Config(capacity_factor=c)) from Python over gloo,
under mpirun at 1-4 ranks: the DDP hook keeps replicas bit-identical and
sends the same bytes every step (each bucket a slot of ceil(c k) entries);
a Compressor's steps, in place and out of place, send fixed bytes and lose
no mass (results + residuals = gradient sums, the capacity overflow kept);
a capacity_factor that differs (or is off) on one rank fails every rank;
Comm.async_error() is None (host buffers fail synchronously)."""
import math

import torch
import torch.distributed as dist
import torch.nn.functional as F

import libdct
from harness import all_true, finish, raises, run_cases, same_on_all_ranks, start
from libdct import Config
from libdct.torch import DctState, dct_hook
from torch.nn.parallel import DistributedDataParallel as DDP

RANK, SIZE = start()


def target_nnz(count, density):
    """k = max(1, round(density * count)), halves away from zero (std::round)."""
    return max(1, math.floor(density * count + 0.5))


def slot_bytes(count, density, factor, value_bytes=4, index_bytes=4):
    """kernels/stream_args.h: a 32-byte header, then capacity indices and
    capacity values, each part padded to 8 bytes."""
    k = target_nnz(count, density)
    capacity = min(count, math.ceil(factor * k))
    pad8 = lambda b: (b + 7) // 8 * 8
    return 32 + pad8(capacity * index_bytes) + pad8(capacity * value_bytes)


def gradient(n, step, dtype=torch.float32):
    g = torch.Generator().manual_seed(100 * step + RANK)
    return torch.randn(n, generator=g).to(dtype)


def sum_over_ranks(t):
    t = t.clone()
    dist.all_reduce(t)
    return t


class Wide(torch.nn.Module):
    """Past DDP's 1 MB first bucket: several buckets of several sizes."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = torch.nn.Linear(32, 1024), torch.nn.Linear(1024, 300), torch.nn.Linear(300, 10)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


def bucket_stats(state):
    found = {}
    for index in range(64):
        s = state.stats(index)
        if s is not None:
            found[index] = s
    return found


def case_hook_replicas_identical_and_bytes_fixed():
    config = Config(capacity_factor=2, threshold_method="sampled", threshold_interval=3)
    state = DctState(density=0.05, min_compression_bytes=0, config=config)
    torch.manual_seed(7)
    ddp = DDP(Wide(), bucket_cap_mb=0.01)
    ddp.register_comm_hook(state, dct_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(1 + RANK)
    sent, per_bucket = [], []
    for step in range(8):
        x, y = torch.randn(16, 32, generator=g), torch.randint(0, 10, (16,), generator=g)
        opt.zero_grad()
        F.cross_entropy(ddp(x), y).backward()
        opt.step()
        params = torch.cat([p.detach().flatten() for p in ddp.parameters()])
        assert same_on_all_ranks(params), step
        assert torch.isfinite(params).all()
        stats = bucket_stats(state)
        assert stats, "no top-K bucket"
        for index, s in stats.items():
            count = s.dense_bytes // 4
            assert s.algorithm == "allgather", (index, s)
            assert s.bytes_sent == slot_bytes(count, 0.05, 2), (index, s.bytes_sent, count)
            assert s.bytes_received == s.bytes_sent * (SIZE - 1)
            assert s.nnz <= math.ceil(2 * target_nnz(count, 0.05))
        per_bucket.append({i: s.bytes_sent for i, s in stats.items()})
        sent.append(state.bytes_sent)
    # DDP re-buckets after its first iteration: from then on every step
    # sends the same bytes, bucket by bucket and in all.
    deltas = [b - a for a, b in zip(sent[1:], sent[2:])]
    assert len(set(deltas)) == 1 and deltas[0] > 0, deltas
    assert all(p == per_bucket[1] for p in per_bucket[1:]), per_bucket
    assert len(per_bucket[-1]) > 1, per_bucket  # several compressors
    assert state.comm.async_error() is None
    state.close()


def case_compressor_fixed_bytes_and_no_mass_lost():
    n, steps = 20011, 6
    with libdct.Comm.from_torch() as comm:
        for dtype, rtype in ((torch.float32, torch.float32), (torch.float64, torch.float64)):
            # capacity_factor 1: the selection often overflows the slot, kept in the residual
            with comm.compressor(n, dtype, density=0.01, capacity_factor=1, threshold_method="sampled",
                                 threshold_interval=2) as c:
                delivered = torch.zeros(n, dtype=torch.float64)
                given = torch.zeros(n, dtype=torch.float64)
                for k in range(steps):
                    grad = gradient(n, k, dtype)
                    given += sum_over_ranks(grad.double())
                    if k % 2:
                        out = c.allreduce(grad.clone(), op="sum")  # in place
                    else:
                        out = c.allreduce(grad, torch.empty_like(grad), op="sum")
                    assert same_on_all_ranks(out), (dtype, k)
                    delivered += out.double()
                    s = c.stats
                    want = slot_bytes(n, 0.01, 1, value_bytes=torch.empty(0, dtype=dtype).element_size())
                    assert (s.step, s.bytes_sent, s.algorithm) == (k + 1, want, "allgather"), (k, s)
                    assert s.nnz <= target_nnz(n, 0.01)
                assert c.stats.total_bytes_sent == steps * want
                residual = c.get_residual(torch.empty(n, dtype=rtype))
                held = sum_over_ranks(residual.double())
                err = (delivered + held - given).abs().max().item()
                assert err < 1e-4, (dtype, err)
        assert comm.async_error() is None
    closed = libdct.Comm.from_torch()
    closed.close()
    assert isinstance(raises(closed.async_error), ValueError)


def case_a_capacity_factor_that_differs_fails_every_rank():
    if SIZE == 1:
        return
    with libdct.Comm.from_torch() as comm:
        for mine in (2.0 if RANK else 3.0, 0.0 if RANK == SIZE - 1 else 2.0):
            with comm.compressor(1000, density=0.05, capacity_factor=mine, threshold_method="sampled") as c:
                err = raises(lambda: c.allreduce(gradient(1000, 0)), libdct.DctError)
                assert err is not None and err.result == 2, err
                assert "capacityFactor" in err.message, err.message
                assert all_true(err is not None)
                assert c.stats.step == 0  # nothing committed
        assert comm.async_error() is None


if __name__ == "__main__":
    run_cases(globals())
    finish()
