"""libdct.torch.OnebitAdam (mpirun, 1-4 ranks): the warm-up is torch's Adam
(AdamW) on the averaged gradients, bit for bit; the stage switches at
exactly freeze_step; compressed steps keep the replicas bit-identical and
lose nothing (P x the exchanged momentum + the errors' growth = the local
momenta's sum); non-finite gradients skip the step on every rank; settings
that differ and bad inputs fail every rank; DDP with onebit_adam_hook; an
mpi4py communicator."""
import warnings

import torch
import torch.distributed as dist

from harness import all_true, gathered, main, raises, same_on_all_ranks
from libdct.torch import OnebitAdam, onebit_adam_hook

SHAPES = ((37,), (5, 7), (130,), (3,))


def params(dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(s, generator=g).to(dtype)) for s in SHAPES]


def dyadic(p, step, rank):
    """Multiples of 2^-8 below 2 in magnitude: sums over ranks are exact in
    fp32 whatever their order, so an average has one rounding."""
    g = torch.Generator().manual_seed(7919 * step + 104729 * rank + p.numel())
    return (torch.randint(-512, 512, p.shape, generator=g).float() / 256).to(p.dtype)


def noisy(p, step, rank):
    g = torch.Generator().manual_seed(7919 * step + 104729 * rank + p.numel())
    return torch.randn(p.shape, generator=g).to(p.dtype)


def averaged(t):
    """The mean over ranks, summed in rank order (exact for dyadic values)."""
    parts = gathered(t)
    total = parts[0].clone()
    for x in parts[1:]:
        total += x
    return total.div_(SIZE)


def groups_of(ps, lrs=(1e-2, 3e-3), wd=0.0):
    return [{"params": ps[:2], "lr": lrs[0], "weight_decay": wd}, {"params": ps[2:], "lr": lrs[1], "weight_decay": wd}]


def set_grads(ps, step, rank, make=dyadic):
    for p in ps:
        p.grad = make(p, step, rank)


def flat(ps):
    return torch.cat([p.detach().reshape(-1) for p in ps])


def case_warmup_is_torch_adam_bit_for_bit():
    runs = ((torch.optim.Adam, 0.0, {}), (torch.optim.AdamW, 0.1, {}),
            (torch.optim.Adam, 0.1, {"decoupled_weight_decay": False}))
    for ref_class, wd, extra in runs:
        mine, ref = params(), params()
        opt = OnebitAdam(groups_of(mine, wd=wd), freeze_step=4, betas=(0.8, 0.99), **extra)
        ref_opt = ref_class(groups_of(ref, wd=wd), betas=(0.8, 0.99))
        for step in range(4):
            set_grads(mine, step, RANK)
            for p, q in zip(ref, mine):
                p.grad = averaged(q.grad)
            opt.step()
            ref_opt.step()
            assert torch.equal(flat(mine), flat(ref)), (ref_class.__name__, step, (flat(mine) - flat(ref)).abs().max())
        m = torch.cat([ref_opt.state[p]["exp_avg"].reshape(-1) for p in ref])
        v = torch.cat([ref_opt.state[p]["exp_avg_sq"].reshape(-1) for p in ref])
        assert torch.equal(opt.exp_avg, m) and torch.equal(opt.exp_avg_sq, v), ref_class.__name__
        assert opt.compressor.stats.step == 0, "the warm-up ran a compressed exchange"
        opt.close()


def case_without_bias_correction():
    # DeepSpeed's update: no 1 - beta^t anywhere, warm-up and compression stage.
    ps, ref = params(), params()
    lr, (b1, b2), eps = 1e-2, (0.9, 0.99), 1e-8
    opt = OnebitAdam(ps, lr=lr, betas=(b1, b2), eps=eps, freeze_step=2, bias_correction=False)
    m, v = torch.zeros(opt.layout.count), torch.zeros(opt.layout.count)
    for step in range(4):
        set_grads(ps, step, RANK)
        before = flat(ps)
        opt.step()
        if step < 2:
            g = averaged(flat([p.grad for p in ps]))
            m.mul_(b1).add_(g, alpha=1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2)
            assert torch.equal(opt.exp_avg, m) and torch.equal(opt.exp_avg_sq, v), step
        else:
            assert torch.equal(opt.exp_avg_sq, v), step  # frozen
        want = before.clone().addcdiv_(opt.exp_avg, v.sqrt().add_(eps), value=-lr)
        assert torch.equal(flat(ps), want), step
    opt.close()


