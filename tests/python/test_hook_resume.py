"""DctState.load_state_dict() within one process, with hand-made buckets
(libdct.torch.Bucket) at 1-4 ranks: the first iteration after a load keeps
the saved units and dense groups however its buckets cut them, so it equals
the uninterrupted run bit for bit; a saved dense group that spans buckets
completes the earlier bucket's future once its last parameter arrives."""
import torch

import harness
from libdct.torch import Bucket, DctState, dct_hook

RANK = SIZE = None  # set by harness.main
NUMELS = (3000, 96, 6000, 64, 640, 10)  # at 1 KB, 1 and 3-5 go dense


def drive(state, layout, params, step):
    """One iteration of buckets (lists of parameter indices): {index: its result}."""
    g = torch.Generator().manual_seed(step * 10 + RANK)
    grads = [torch.randn(p.numel(), generator=g) for p in params]
    futures = [dct_hook(state, Bucket(i, torch.cat([grads[j] for j in b]), [params[j] for j in b],
                                      i == len(layout) - 1)) for i, b in enumerate(layout)]
    out = {}
    for b, f in zip(layout, futures):
        out.update(zip(b, f.wait().split([NUMELS[j] for j in b])))
    return out


def case_a_resumed_iteration_keeps_the_saved_dense_groups():
    params = [torch.nn.Parameter(torch.zeros(n)) for n in NUMELS]
    model = torch.nn.ParameterList(params)
    one, two = [[0, 1, 2, 3, 4, 5]], [[5, 4, 3, 2], [1, 0]]  # dense [1, 3, 5], or [3, 5] and [1]
    for saved_layout, resumed_layout in ((one, two), (two, one)):
        states = [DctState(density=0.05, compressor="onebit", min_compression_bytes=1024, model=model)
                  for _ in range(2)]
        drive(states[0], saved_layout, params, 0)
        saved = states[0].state_dict()
        groups = [[1, 3, 5]] if saved_layout is one else [[3, 5], [1]]
        assert [list(g) for g in saved["dense"]] == groups, saved["dense"]
        want = drive(states[0], saved_layout, params, 1)
        states[1].load_state_dict(saved)
        got = drive(states[1], resumed_layout, params, 1)
        for j in range(len(NUMELS)):
            assert torch.equal(got[j], want[j]), (saved_layout, j, (got[j] - want[j]).abs().max())
        mine, theirs = states[1].residuals(), states[0].residuals()
        assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)
        for s in states:
            s.close()


if __name__ == "__main__":
    harness.main(globals())
