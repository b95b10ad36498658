"""OnebitAdam.state_dict() / load_state_dict() into fresh processes (mpirun,
1-4 ranks; CHECKPOINT_SCRIPT=test_onebit_adam_checkpoint.py
checkpoint_roundtrip.sh runs the phases):

  --phase full DIR     8 steps uninterrupted (3 of warm-up), final state saved
  --phase save DIR     2 steps (warm-up) and 5 steps (compression stage),
                       parameters and optimizer state saved after each
  --phase resume DIR   fresh processes load them and finish the 8 steps: the
                       parameters, momentum and compressor state equal the
                       uninterrupted run's bit for bit; a state that does
                       not fit (another freeze_step, another rank's file) on
                       one rank fails every rank with nothing changed.
Gradients are local and different on every rank, so the compressor's
worker and server errors carry real state across the checkpoint."""
import os
import sys

import torch
import torch.distributed as dist

from harness import finish, raises, start
from libdct.torch import OnebitAdam

FREEZE, STEPS, SAVES = 3, 8, (2, 5)


def make():
    g = torch.Generator().manual_seed(11)
    ps = [torch.nn.Parameter(torch.randn(n, generator=g)) for n in (300, 41, 7)]
    groups = [{"params": ps[:1], "weight_decay": 0.01}, {"params": ps[1:], "lr": 3e-3}]
    return ps, OnebitAdam(groups, lr=1e-2, freeze_step=FREEZE)


def steps(ps, opt, first, last):
    for step in range(first, last):
        g = torch.Generator().manual_seed(1000 * step + dist.get_rank())
        for p in ps:
            p.grad = torch.randn(p.shape, generator=g)
        opt.step()


def snapshot(ps, opt):
    """Parameters, momentum and both errors (the compressor's whole state
    also holds timings, which differ between runs)."""
    errors = [opt.compressor.get_residual(torch.zeros(opt.layout.count)), torch.from_numpy(opt.compressor.server_error()[1])]
    return {"params": [p.detach().clone() for p in ps], "exp_avg": opt.exp_avg.clone(), "errors": errors}


def same(a, b):
    return all(torch.equal(x, y) for x, y in zip(a["params"], b["params"])) and \
        torch.equal(a["exp_avg"], b["exp_avg"]) and all(torch.equal(x, y) for x, y in zip(a["errors"], b["errors"]))


def main():
    rank, size = start()
    phase, folder = sys.argv[sys.argv.index("--phase") + 1], sys.argv[-1]
    path = lambda what, r=rank: os.path.join(folder, f"onebit-adam.{what}.rank{r}.pt")
    if phase == "full":
        ps, opt = make()
        steps(ps, opt, 0, STEPS)
        torch.save(snapshot(ps, opt), path("full"))
    elif phase == "save":
        ps, opt = make()
        done = 0
        for at in SAVES:
            steps(ps, opt, done, at)
            done = at
            torch.save({"params": [p.detach() for p in ps], "opt": opt.state_dict()}, path(f"at{at}"))
    else:
        for at in SAVES:
            ps, opt = make()
            saved = torch.load(path(f"at{at}"))
            before = snapshot(ps, opt)
            misfits = [dict(saved["opt"], onebit=dict(saved["opt"]["onebit"], freeze_step=FREEZE + 1)),
                       torch.load(path(f"at{at}", (rank + 1) % size))["opt"] if size > 1 else None]
            for i, bad in enumerate(misfits):  # on the last rank only: every rank fails
                if bad is None:
                    continue
                err = raises(lambda: opt.load_state_dict(bad if rank == size - 1 else saved["opt"]), RuntimeError)
                assert err is not None, (at, i)
                if rank == size - 1:
                    assert ("freeze_step" if i == 0 else "saved by rank") in str(err), err
                assert same(snapshot(ps, opt), before) and opt.step_count == 0, (at, i)
            with torch.no_grad():
                for p, q in zip(ps, saved["params"]):
                    p.copy_(q)
            opt.load_state_dict(saved["opt"])
            assert opt.step_count == at and opt.compressing == (at >= FREEZE)
            steps(ps, opt, at, STEPS)
            assert same(snapshot(ps, opt), torch.load(path("full"))), at
            opt.close()
        if rank == 0:
            print(f"resumed bit for bit at steps {SAVES} at {size} ranks", flush=True)
    finish()


if __name__ == "__main__":
    main()