def case_warmup_on_real_gradients_is_close():
    # The group's sum adds each element's rank values in an order of its own
    # choosing (at 3+ ranks, not rank order): one rounding's difference.
    mine, ref = params(), params()
    opt, ref_opt = OnebitAdam(groups_of(mine), freeze_step=3), torch.optim.Adam(groups_of(ref))
    for step in range(3):
        set_grads(mine, step, RANK, noisy)
        for p, q in zip(ref, mine):
            p.grad = averaged(q.grad)
        opt.step()
        ref_opt.step()
    assert torch.allclose(flat(mine), flat(ref), rtol=1e-6, atol=1e-7), (flat(mine) - flat(ref)).abs().max()
    if SIZE <= 2:
        assert torch.equal(flat(mine), flat(ref))
    opt.close()


def case_stage_switch_and_identical_replicas():
    for exchange, wd in (("momentum", 0.0), ("preconditioned", 0.0), ("momentum", 0.1)):
        stage_switch(exchange, wd)


def stage_switch(exchange, wd):
    ps = params()
    lr, betas, eps, freeze = 1e-2, (0.9, 0.999), 1e-8, 3
    opt = OnebitAdam(ps, lr=lr, betas=betas, eps=eps, weight_decay=wd, freeze_step=freeze, exchange=exchange)
    for step in range(freeze + 4):
        assert opt.compressing == (step >= freeze), step
        set_grads(ps, step, RANK, noisy)
        before, v_before = flat(ps), opt.exp_avg_sq.clone()
        opt.step()
        assert opt.compressor.stats.step == max(0, step + 1 - freeze), (step, opt.compressor.stats.step)
        assert same_on_all_ranks(flat(ps)) and same_on_all_ranks(opt.exp_avg), step
        if step >= freeze:  # the variance is frozen; the update is the method's, bias correction included
            assert torch.equal(opt.exp_avg_sq, v_before), step
            t = step + 1
            denom = (v_before.sqrt() / (1 - betas[1] ** freeze) ** 0.5).add_(eps)
            if exchange == "momentum":  # AdamW's decay first, as in the warm-up
                want = before.clone().mul_(1 - lr * wd).addcdiv_(opt.exp_avg, denom, value=-lr / (1 - betas[0] ** t))
            else:  # the exchanged m / denom is the direction; the momentum is kept as direction * denom
                want = before.clone().add_(opt._send, alpha=-lr / (1 - betas[0] ** t))
                assert torch.equal(opt.exp_avg, opt._send * denom)
            assert torch.equal(flat(ps), want), (exchange, step)
    opt.close()


def case_nothing_lost_in_the_exchange():
    for exchange, l2, per_tensor in (("momentum", 0.0, True), ("preconditioned", 0.0, True), ("momentum", 0.1, True),
                                     ("momentum", 0.0, False)):
        nothing_lost(exchange, l2, per_tensor)


