"""The dense part of a bucket job (hook_work.py): parameters summed by a
plain allreduce, joined into one buffer per group. A ring sums each element
in an order set by its place in the buffer, so the groups decide the bits.
A group is the bucket's dense keys (in model order), except in the first
iteration after load_state_dict: then the saved run's groups of its last
iteration (hook_checkpoint.py), which DDP's first buckets in a fresh process
may join differently. A saved group sums once all of its keys have arrived
(at the last bucket, with zeros for any that did not), writing into every
bucket it covers, the way units keep their partition (hook_step.py)."""
import torch

from .groups import sum_in_place


def dense_sums(runner, job, dense, views, work):
    """The DenseSums that run with this job, in an order every rank shares."""
    st, it = runner.state, runner.it
    st._owned.units.evict(dense)  # their residuals become orphans, added below
    saved = runner.saved_dense
    if not saved:
        whole = work if dense == job.keys else None
        return [DenseSum(st, dense, {k: views[k] for k in dense}, whole)] if dense else []
    covered = {k for g in saved for k in g}
    for k in dense:
        if k in covered:
            it.dense_views[k] = views[k]
    sums = []
    for g in saved:
        if g in it.dense_ran or not any(k in it.dense_views for k in g):
            continue
        if job.last or all(k in it.dense_views for k in g):
            sums.append(DenseSum(st, g, {k: it.dense_views[k] for k in g if k in it.dense_views}))
            it.dense_ran.add(g)
    rest = [k for k in dense if k not in covered]
    if rest:
        sums.append(DenseSum(st, rest, {k: views[k] for k in rest}))
    return sums


class DenseSum:
    """One group's joined buffer (in place when it is the whole bucket and
    no orphan is added), each key with its parameter's orphaned residual
    added, divided by the group size before the sum (fp16 sums of P ranks
    stay finite). views: the keys that arrived; the others join as zeros."""

    def __init__(self, st, keys, views, whole=None):
        self.keys, self.views = tuple(keys), views
        units = st._owned.units
        orphans = {k: units.orphans[k] for k in views if k in units.orphans}
        like = next(iter(views.values()))
        numels = [views[k].numel() if k in views else st._numels[k] for k in self.keys]
        if whole is not None and not orphans:
            self.joined = whole
        else:
            self.joined = torch.cat([views[k] if k in views else like.new_zeros(n) for k, n in zip(self.keys, numels)])
        self.slices, self.remainders, at = {}, {}, 0
        for k, n in zip(self.keys, numels):
            self.slices[k] = (at, n)
            if k in orphans:
                piece = self.joined[at:at + n]
                wide = piece.to(orphans[k].dtype) + orphans[k].to(piece.device)
                piece.copy_(wide)
                self.remainders[k] = wide - piece.to(wide.dtype)  # what the bucket's type could not carry
            at += n
        self.in_place = self.joined is whole
        self.joined.div_(st.world_size)

    def exchange(self, st):
        sum_in_place(st.data.pg, self.joined, st.data.backend)

    def finish(self):
        """The sums into the views; the keys written."""
        if not self.in_place:
            for k, v in self.views.items():
                at, n = self.slices[k]
                v.copy_(self.joined[at:at + n])
        return set(self.views)

    def commit(self, st, it):
        units = st._owned.units
        for k in self.views:
            units.orphans.pop(k, None)
        units.orphans.update({k: r for k, r in self.remainders.items() if bool((r != 0).any())})
        st._dense_sent += self.joined.numel() * self.joined.element_size()
        it.dense_groups.append(self.keys)
