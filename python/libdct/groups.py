"""Process groups of libdct's own, made over a torch.distributed group's
ranks without a collective over the world, and collectives called on the
group objects themselves (so they work on registered groups and on these
private ones alike, in torch 1.13 and 2.x).

dist.new_group is collective over the whole world in 1.13; in 2.x its
use_local_synchronization=True still advances the group counter on the
members only, so a later plain new_group on the world names its store keys
differently on different ranks and hangs. A private group here is a backend
built on a PrefixStore of the default store, named by its global ranks and
by how many private groups this process made over those ranks before: the
members agree on the name as long as they make their states over that
group in the same order, and no other rank takes part or is affected."""
import datetime
import itertools

import torch
import torch.distributed as dist

_made = {}  # global ranks -> private groups this process made over them


def group_ranks(group):
    """The global ranks of group (None: the default group), in group order."""
    return list(dist.get_process_group_ranks(group if group is not None else dist.group.WORLD))


def group_timeout(group):
    """The timeout the group's collectives run under (its backend's option;
    the default timeout where the backend does not say)."""
    group = group if group is not None else dist.group.WORLD
    backends = [group]
    if hasattr(group, "_get_backend"):  # 2.x: the options live on the device backends
        backends = []
        for device in ("cpu", "cuda"):
            try:
                backends.append(group._get_backend(torch.device(device)))
            except (RuntimeError, ValueError):
                pass
    for b in backends:
        timeout = getattr(getattr(b, "options", None), "_timeout", None)
        if isinstance(timeout, datetime.timedelta):
            return timeout
    return dist.default_pg_timeout


class PrivateGroup:
    """A backend over a group's ranks (gloo, or nccl for device data)."""

    def __init__(self, ranks, backend, timeout, role):
        key = tuple(ranks)
        serial = _made.setdefault(key, itertools.count())
        self.name = f"libdct/{role}/{'_'.join(map(str, ranks))}/{next(serial)}"
        self.ranks, self.backend, self.timeout = list(ranks), backend, timeout
        self.rank, self.size = self.ranks.index(dist.get_rank()), len(self.ranks)
        self.store = dist.PrefixStore(self.name + "/", dist.distributed_c10d._get_default_store())
        if backend == "nccl":
            options = dist.ProcessGroupNCCL.Options()
            options._timeout = timeout
            self.pg = dist.ProcessGroupNCCL(self.store, self.rank, self.size, options)
        else:
            self.pg = dist.ProcessGroupGloo(self.store, self.rank, self.size, timeout)

    def close(self):
        shutdown = getattr(self.pg, "shutdown", None) or getattr(self.pg, "abort", None)
        if shutdown is not None:
            try:
                shutdown()
            except RuntimeError:
                pass  # already down
        self.pg = None


# Collectives on group objects (registered ProcessGroup or backend), blocking.

def all_reduce(pg, t, op=dist.ReduceOp.SUM):
    opts = dist.AllreduceOptions()
    opts.reduceOp = op
    pg.allreduce([t], opts).wait()


def all_gather(pg, outs, t):
    pg.allgather([outs], [t]).wait()


def all_to_all_single(pg, out, inp, out_splits, in_splits):
    pg.alltoall_base(out, inp, out_splits, in_splits, dist.AllToAllOptions()).wait()


def broadcast(pg, t, root):
    opts = dist.BroadcastOptions()
    opts.rootRank = root
    pg.broadcast([t], opts).wait()


def sum_in_place(pg, t, backend):
    """all_reduce(t) (sum); bf16 on gloo, which has no bf16 sum, in fp32
    with one rounding."""
    if t.dtype == torch.bfloat16 and backend != "nccl":
        wide = t.float()
        all_reduce(pg, wide)
        t.copy_(wide)
    else:
        all_reduce(pg, t)


def backend_of(group):
    return dist.get_backend(group if group is not None else dist.group.WORLD)
