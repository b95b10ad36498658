"""libdct.torch.dct_hook under DDP (gloo) at 1-4 ranks: identical replicas,
density 1 equals allreduce_hook up to summation order, no gradient mass lost
(applied + residuals = gradient sum, across DDP's re-bucketing), fp16 and
bf16 buckets, small buckets and start_iter pass through, and a rank whose
settings differ, or whose callback fails, fails every rank. Launched by
mpirun, or with --spawn N through torch.multiprocessing."""
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

from libdct.torch import Bucket, DctState, dct_hook


class Net(torch.nn.Module):
    """Small MLP in a few DDP buckets."""

    def __init__(self, dtype=torch.float32):
        super().__init__()
        self.fc1 = torch.nn.Linear(32, 96).to(dtype)
        self.fc2 = torch.nn.Linear(96, 64).to(dtype)
        self.fc3 = torch.nn.Linear(64, 10).to(dtype)

    def forward(self, x):
        # Computed in fp32 whatever the parameters' type (CPU torch has no
        # half matmul); the gradients come back in the parameters' type.
        for fc in (self.fc1, self.fc2):
            x = torch.relu(F.linear(x, fc.weight.float(), fc.bias.float()))
        return F.linear(x, self.fc3.weight.float(), self.fc3.bias.float())


def model(dtype=torch.float32, hook_state=None, hook=dct_hook, group=None):
    torch.manual_seed(7)
    ddp = DDP(Net(dtype), bucket_cap_mb=0.01, process_group=group)
    if hook_state is not None:
        ddp.register_comm_hook(hook_state, hook)
    return ddp


def train(ddp, steps, lr=0.05):
    opt = torch.optim.SGD(ddp.parameters(), lr=lr)
    g = torch.Generator().manual_seed(1 + dist.get_rank())
    for _ in range(steps):
        x, y = torch.randn(16, 32, generator=g), torch.randint(0, 10, (16,), generator=g)
        opt.zero_grad()
        F.cross_entropy(ddp(x), y).backward()
        opt.step()
    return torch.cat([p.detach().float().flatten() for p in ddp.parameters()])


def case_replicas_stay_identical():
    for compressor in ("topk", "onebit"):
        state = DctState(density=0.05, min_compression_bytes=0, compressor=compressor)
        ddp = model(hook_state=state)
        params = train(ddp, 8)
        assert same_on_all_ranks(params), compressor
        assert torch.isfinite(params).all()
        units = state._owned.units.by_keys
        assert sorted(k for keys in units for k in keys) == sorted(id(p) for p in ddp.parameters())
        if compressor == "onebit":  # one exchange per bucket, a 1-bit scale per parameter (segments)
            assert any(len(keys) > 1 for keys in units), list(units)
        assert state.bytes_sent < state.dense_bytes or SIZE == 1
        state.close()
    # 1-bit: parameters under min_compression_bytes (the biases) go dense, together.
    state = DctState(min_compression_bytes=1024, compressor="onebit")
    ddp = model(hook_state=state)
    params = train(ddp, 3)
    weights = sorted(id(fc.weight) for fc in (ddp.module.fc1, ddp.module.fc2, ddp.module.fc3))
    assert same_on_all_ranks(params) and sorted(k for keys in state._owned.units.by_keys for k in keys) == weights
    state.close()


def case_density_one_equals_allreduce_hook():
    dense = train(model(hook_state=dist.group.WORLD, hook=default_hooks.allreduce_hook), 6)
    state = DctState(density=1.0, min_compression_bytes=0)
    ours = train(model(hook_state=state), 6)
    assert torch.allclose(ours, dense, rtol=1e-5, atol=1e-6), (ours - dense).abs().max()
    state.close()


def note(record, params, flat, which):
    """Adds each parameter's slice of flat to record[id(p)][which] (0:
    local gradients, 1: applied means), in fp64."""
    for p, piece in zip(params, flat.split([p.numel() for p in params])):
        entry = record.setdefault(id(p), [torch.zeros(p.numel(), dtype=torch.float64)] * 2)
        entry[which] = entry[which] + piece.double()


def recording(state, record, dropped=lambda p: False):
    """dct_hook, noting each parameter's local gradient and the applied mean
    (zero for the parameters DDP drops this step: dropped(p))."""
    def hook(st, bucket):
        params = bucket.parameters()
        note(record, params, bucket.buffer(), 0)

        def applied(fut):
            kept = torch.cat([torch.zeros(p.numel()) if dropped(p) else piece.double()
                              for p, piece in zip(params, fut.value().split([p.numel() for p in params]))])
            note(record, params, kept, 1)
            return fut.value()
        return dct_hook(st, bucket).then(applied)
    return hook


def assert_nothing_lost(state, record):
    residuals = state.residuals()
    for pid, (grads, applied) in record.items():
        r = residuals.get(pid)
        r = torch.zeros_like(grads) if r is None else r.double()
        total = sum_over_ranks(grads)
        balance = SIZE * applied + sum_over_ranks(r)
        assert torch.allclose(balance, total, rtol=1e-5, atol=1e-5), (balance - total).abs().max()


def case_no_gradient_mass_is_lost_through_ddp():
    # Global top-k: the owners' held-back sums are in the residuals too.
    for algorithm in ("allgather", "globaltopk"):
        state, record = DctState(density=0.02, min_compression_bytes=0, algorithm=algorithm), {}
        ddp = model(hook_state=state, hook=recording(state, record))
        train(ddp, 7)  # DDP re-buckets after the first step: residuals move along
        assert_nothing_lost(state, record)
        state.close()


