"""DctState(momentum=m), DGC's momentum correction, at 1-4 ranks (mpirun):
the velocities follow u = m u + g with factor masking where the residual
(less global top-k's owner residual) reads 0, or without it, bit for bit
against a plain reference; the compressors' input is the velocity (sent + residuals =
velocities summed); dense parameters get torch's SGD momentum; a resumed
iteration whose unit spans buckets masks alike; a version-2 checkpoint
loads with momentum 0 only; bad settings are refused."""
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

import harness
from harness import raises
from libdct import Config
from libdct.torch import Bucket, DctState, dct_hook
from test_hook import model

RANK = SIZE = None  # set by harness.main
M = 0.9
NUMELS = (3000, 96, 64)  # at 1 KB min_compression_bytes: [0, 1] compressed, [2] dense


def sum_over_ranks(t):
    t = t.clone()
    dist.all_reduce(t)
    return t


def drive(state, layout, params, step):
    """One iteration of buckets (lists of parameter indices): the local
    gradients and {index: the bucket's result}."""
    g = torch.Generator().manual_seed(step * 10 + RANK)
    grads = [torch.randn(n, generator=g) for n in NUMELS]
    futures = [dct_hook(state, Bucket(i, torch.cat([grads[j] for j in b]), [params[j] for j in b],
                                      i == len(layout) - 1)) for i, b in enumerate(layout)]
    out = {}
    for b, f in zip(layout, futures):
        out.update(zip(b, f.wait().split([NUMELS[j] for j in b])))
    return grads, out


def worker_residuals(state, held_back):
    """{key: residual} less the owner residuals (global top-k); held_back[0]
    counts the owner residuals' nonzeros."""
    r = state.residuals()
    for u in state._owned.units.by_keys.values():
        begin, length = u.compressor.owner_range()
        if length:
            owner = u.compressor.get_owner_residual(torch.empty(length)).cpu()
            held_back[0] += int((owner != 0).sum())
            flat = torch.cat([r[k] for k in u.keys])
            flat[begin:begin + length] -= owner
            r.update(zip(u.keys, flat.split(list(u.numels))))
    return r


def case_velocities_follow_dgc():
    for algorithm, masking in (("allgather", True), ("globaltopk", True), ("allgather", False)):
        params = [torch.nn.Parameter(torch.zeros(n)) for n in NUMELS]
        config = Config(threshold_interval=1)
        state = DctState(density=0.05, min_compression_bytes=1024, algorithm=algorithm, config=config, momentum=M,
                         momentum_masking=masking, model=torch.nn.ParameterList(params))
        ref = [torch.zeros(n) for n in NUMELS]
        sent = [torch.zeros(n, dtype=torch.float64) for n in NUMELS]   # velocities in, summed over steps
        applied = [torch.zeros(n, dtype=torch.float64) for n in NUMELS]
        held_back = [0]
        for step in range(6):
            grads, out = drive(state, [[0, 1], [2]], params, step)
            inputs = [ref[j].mul(M).add_(grads[j]) for j in (0, 1)]
            mean = sum_over_ranks(grads[2]) / SIZE
            assert torch.allclose(out[2], ref[2] * M + mean, rtol=1e-5, atol=1e-6), (out[2] - ref[2] * M - mean).abs().max()
            ref[2] = out[2].clone()
            residual, velocity = worker_residuals(state, held_back), state.velocities()
            for j in (0, 1):
                sent[j] += inputs[j].double()
                applied[j] += out[j].double()
                ref[j] = inputs[j].masked_fill(residual[j] == 0, 0) if masking else inputs[j]
                assert torch.equal(velocity[j], ref[j]), (algorithm, step, j)
            assert torch.equal(velocity[2], ref[2]), (algorithm, step)
            assert (residual[0] == 0).any() and ref[0].any(), "some entries should be sent, not all"
            assert masking == bool((ref[0] == 0).any()), "masking zeroes the sent entries' velocities, or none"
        # Owners hold back part of a range's sum past 4 ranks (their target is 4k/P, the union up to k):
        # there a sent entry's residual reads 0 only without the owner's.
        if algorithm == "globaltopk" and SIZE > 4:
            assert sum_over_ranks(torch.tensor([held_back[0]])).item() > 0, "no owner held anything back"
        total = state.residuals()
        for j in (0, 1):
            balance = SIZE * applied[j] + sum_over_ranks(total[j].double())
            assert torch.allclose(balance, sum_over_ranks(sent[j]), rtol=1e-5, atol=1e-5), algorithm
        state.close()