def nothing_lost(exchange, l2, per_tensor):
    """l2: Adam's (not decoupled) weight decay, which goes into the local momentum."""
    ps = params()
    beta1, steps = 0.9, 5
    opt = OnebitAdam(ps, lr=1e-3, betas=(beta1, 0.999), freeze_step=1, exchange=exchange, weight_decay=l2,
                     decoupled_weight_decay=False, per_tensor_scales=per_tensor)
    set_grads(ps, 0, RANK, noisy)
    opt.step()  # warm-up
    inputs = torch.zeros(opt.layout.count, dtype=torch.float64)
    outputs = torch.zeros_like(inputs)
    for step in range(1, 1 + steps):
        set_grads(ps, step, RANK, noisy)
        grad = flat([p.grad for p in ps]).add(flat(ps), alpha=l2) if l2 else flat([p.grad for p in ps])
        local = torch.mul(opt.exp_avg, beta1).add_(grad, alpha=1 - beta1)
        if exchange == "preconditioned":
            local.div_(opt._frozen_denominator())
        inputs += sum(x.double() for x in gathered(local))
        opt.step()
        outputs += SIZE * opt._send.double()  # what the exchange delivered
    worker = opt.compressor.get_residual(torch.zeros(opt.layout.count))
    begin, server = opt.compressor.server_error()
    servers = torch.zeros(opt.layout.count)
    servers[begin:begin + len(server)] = torch.from_numpy(server)
    errors = sum(x.double() for x in gathered(worker)) + SIZE * sum(x.double() for x in gathered(servers))
    scale = inputs.abs().max().item()
    assert errors.abs().max() > 0 or SIZE == 1, "no error feedback at all?"
    gap = (outputs + errors - inputs).abs().max().item()
    assert gap <= 2e-6 * scale * steps, (exchange, gap, scale)
    opt.close()


def case_per_tensor_scales():
    """A tensor of tiny gradients keeps momenta of its own size with a scale
    per tensor; with one scale for the flat buffer it is sent at the large
    tensors' scale. Replicas stay identical either way."""
    sizes = {}
    for per_tensor in (True, False):
        ps = params()
        opt = OnebitAdam(ps, lr=1e-3, freeze_step=1, per_tensor_scales=per_tensor)
        for step in range(4):
            set_grads(ps, step, RANK, noisy)
            ps[3].grad.mul_(1e-4)  # the small tensor of 3
            opt.step()
            assert same_on_all_ranks(flat(ps)) and same_on_all_ranks(opt._send), (per_tensor, step)
        small = opt._send[opt.layout.offsets[3]:].abs().max().item()
        large = opt._send[:opt.layout.offsets[3]].abs().max().item()
        sizes[per_tensor] = small / large
        opt.close()
    assert sizes[True] < 1e-2 and sizes[False] > 1e-1, sizes


def case_checkpoint_with_one_scale_resumes_with_one_scale():
    """A state saved with one scale (per_tensor_scales=False, or before the
    option) loads into a per-tensor optimizer and continues as it was saved."""
    a, b = params(), params()
    one = OnebitAdam(a, freeze_step=2, per_tensor_scales=False)
    for step in range(4):
        set_grads(a, step, RANK, noisy)
        one.step()
    saved = one.state_dict()
    with torch.no_grad():
        for p, q in zip(b, a):
            p.copy_(q)
    per = OnebitAdam(b, freeze_step=2)
    per.load_state_dict(saved)
    for step in range(4, 7):
        set_grads(a, step, RANK, noisy)
        set_grads(b, step, RANK, noisy)
        one.step()
        per.step()
        assert torch.equal(flat(a), flat(b)), step
    one.close()
    per.close()


def case_nonfinite_gradient_skips_every_rank():
    for freeze in (5, 1):  # in the warm-up, then in the compression stage
        ps = params()
        opt = OnebitAdam(ps, freeze_step=freeze)
        set_grads(ps, 0, RANK, noisy)
        opt.step()
        kept = (flat(ps), opt.exp_avg.clone(), opt.exp_avg_sq.clone(), opt.compressor.save_state(), opt.step_count)
        set_grads(ps, 1, RANK, noisy)
        if RANK == SIZE - 1:
            ps[2].grad[5] = float("nan")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            opt.step()
        assert any("not finite" in str(w.message) for w in caught), [str(w.message) for w in caught]
        now = (flat(ps), opt.exp_avg, opt.exp_avg_sq, opt.compressor.save_state(), opt.step_count)
        assert all(torch.equal(a, b) if torch.is_tensor(a) else a == b for a, b in zip(kept, now)), freeze
        assert opt.skipped_steps == 1
        set_grads(ps, 2, RANK, noisy)
        opt.step()  # the next step runs
        assert opt.step_count == 2 and same_on_all_ranks(flat(ps))
        opt.close()
    ps = params()
    opt = OnebitAdam(ps, freeze_step=1, nonfinite="raise")
    set_grads(ps, 0, RANK, noisy)
    if RANK == 0:
        ps[0].grad[0] = float("inf")
    err = raises(opt.step, RuntimeError)
    assert err is not None and "not finite" in str(err), err
    opt.close()