def drive(state, layout, params, step, dtype):
    """One iteration of hand-made buckets: layout lists parameter indices per bucket."""
    g = torch.Generator().manual_seed(step * 10 + RANK)
    for p in params:
        p.grad = torch.randn(p.numel(), generator=g).to(dtype)
    buckets = [[params[j] for j in b] for b in layout]
    futures = [dct_hook(state, Bucket(i, torch.cat([p.grad for p in b]), b, i == len(layout) - 1))
               for i, b in enumerate(buckets)]
    return [f.wait() for f in futures]


def case_rebuckets_move_residuals_and_half_buckets():
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        params = [torch.nn.Parameter(torch.zeros(n, dtype=dtype)) for n in (300, 77, 1000, 5)]
        state, record = DctState(density=0.05, min_compression_bytes=0), {}
        before, after = [[0, 1], [2, 3]], [[3, 2], [0], [1]]
        for step in range(6):
            layout = before if step < 3 else after
            outs = drive(state, layout, params, step, dtype)
            for b, out in zip(layout, outs):
                assert out.dtype == dtype and same_on_all_ranks(out)
                held = [params[j] for j in b]
                note(record, held, torch.cat([p.grad for p in held]), 0)
                note(record, held, out, 1)
        assert state.rebuilds == 3, state.rebuilds
        if dtype == torch.float32:  # half inputs: the rounding of the output is not in the residual
            assert_nothing_lost(state, record)
        state.close()


def case_bytes_sent_counts_every_step_read_late_or_each_step():
    """The units' byte counts are read lazily (a device's statistics wait
    for the step): read once at the end, or after every step, or after
    close, bytes_sent is the sum of each step's bytes."""
    totals, steps = [], []
    for read_each_step in (True, False):  # split: the bytes a rank sends vary from step to step
        state = DctState(density=0.05, min_compression_bytes=0, algorithm="split")
        ddp = model(hook_state=state)
        for _ in range(5):
            before = state.bytes_sent if read_each_step else None
            train(ddp, 1)
            if read_each_step:
                steps.append(state.bytes_sent - before)
                units = [state.stats(i) for i in range(64)]
                assert steps[-1] == sum(u.bytes_sent for u in units if u is not None), steps
        totals.append(state.bytes_sent)
        state.close()
        assert state.bytes_sent == totals[-1]
    assert len(set(steps)) > 1 or SIZE == 1, steps  # so a count read a step late would show
    assert totals[0] == totals[1] == sum(steps), (totals, steps)


def case_small_buckets_and_start_iter_pass_through():
    dense = train(model(hook_state=dist.group.WORLD, hook=default_hooks.allreduce_hook), 4)
    state = DctState(density=0.01, min_compression_bytes=1 << 30)
    ours = train(model(hook_state=state), 4)
    assert torch.allclose(ours, dense, rtol=1e-5, atol=1e-6) and not state._owned.units.by_keys
    assert state.bytes_sent == state.dense_bytes
    state.close()
    state = DctState(density=0.01, min_compression_bytes=0, start_iter=3)
    train(model(hook_state=state), 3)
    assert not state._owned.units.by_keys and state.iter == 3
    train(model(hook_state=state), 1)
    assert state._owned.units.by_keys
    state.close()


def backward_error(state):
    try:
        train(model(hook_state=state), 2)
    except RuntimeError as e:
        return str(e)
    return None


def case_a_rank_that_differs_fails_every_rank():
    """At creation every rank agrees the settings: one digest, then the field."""
    if SIZE == 1:
        return
    for field, mine, theirs in (("density", 0.02, 0.01), ("wire_type", None, "fp16"), ("start_iter", 0, 2),
                                ("min_compression_bytes", 0, 1024), ("compressor", "topk", "onebit")):
        kwargs = {"min_compression_bytes": 0, field: mine if RANK == 0 else theirs}
        err = raises(lambda: DctState(**kwargs), RuntimeError)
        assert err is not None and field in str(err) and "global rank(s) [1" in str(err), err


def case_a_setting_changed_on_one_rank_fails_the_bucket_everywhere():
    if SIZE == 1:
        return
    state = DctState(density=0.05, min_compression_bytes=0)
    ddp = model(hook_state=state)
    train(ddp, 1)
    if RANK == SIZE - 1:
        state.min_compression_bytes = 1 << 30  # this rank alone would go dense
    err = raises(lambda: train(ddp, 1), RuntimeError)
    assert err is not None and "min_compression_bytes" in str(err), err
    state.min_compression_bytes = 1 << 30  # agreed again: steps go on
    train(ddp, 1)
    state.close()


def case_a_failed_callback_reaches_every_rank():
    if SIZE == 1:
        return
    state = DctState(density=0.05, min_compression_bytes=0, algorithm="allgather")
    if RANK == 0:
        # The header allgather: every step has one (small buckets' messages
        # ride in it, with no allgatherv).
        state.comm.transport.inject_failure("allgather", after=1)
    err = backward_error(state)
    assert err is not None and "libdct" in err, err
    state.close()


def main():
    global RANK, SIZE, same_on_all_ranks, sum_over_ranks, raises
    from harness import finish, raises, run_cases, same_on_all_ranks, start
    RANK, SIZE = start()

    def sum_over_ranks(t):
        t = t.clone()
        dist.all_reduce(t)
        return t
    run_cases(globals())
    finish()


def spawned(rank, size):
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(size))
    main()


if __name__ == "__main__":
    if "--spawn" in sys.argv:  # the torch.multiprocessing launcher
        import torch.multiprocessing as mp
        n = int(sys.argv[sys.argv.index("--spawn") + 1])
        mp.spawn(spawned, args=(n,), nprocs=n)
    else:
        main()
