"""What OnebitAdam stands on: the flat layout of its parameters, and the
channel its dense averages and votes go through (a torch.distributed group
or an mpi4py communicator).

The vote follows hook_agree.py: one all_reduce(MAX) of a small int64
vector carries a failure flag (the group rank + 1 of a rank that failed
locally) and each digest as a (d, -d) pair, whose maxima differ exactly when
some rank's digest differs; a difference costs one all_gather more to name
the field and the ranks."""
import hashlib

import torch


def digest(value):
    """A 62-bit digest of a value's repr (same on every rank and run)."""
    return int.from_bytes(hashlib.sha256(repr(value).encode()).digest()[:8], "little") >> 2


class Layout:
    """Every parameter of every group, in group order, as a slice of one flat
    buffer of the state's type (fp32, or fp64 when every parameter is fp64)
    on the parameters' one device."""

    def __init__(self, groups):
        self.params, self.offsets, self.group_ranges = [], [], []
        n = 0
        for i, g in enumerate(groups):
            start = n
            for p in g["params"]:
                if p.is_sparse:
                    raise ValueError("OnebitAdam: sparse parameters are not supported")
                self.params.append(p)
                self.offsets.append(n)
                n += p.numel()
            self.group_ranges.append((start, n))
        if not self.params:
            raise ValueError("OnebitAdam: no parameters to optimize")
        devices = sorted({str(p.device) for p in self.params})
        if len(devices) > 1:
            raise ValueError(f"OnebitAdam: the parameters are on {', '.join(devices)}; one optimizer takes "
                             f"parameters on one device (one flat buffer, one exchange per step): make one "
                             f"optimizer per device")
        self.device = self.params[0].device
        if self.device.type not in ("cpu", "cuda"):
            raise ValueError(f"OnebitAdam: parameters on {self.device} (CPU or CUDA only)")
        bad = sorted({str(p.dtype) for p in self.params if not p.dtype.is_floating_point})
        if bad:
            raise ValueError(f"OnebitAdam: parameters of type {', '.join(bad)} (floating point only)")
        every64 = all(p.dtype == torch.float64 for p in self.params)
        self.dtype = torch.float64 if every64 else torch.float32
        self.count = n
        self.sizes = [p.numel() for p in self.params]

    def describe(self):
        """What must match across ranks and checkpoints."""
        return (str(self.dtype), self.device.type, tuple(self.sizes),
                tuple(str(p.dtype) for p in self.params), tuple(self.group_ranges))

    def zeros(self):
        return torch.zeros(self.count, dtype=self.dtype, device=self.device)

    def views(self, flat):
        """flat's slice of each parameter, shaped like it."""
        return [flat[o:o + p.numel()].view_as(p) for p, o in zip(self.params, self.offsets)]

    def group_views(self, flat):
        return [flat[a:b] for a, b in self.group_ranges]

    def gather_grads(self, out):
        """The gradients into out (state type; a missing gradient is zero).
        Returns a message for what cannot be taken, else None."""
        for p, o in zip(self.params, self.offsets):
            g = p.grad
            dst = out[o:o + p.numel()]
            if g is None:
                dst.zero_()
            elif g.is_sparse:
                return "OnebitAdam: sparse gradients are not supported (the momentum exchange is dense)"
            elif g.device != self.device:
                return f"OnebitAdam: a gradient on {g.device}, its parameter on {self.device}"
            else:
                dst.copy_(g.reshape(-1))
        return None


class Disagreement(RuntimeError):
    pass


class _TorchChannel:
    """Votes over a gloo group (host), dense sums over the data group."""

    def __init__(self, control, data):
        self.control, self.data = control, data
        self.rank, self.size = control.rank, control.size
        self.ranks = control.ranks

    def max_(self, t):
        import torch.distributed as dist
        from .groups import all_reduce
        all_reduce(self.control.pg, t, dist.ReduceOp.MAX)

    def gather(self, t):
        from .groups import all_gather
        every = [torch.empty_like(t) for _ in range(self.size)]
        all_gather(self.control.pg, every, t)
        return every

    def sum_(self, t):
        from .groups import sum_in_place
        sum_in_place(self.data.pg, t, self.data.backend)


class _MpiChannel:
    """The same over an mpi4py communicator (host tensors)."""

    def __init__(self, comm):
        self.comm = comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.ranks = list(range(self.size))

    def max_(self, t):
        from mpi4py import MPI
        self.comm.Allreduce(MPI.IN_PLACE, t.numpy(), op=MPI.MAX)

    def gather(self, t):
        out = torch.empty((self.size,) + tuple(t.shape), dtype=t.dtype)
        self.comm.Allgather(t.numpy(), out.numpy())
        return list(out)

    def sum_(self, t):
        from mpi4py import MPI
        if t.device.type != "cpu":
            raise ValueError("OnebitAdam over an mpi4py communicator takes CPU parameters")
        self.comm.Allreduce(MPI.IN_PLACE, t.numpy(), op=MPI.SUM)


def vote(channel, fields, failed=None, flags=()):
    """Collective: raises Disagreement on every rank when some field of
    `fields` ({name: value}) differs across ranks; when some rank failed
    (`failed`: its exception, raised there, or message), a RuntimeError on
    the others; else returns the OR of `flags` over the ranks."""
    mine = [digest(v) for v in fields.values()]
    d = digest(tuple(mine))
    t = torch.tensor([channel.rank + 1 if failed else 0, d, -d] + [int(bool(f)) for f in flags], dtype=torch.int64)
    channel.max_(t)
    v = t.tolist()
    if v[0]:  # before the digests: a rank that failed may not have had them all
        if isinstance(failed, BaseException):
            raise failed
        if failed:
            raise RuntimeError(failed)
        raise RuntimeError(f"OnebitAdam: group rank {v[0] - 1} failed (its exception says why); nothing changed "
                           f"on any rank")
    if v[1] != -v[2]:
        raise Disagreement(_name_difference(channel, fields, mine))
    return [bool(f) for f in v[3:]]


def _name_difference(channel, fields, mine):
    every = channel.gather(torch.tensor(mine, dtype=torch.int64))
    for i, name in enumerate(fields):
        odd = [channel.ranks[r] for r, row in enumerate(every) if row[i] != every[0][i]]
        if odd:
            return (f"OnebitAdam: {name} differs across the group: rank(s) {odd} do not have the value of rank "
                    f"{channel.ranks[0]} (rank {channel.ranks[channel.rank]} has {fields[name]!r}); every rank "
                    f"must build and drive its optimizer the same way")
    return "OnebitAdam: the settings differ across the group"