def train(ddp, steps, momentum):
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=momentum)
    g = torch.Generator().manual_seed(1 + RANK)
    for _ in range(steps):
        opt.zero_grad()
        F.cross_entropy(ddp(torch.randn(16, 32, generator=g)), torch.randint(0, 10, (16,), generator=g)).backward()
        opt.step()
    return torch.cat([p.detach().flatten() for p in ddp.parameters()])


def case_dense_parameters_get_sgd_momentum():
    want = train(model(hook_state=dist.group.WORLD, hook=default_hooks.allreduce_hook), 6, M)
    state = DctState(min_compression_bytes=1 << 30, momentum=M)
    got = train(model(hook_state=state), 6, 0)
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-6), (got - want).abs().max()
    state.close()
    # Density 1 sends every entry whole: masking zeroes every velocity, which is plain SGD.
    want = train(model(hook_state=dist.group.WORLD, hook=default_hooks.allreduce_hook), 6, 0)
    state = DctState(density=1.0, min_compression_bytes=0, momentum=M)
    got = train(model(hook_state=state), 6, 0)
    assert torch.allclose(got, want, rtol=1e-5, atol=1e-6), (got - want).abs().max()
    assert all(not u.any() for u in state.velocities().values())
    state.close()


def case_a_resumed_unit_that_spans_buckets_masks_alike():
    params = [torch.nn.Parameter(torch.zeros(n)) for n in NUMELS]
    net = torch.nn.ParameterList(params)
    states = [DctState(density=0.05, min_compression_bytes=0, momentum=M, model=net) for _ in range(2)]
    drive(states[0], [[0, 1, 2]], params, 0)
    saved = states[0].state_dict()
    _, want = drive(states[0], [[0, 1, 2]], params, 1)
    states[1].load_state_dict(saved)
    _, got = drive(states[1], [[2, 1], [0]], params, 1)  # the saved unit [0, 1, 2] runs with the last bucket
    for j in range(len(NUMELS)):
        assert torch.equal(got[j], want[j]), (j, (got[j] - want[j]).abs().max())
    mine, theirs = states[1].velocities(), states[0].velocities()
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)
    for s in states:
        s.close()


def case_a_version_2_checkpoint_loads_with_momentum_0():
    params = [torch.nn.Parameter(torch.zeros(n)) for n in NUMELS]
    net = torch.nn.ParameterList(params)
    old = DctState(density=0.05, min_compression_bytes=0, model=net)
    drive(old, [[0, 1, 2]], params, 0)
    saved = old.state_dict()
    del saved["velocity"], saved["settings"]["momentum"], saved["settings"]["momentum_masking"]  # version 2's
    saved["version"] = 2
    fresh = DctState(density=0.05, min_compression_bytes=0, model=net)
    fresh.load_state_dict(saved)
    _, want = drive(old, [[0, 1, 2]], params, 1)
    _, got = drive(fresh, [[0, 1, 2]], params, 1)
    assert all(torch.equal(got[j], want[j]) for j in want)
    corrected = DctState(density=0.05, min_compression_bytes=0, model=net, momentum=M)
    err = raises(lambda: corrected.load_state_dict(saved), RuntimeError)
    assert err is not None and "momentum" in str(err), err
    for s in (old, fresh, corrected):
        s.close()


def case_bad_settings_are_refused():
    for kwargs in ({"momentum": 1.0}, {"momentum": -0.1}, {"momentum": 0.9, "compressor": "onebit"}):
        err = raises(lambda: DctState(**kwargs), ValueError)
        assert err is not None and "momentum" in str(err), (kwargs, err)
    for kwargs in ({"wire_type": "fp16"}, {"config": Config(wire_type="bf16")}):
        err = raises(lambda: DctState(momentum=M, **kwargs), ValueError)
        assert err is not None and "wire type" in str(err), (kwargs, err)
    os.environ["DCT_WIRE_TYPE"] = "fp16"  # read by the state's comm, at its creation
    try:
        state = DctState(momentum=M, min_compression_bytes=0)
    finally:
        del os.environ["DCT_WIRE_TYPE"]
    p = torch.nn.Parameter(torch.zeros(300))
    err = raises(lambda: dct_hook(state, Bucket(0, torch.ones(300), [p], True)).wait(), RuntimeError)
    assert err is not None and "wire type" in str(err), err
    state.close()
    if SIZE > 1:
        err = raises(lambda: DctState(momentum=M if RANK == 0 else 0.0), RuntimeError)
        assert err is not None and "momentum" in str(err) and "global rank(s) [1" in str(err), err
        err = raises(lambda: DctState(momentum=M, momentum_masking=RANK == 0), RuntimeError)
        assert err is not None and "momentum_masking" in str(err), err


if __name__ == "__main__":
    harness.main(globals())