def case_settings_that_differ_fail_every_rank():
    if SIZE == 1:
        return
    err = raises(lambda: OnebitAdam(params(), freeze_step=4 if RANK == SIZE - 1 else 3), RuntimeError)
    assert err is not None and "freeze_step differs" in str(err), err
    assert f"[{SIZE - 1}]" in str(err), err
    err = raises(lambda: OnebitAdam(params(), freeze_step=3, per_tensor_scales=RANK != 0), RuntimeError)
    assert err is not None and "settings differs" in str(err), err
    # arguments refused on one rank only: that rank's error there, every rank fails
    bad = [({"freeze_step": 0 if RANK == SIZE - 1 else 3}, "freeze_step must be"),
           ({"freeze_step": 3, "params": [torch.nn.Parameter(torch.zeros(3, device="meta"))] + params()
             if RANK == SIZE - 1 else params()}, "one device")]
    for kwargs, why in bad:
        kwargs.setdefault("params", params())
        err = raises(lambda: OnebitAdam(**kwargs), Exception)
        assert err is not None, why
        assert (why if RANK == SIZE - 1 else f"group rank {SIZE - 1} failed") in str(err), err
    ps = params()
    opt = OnebitAdam(ps, freeze_step=2)
    opt.param_groups[0]["lr"] = 0.5 if RANK == 0 else 1e-3  # a scheduler run on one rank only
    set_grads(ps, 0, RANK)
    kept = flat(ps)
    err = raises(opt.step, RuntimeError)
    assert err is not None and "hyperparameters differs" in str(err), err
    assert torch.equal(flat(ps), kept) and opt.step_count == 0
    opt.close()


def case_bad_inputs_are_refused():
    err = raises(lambda: OnebitAdam([{"params": params()}, {"params": []}], freeze_step=1), ValueError)
    assert err is not None and "empty parameter group" in str(err), err
    err = raises(lambda: OnebitAdam([torch.nn.Parameter(torch.zeros(3)), torch.nn.Parameter(torch.zeros(3, device="meta"))],
                                    freeze_step=1), ValueError)
    assert err is not None and "one device" in str(err), err
    err = raises(lambda: OnebitAdam([], freeze_step=1), ValueError)
    assert err is not None, "an empty parameter list"
    err = raises(lambda: OnebitAdam(params(), freeze_step=0), ValueError)
    assert err is not None and "freeze_step" in str(err), err
    ps = params()
    opt = OnebitAdam(ps, freeze_step=1)
    set_grads(ps, 0, RANK)
    if RANK == SIZE - 1:  # on one rank only: every rank fails, nothing changed
        ps[1].grad = ps[1].grad.to_sparse()
    kept = flat(ps)
    err = raises(opt.step, RuntimeError)
    assert err is not None, "a sparse gradient should fail every rank"
    if RANK == SIZE - 1:
        assert "sparse gradients are not supported" in str(err), err
    assert torch.equal(flat(ps), kept) and opt.step_count == 0
    set_grads(ps, 0, RANK)
    opt.step()  # and the optimizer goes on
    assert opt.step_count == 1
    opt.close()


