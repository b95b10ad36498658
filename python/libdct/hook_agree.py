"""What the ranks of a DctState's group agree on before they enter a
collective: the hook's settings (which decide which collectives the Python
code issues), each bucket's layout and step, and whether any rank failed
since the last collective (here or in the bucket before, whose last vote
this one is). One small all_reduce (MAX) carries all of it, plus a flag
per parameter (nonzero gradient anywhere); a disagreement costs one
all_gather more, to name the field and the rank."""
import hashlib

import torch
import torch.distributed as dist

from .groups import all_gather, all_reduce

SETTINGS = ("density", "start_iter", "min_compression_bytes", "compressor", "algorithm", "wire_type", "config",
            "momentum", "momentum_masking", "find_unused_parameters")
_BUCKET = "bucket (index, layout, iteration)"


def digest(value):
    """A 62-bit digest of a value's repr (same on every rank and run)."""
    return int.from_bytes(hashlib.sha256(repr(value).encode()).digest()[:8], "little") >> 2


def settings_of(state):
    """{field: value} of the settings every rank must share."""
    out = {name: getattr(state, name) for name in SETTINGS}
    out["config"] = tuple(sorted((k, repr(v)) for k, v in vars(state.config).items()))
    out["wire_type"] = repr(out["wire_type"])
    return out


class Disagreement(RuntimeError):
    pass


class Vote:
    """The outcome of vote(): who failed, and the OR of the flags."""

    def __init__(self, failed_rank, prior_failed_rank, flags):
        self.failed_rank = failed_rank  # the highest failed group rank, or None
        self.prior_failed_rank = prior_failed_rank  # the same for the prior_failed argument
        self.flags = flags


def vote(group, ranks, settings, bucket_digest=0, failed=False, flags=(), prior_failed=False):
    """Collective over group (a CPU group whose global ranks are `ranks`).
    Raises Disagreement on every rank when the settings or the bucket
    digests differ; returns a Vote otherwise. prior_failed: a second
    failure, voted apart (the previous bucket's finish)."""
    # One digest of every setting; the per-field ones only to name a
    # difference (a vote runs once a bucket: its host time is the step's).
    agreed = [digest(tuple(settings.items())), bucket_digest]
    me = group.rank() + 1
    t = torch.tensor([me if failed else 0, me if prior_failed else 0] + [x for a in agreed for x in (a, -a)]
                     + list(flags), dtype=torch.int64)
    all_reduce(group, t, dist.ReduceOp.MAX)
    values = t.tolist()
    if any(values[2 + 2 * i] != -values[3 + 2 * i] for i in range(len(agreed))):
        fields = [digest(v) for v in settings.values()] + [bucket_digest]
        raise Disagreement(_name_difference(group, ranks, settings, fields))
    rank = lambda v: v - 1 if v else None
    return Vote(rank(values[0]), rank(values[1]), [bool(f) for f in values[2 + 2 * len(agreed):]])


def _name_difference(group, ranks, settings, mine):
    """The first field (in SETTINGS order, then the bucket) where a rank
    differs from group rank 0, and the global ranks that differ."""
    t = torch.tensor(mine, dtype=torch.int64)
    every = [torch.empty_like(t) for _ in range(group.size())]
    all_gather(group, every, t)
    names = list(settings) + [_BUCKET]
    for i, name in enumerate(names):
        odd = [ranks[r] for r, v in enumerate(every) if v[i] != every[0][i]]
        if odd:
            here = settings.get(name, "this rank's") if name != _BUCKET else "this rank's"
            return (f"libdct: DctState {name} differs across the group: global rank(s) {odd} do not have the value "
                    f"of global rank {ranks[0]} (global rank {ranks[group.rank()]} has {here}); every rank "
                    f"must build its DctState with the same settings and feed it the same buckets")
    return "libdct: DctState settings differ across the group"
