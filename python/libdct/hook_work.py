"""The work of one bucket job (hook_step.py): what is local is done before
the votes (prepare) or after the collectives (finish), never between them."""
import torch

from . import hook_momentum
from .hook_dense import dense_sums


class _Work:
    def __init__(self, runner, job):
        st, it, device = runner.state, runner.it, job.buf.device
        if device.type not in ("cpu", "cuda"):
            raise RuntimeError(f"libdct: dct_hook takes CPU and CUDA buckets, not {device.type} ones")
        if job.ready is not None:  # our stream waits for the gradients, the compute stream goes on
            ours = torch.cuda.current_stream(device)
            ours.wait_event(job.ready)
            job.buf.record_stream(ours)
        self.st, self.runner, self.job = st, runner, job
        self.failure = None  # what finish() raised, until the vote on it
        staged = device.type == "cuda" and st.data.backend != "nccl"  # a gloo group: through host memory
        self.work = job.buf.cpu() if staged else job.buf
        job.staged = self.work if staged else None
        views = dict(zip(job.keys, self.work.split(job.numels)))
        # A bucket's one read-back (on CUDA a wait for its gradients): only where a parameter can miss a step
        detect = views and st.find_unused_parameters
        nonzero = torch.stack([v.any() for v in views.values()]).tolist() if detect else []
        self.local_zero_keys = {k for k, nz in zip(job.keys, nonzero) if not nz}
        compressed = self._compressed(job)
        self.velocity = it.velocity
        if st.momentum:
            hook_momentum.before_exchange(st, compressed, views, it.velocity)
        for k in compressed:
            it.views[k] = views[k]
        self.ready = self._ready_units(compressed)
        self.dense = [k for k in job.keys if k not in set(compressed)]
        if st._positions is not None:  # in model order: a ring sums an element in an order set by its place
            self.dense.sort()
        self.sums = dense_sums(runner, job, self.dense, views, self.work)

    def _compressed(self, job):
        st = self.st
        if self.runner.keep_partition:  # the saved run's choice, whatever DDP's first buckets weigh
            return [k for k in job.keys if k in st._owned.units.of]
        if job.iteration < st.start_iter:
            return []
        size = job.buf.element_size()
        if st.compressor == "onebit":  # each parameter big enough gets its own 1-bit scale
            return [k for k, n in zip(job.keys, job.numels) if n * size >= st.min_compression_bytes]
        return list(job.keys) if job.buf.numel() * size >= st.min_compression_bytes else []

    def _ready_units(self, compressed):
        """[(unit, its input, residual before or None)] that run now, in an
        order every rank shares (their keys' arrival)."""
        st, it, job, units = self.st, self.runner.it, self.job, self.st._owned.units
        sig = ("onebit" if st.compressor == "onebit" else "topk", str(job.buf.dtype), repr(st.compressor_config()))
        make = lambda count, dtype: st._comm_for(self.work.device).compressor(count, dtype, st.compressor_config())
        # 1-bit on CUDA: a unit per parameter, whose steps stay queued on the
        # stream (segments read their scales back); elsewhere one exchange
        # per bucket, a scale per parameter (segments, hook_units.py).
        per_parameter = st.compressor == "onebit" and self.work.device.type == "cuda"
        groups = [[k] for k in compressed] if per_parameter else [compressed] if compressed else []
        for keys in groups:
            numels = [job.numels[job.keys.index(k)] for k in keys]
            if units.exact(keys, sig) is None and not (self.runner.keep_partition and units.covering(keys, sig)):
                unit = units.make(keys, numels, self.work.dtype, sig, make, self.work.device)
                if st.momentum:
                    hook_momentum.check_wire(unit)
        if len(groups) == 1 and (whole_bucket := units.exact(groups[0], sig)) is not None:
            self.runner.last_unit[job.index] = whole_bucket
        order = []
        for k in it.views:
            u = units.of.get(k)
            if u is not None and id(u) not in it.ran and u not in order:
                order.append(u)
        ready = []
        for u in order:
            if not (job.last or all(k in it.views for k in u.keys)):
                continue
            whole = u.keys == tuple(job.keys) and job.staged is None and u.dtype == self.work.dtype
            flat = self.work if whole else torch.cat([it.views[k] if k in it.views else
                                                      torch.zeros(n, dtype=u.dtype, device=u.device)
                                                      for k, n in zip(u.keys, u.numels)])
            risky = any(k not in it.views or k in self.local_zero_keys for k in u.keys)
            units.sent_bytes(u)  # its last step's, before this one replaces them
            ready.append((u, flat, u.residual() if risky else None))
            it.ran.add(id(u))
        return ready

    def exchange(self, zero_keys):
        """The collectives, back to back (libdct's fail on every rank together)."""
        st, it = self.st, self.runner.it
        self.held = []
        for u, flat, before in self.ready:
            held = [k for k in u.keys if k in zero_keys or k not in it.views]
            self.held.append(held)
            if len(held) < len(u.keys):
                u.compressor.allreduce(flat, op="avg")
        for s in self.sums:
            s.exchange(st)

    def finish(self):
        """Results into the buckets' gradients; held parameters keep their residual."""
        it = self.runner.it
        for (u, flat, before), held in zip(self.ready, self.held):
            if held and len(held) < len(u.keys):
                after = u.residual()
                for k in held:
                    at, n = u.slices[k]
                    after[at:at + n] = before[at:at + n]
                u.compressor.set_residual(after)
            if self.st.momentum and self.st.momentum_masking and len(held) < len(u.keys):
                hook_momentum.mask(u, self.velocity, held)
            for k in held:
                at, n = u.slices[k]
                flat[at:at + n] = 0
            if flat is not self.work:
                for k in u.keys:
                    if k in it.views:
                        at, n = u.slices[k]
                        it.views[k].copy_(flat[at:at + n])
        self.done = {k for u, _, _ in self.ready for k in u.keys}
        for s in self.sums:
            self.done |= s.finish()
            if self.st.momentum:
                hook_momentum.after_dense_sum(self.st, s.views, it.zero_keys, self.velocity)
        for j in it.jobs:
            if j.staged is not None and not j.pending - self.done:
                j.buf.copy_(j.staged)
                j.staged = None
        # What commit() keeps: the next bucket's prepare adds to both before this bucket's vote.
        self.velocity, self.zero_keys = dict(self.velocity), set(it.zero_keys)

    def commit(self):
        """After the vote on finish: the bookkeeping of a bucket every rank finished."""
        st, it = self.st, self.runner.it
        for s in self.sums:
            s.commit(st, it)
        hook_momentum.commit(st, self.velocity, self.zero_keys)
        for (u, _, _), held in zip(self.ready, self.held):
            if len(held) < len(u.keys):
                st._owned.units.ran(u)
        st.dense_bytes += self.job.buf.numel() * self.job.buf.element_size()
        for j in it.jobs:
            j.pending -= self.done