def case_half_parameters_keep_fp32_state():
    for dtype in (torch.float16, torch.bfloat16):
        ps, ref = params(dtype), params()
        opt, ref_opt = OnebitAdam(ps, lr=1e-2, freeze_step=2), OnebitAdam(ref, lr=1e-2, freeze_step=2)
        for step in range(5):
            set_grads(ps, step, RANK)
            for p, q in zip(ref, ps):  # the same gradients (bf16 rounds the dyadic ones): one sign flip
                p.grad = q.grad.float()  # in the 1-bit exchange would cost ~2 lr, far past the rounding
            opt.step()
            ref_opt.step()
        assert torch.equal(opt.exp_avg, ref_opt.exp_avg)  # the fp32 state is the same
        assert opt.exp_avg.dtype == torch.float32 and all(p.dtype == dtype for p in ps)
        assert same_on_all_ranks(flat(ps)) and torch.isfinite(flat(ps).float()).all()
        tol = 2e-2 if dtype == torch.bfloat16 else 2e-3
        assert torch.allclose(flat(ps).float(), flat(ref), atol=tol, rtol=tol), (flat(ps).float() - flat(ref)).abs().max()
        opt.close()
        ref_opt.close()


def case_entries_without_gradient_keep_still():
    # A parameter whose warm-up gradients were all exactly zero has zero
    # variance: signs cannot send its zero momentum, so the mask holds it still
    # (unmasked it would move by lr * scale / eps in a step).
    for exchange in ("momentum", "preconditioned"):
        ps = params()
        opt = OnebitAdam(ps, lr=1e-3, freeze_step=2, exchange=exchange)
        for step in range(5):
            set_grads(ps, step, RANK, noisy)
            ps[1].grad.zero_()
            ps[1].grad[0, 0] = 0.0 if step < 2 else 1.0  # a gradient only once frozen: masked all the same
            kept = ps[1].detach().clone()
            opt.step()
            assert torch.equal(ps[1].detach(), kept), (exchange, step)
        assert same_on_all_ranks(flat(ps))
        opt.close()


def case_a_scheduler_sets_the_rate():
    ps = params()
    opt = OnebitAdam(ps, lr=1e-2, freeze_step=1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda epoch: [1.0, 0.0][min(epoch, 1)])
    set_grads(ps, 0, RANK)
    opt.step()
    sched.step()
    kept = flat(ps)
    set_grads(ps, 1, RANK)
    opt.step()  # lr 0 in the compression stage: the momentum moves, the parameters do not
    assert opt.param_groups[0]["lr"] == 0.0 and torch.equal(flat(ps), kept)
    opt.close()


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.a, self.b = torch.nn.Linear(12, 16), torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def case_ddp_hook_averages_then_steps_aside():
    from torch.nn.parallel import DistributedDataParallel as DDP
    ddp = DDP(Net())
    opt = OnebitAdam(ddp.parameters(), lr=1e-2, freeze_step=2)
    ddp.register_comm_hook(opt, onebit_adam_hook)
    for step in range(5):
        g = torch.Generator().manual_seed(100 * step + RANK)
        opt.zero_grad()
        ddp(torch.randn(8, 12, generator=g)).square().mean().backward()
        grads = flat([p.grad for p in ddp.parameters()])
        if step < 2:
            assert same_on_all_ranks(grads), f"step {step}: the warm-up's gradients are averaged"
        elif SIZE > 1:
            assert not all_true(same_on_all_ranks(grads)), f"step {step}: compression-stage gradients stay local"
        opt.step()
        assert not opt.average_gradients  # the hook averages in the warm-up
        assert same_on_all_ranks(flat(ddp.parameters())), step
    assert opt.compressor.stats.step == 3
    opt.close()


def case_mpi4py_communicator_gives_the_same_bits():
    from mpi4py import MPI
    a, b = params(), params()
    over_mpi, over_group = OnebitAdam(a, freeze_step=2, mpi_comm=MPI.COMM_WORLD), OnebitAdam(b, freeze_step=2)
    for step in range(5):
        set_grads(a, step, RANK)
        set_grads(b, step, RANK)
        over_mpi.step()
        over_group.step()
    assert torch.equal(flat(a), flat(b)) and same_on_all_ranks(flat(a))
    over_mpi.close()
    over_group.close()


if __name__ == "__main__":
    main(globals())
