"""Nothing lost, nothing overflowed (mpirun, 1-4 ranks): with
find_unused_parameters and a layer skipped on odd steps, applied means plus
residuals equal the gradient sums; without find_unused_parameters a used
parameter whose gradient is zero everywhere sends its residual (with it,
keeps it), and the setting follows the DDP model's; a parameter whose
bucket goes dense keeps
its residual (sent in the dense allreduce); the dense path divides before it
sums (fp16 values near the top of its range on every rank stay finite);
buckets on other devices are refused on every rank with a clear error."""
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from harness import finish, raises, run_cases, start
from libdct import Config
from libdct.torch import Bucket, DctState, dct_hook
from test_hook import assert_nothing_lost, drive, note, recording


class Branchy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.skipped, self.b = torch.nn.Linear(32, 64), torch.nn.Linear(64, 64), torch.nn.Linear(64, 10)
        self.step = 0

    def forward(self, x):
        x = torch.relu(self.a(x))
        if self.step % 2 == 0:  # the middle layer sits out odd steps on every rank
            x = torch.relu(self.skipped(x))
        return self.b(x)


def case_unused_parameters_keep_their_residual():
    torch.manual_seed(5)
    net = Branchy()
    # tau estimated every step: the skipped layer's residual alone would be sent
    config = Config(threshold_interval=1, threshold_method="exact")
    state, record = DctState(density=0.3, min_compression_bytes=0, algorithm="allgather", config=config), {}
    ddp = DDP(net, find_unused_parameters=True, bucket_cap_mb=0.01)
    skipped = {id(p) for p in net.skipped.parameters()}  # DDP drops their results on odd steps
    ddp.register_comm_hook(state, recording(state, record, lambda p: net.step % 2 == 1 and id(p) in skipped))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(RANK + 1)
    for step in range(6):
        net.step = step
        opt.zero_grad()
        F.cross_entropy(ddp(torch.randn(8, 32, generator=g)), torch.randint(0, 10, (8,), generator=g)).backward()
        opt.step()
    assert_nothing_lost(state, record)
    state.close()


class Gated(torch.nn.Module):
    """A layer every step uses, its gradient exactly zero once the gate closes."""

    def __init__(self):
        super().__init__()
        self.a, self.gated = torch.nn.Linear(32, 64), torch.nn.Linear(64, 10)
        self.gate = 1.0

    def forward(self, x):
        return self.gated(torch.relu(self.a(x))) * self.gate


def case_without_unused_parameters_a_zero_gradient_is_sent():
    config = Config(threshold_interval=1, threshold_method="exact")
    left = {}
    for detect in (True, False):
        torch.manual_seed(7)
        net = Gated()
        ddp = DDP(net, bucket_cap_mb=0.01)  # find_unused_parameters=False: every parameter has a gradient
        inferred = DctState(model=ddp)
        assert inferred.find_unused_parameters is False, "the DDP model's setting"
        inferred.close()
        state, record = DctState(density=0.3, min_compression_bytes=0, algorithm="allgather", config=config,
                                 find_unused_parameters=detect), {}
        ddp.register_comm_hook(state, recording(state, record))
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
        g = torch.Generator().manual_seed(RANK + 1)
        for step in range(6):
            net.gate = 1.0 if step == 0 else 0.0  # from step 1 the gated layer's gradient is 0 on every rank
            opt.zero_grad()
            F.cross_entropy(ddp(torch.randn(8, 32, generator=g)), torch.randint(0, 10, (8,), generator=g)).backward()
            opt.step()
            if step == 0:
                first = state.residuals()[id(net.gated.weight)].clone()
        assert_nothing_lost(state, record)
        left[detect] = state.residuals().get(id(net.gated.weight), torch.zeros_like(first))
        state.close()
        if detect:  # held: zero on every rank, so a missed step, which DDP would drop
            assert torch.equal(left[detect], first), "with detection the zero-gradient layer keeps its residual"
    assert left[False].abs().sum() < 0.5 * first.abs().sum(), "without detection the residual is sent"
    state = DctState(model=DDP(Gated(), find_unused_parameters=True))
    assert state.find_unused_parameters is True
    state.close()
    err = raises(lambda: DctState(model=DDP(Gated(), find_unused_parameters=True), find_unused_parameters=False),
                 ValueError)
    assert err is not None and "residuals" in str(err), err
    if SIZE > 1:  # agreed: a rank that differs fails every rank
        err = raises(lambda: DctState(find_unused_parameters=RANK == 0), RuntimeError)
        assert err is not None and "find_unused_parameters" in str(err), err


def case_a_bucket_that_goes_dense_sends_its_residual():
    params = [torch.nn.Parameter(torch.zeros(n)) for n in (300, 40)]
    state, record = DctState(density=0.05, min_compression_bytes=1000), {}
    for step, layout in enumerate([[[0, 1]], [[0, 1]], [[0], [1]], [[0], [1]]]):
        outs = drive(state, layout, params, step, torch.float32)  # [1] alone: 160 bytes, dense
        for b, out in zip(layout, outs):
            held = [params[j] for j in b]
            note(record, held, torch.cat([p.grad for p in held]), 0)
            note(record, held, out, 1)
    residuals = state.residuals()
    assert id(params[1]) not in residuals, "parameter 1 went dense: its residual should have been sent"
    assert_nothing_lost(state, record)
    state.close()


def case_the_dense_path_divides_before_it_sums():
    if SIZE == 1:
        return
    p = torch.nn.Parameter(torch.zeros(64, dtype=torch.float16))
    state = DctState(min_compression_bytes=1 << 30)
    out = dct_hook(state, Bucket(0, torch.full((64,), 40000.0, dtype=torch.float16), [p], True)).wait()
    assert torch.isfinite(out).all() and (out.float() - 40000).abs().max() <= 32, out[:4]  # the sum alone is inf
    state.close()


def case_other_devices_are_refused_everywhere():
    state = DctState(density=0.05, min_compression_bytes=0)
    p = torch.nn.Parameter(torch.zeros(16))
    buf = torch.zeros(16, device="meta") if RANK == 0 else torch.zeros(16)
    err = raises(lambda: dct_hook(state, Bucket(0, buf, [p], True)).wait(), RuntimeError)
    assert err is not None, "the bucket should fail on every rank"
    if RANK == 0:
        assert "CPU and CUDA" in str(err), err
    state.close()


def main():
    global RANK, SIZE
    RANK, SIZE = start()
    import test_hook
    test_hook.RANK, test_hook.SIZE = RANK, SIZE

    def sum_over_ranks(t):
        t = t.clone()
        dist.all_reduce(t)
        return t
    test_hook.sum_over_ranks = sum_over_ranks
    run_cases(globals())
    finish()


if __name__ == "__main__":
    main()
