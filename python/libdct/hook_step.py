"""One DDP bucket's trip through a DctState's communication thread, in
phases that keep every rank entering the same collectives:

1. prepare (local, may fail): stage the bucket, choose compressed and dense
   parameters, find or make the units (hook_units.py), gather what they need;
2. vote (hook_agree.py): settings, layout, iteration, failures and which
   parameters have a nonzero gradient anywhere, in one small allreduce;
3. collectives, back to back: each ready unit's libdct allreduce (a failure
   there fails on every rank), then one dense allreduce for the rest;
4. finish (local): results into the bucket. Whether every rank finished is
   voted with the next bucket's vote (the iteration's last bucket votes on
   its own), and only then is the bucket committed and its future set, so
   that a bucket fails on every rank or on none at one vote a bucket.

A unit runs once all of its parameters have arrived this iteration: always
at once while units follow DDP's buckets; after load_state_dict, for one
iteration, units keep the saved partition, which DDP's first buckets in a
fresh process may cut differently, and so do the dense sums
(hook_dense.py). A parameter whose gradient is zero on every rank (unused
this step: DDP drops its result) keeps its residual, unless the state's
find_unused_parameters is False (no parameter misses a step)."""
import contextlib

import torch

from .hook_agree import digest, settings_of, vote
from .hook_work import _Work


class BucketJob:
    def __init__(self, index, buf, keys, numels, last, iteration):
        self.index, self.buf, self.keys, self.numels = index, buf, list(keys), list(numels)
        self.last, self.iteration = last, iteration
        self.ready = None   # CUDA: event recorded on the compute stream at hand-over
        self.future = None
        self.pending = set(self.keys)  # keys whose result is not written yet
        self.staged = None  # CUDA bucket on a gloo group: its host copy until written back

    def digest(self, positions):
        keys = self.keys if positions else None  # ids differ between processes
        return digest((self.index, str(self.buf.dtype), self.numels, keys, self.iteration))


class _Iteration:
    """What the buckets of one iteration share."""

    def __init__(self):
        self.views = {}    # key -> its gradient (staged) this iteration
        self.jobs = []     # jobs not settled yet
        self.ran = set()   # id() of the units that ran
        self.zero_keys = set()  # keys whose gradient is zero on every rank
        self.dense_views = {}   # key -> its gradient, while a saved dense group waits for its keys
        self.dense_ran = set()  # the saved dense groups that ran
        self.dense_groups = []  # the dense groups every rank finished, in order (state_dict saves them)
        self.velocity = {}      # key -> its new velocity (momentum correction, hook_momentum.py)
        self.failure = None


class StepRunner:
    def __init__(self, state):
        self.state = state
        self.it = _Iteration()
        self.streams = {}
        self.last_unit = {}         # bucket index -> its top-K unit
        self.keep_partition = False  # set by a load: the next iteration keeps the saved units
        self.saved_dense = None      # set by a load: the next iteration's dense groups (hook_dense.py)
        self.last_dense = []         # the dense groups of the last iteration
        self.unvoted = None          # the _Work whose finish the next vote covers

    def stats(self, index):
        u = self.last_unit.get(index)
        return u.compressor.stats if u is not None and u.compressor.handle is not None else None

    def run(self, job):
        it = self.it
        it.jobs.append(job)
        try:
            if it.failure is None:
                with _stream(self.streams, job.buf.device):
                    self._run(job)
        except BaseException as e:  # every rank fails this iteration's remaining buckets alike
            it.failure = e
        self._settle(job.last)

    def _run(self, job):
        st = self.state
        if job.buf.is_cuda and st.data.backend == "nccl":
            st._comm_for(job.buf.device)  # collective on first use; fails on every rank or none
        failure, work = None, None
        try:
            work = _Work(self, job)
        except BaseException as e:
            failure = e
        used = [0 if work is None or k in work.local_zero_keys else 1 for k in job.keys]
        prior, self.unvoted = self.unvoted, None
        v = vote(st.control.pg, st.ranks, settings_of(st), job.digest(st._positions is not None),
                 failure is not None, used, prior_failed=prior is not None and prior.failure is not None)
        if prior is not None:
            self._close(prior, v.prior_failed_rank)
        _raise_if_failed(v.failed_rank, failure, st, f"bucket {job.index}")
        self.it.zero_keys |= {k for k, u in zip(job.keys, v.flags) if not u}
        work.exchange(self.it.zero_keys)
        try:
            work.finish()
        except BaseException as e:
            work.failure = e
        if job.last:
            self._close(work, vote(st.control.pg, st.ranks, settings_of(st), 0, work.failure is not None).failed_rank)
        else:
            self.unvoted = work

    def _close(self, work, failed_rank):
        """After the vote on work's finish: fails it on every rank, or commits it."""
        _raise_if_failed(failed_rank, work.failure, self.state, f"bucket {work.job.index}")
        work.commit()

    def _settle(self, last):
        it = self.it
        for job in [j for j in it.jobs if not j.pending or it.failure is not None or last]:
            with _stream(self.streams, job.buf.device):
                if not job.pending:  # committed: every rank voted its parameters through
                    job.future.set_result(job.buf)
                elif it.failure is not None:
                    job.future.set_exception(_as_error(it.failure, job))
                else:
                    job.future.set_exception(RuntimeError(f"libdct: bucket {job.index}'s parameters {sorted(job.pending)} "
                                                          "were never reduced (no unit holds them)"))
            it.jobs.remove(job)
        if last:
            if it.failure is None:
                self.last_dense = it.dense_groups
            self.it = _Iteration()
            self.keep_partition = False
            self.saved_dense = None
            self.unvoted = None


def _raise_if_failed(failed_rank, failure, st, what):
    if failed_rank is None:
        return
    if failure is not None:
        raise failure
    raise RuntimeError(f"libdct: {what} failed on global rank {st.ranks[failed_rank]}; "
                       "failed here too so that every rank leaves it alike")


def _as_error(e, job):
    """What the bucket's future carries: a RuntimeError (DDP's and torch
    futures' kind), chained to any other exception, SystemExit included."""
    if isinstance(e, RuntimeError):
        return e
    err = RuntimeError(f"libdct: bucket {job.index}: {type(e).__name__}: {e}")
    err.__cause__ = e
    return err


# The priority of the state's streams (torch's 0, or -1 for high). High
# priority lets a bucket's small kernels start ahead of the backward's
# remaining blocks; on an H200 it helped the variable step and cost the
# fixed-capacity one about as much (bench/results/2026-11-29-device-h200),
# so the default stays. bench/hook_overlap.py --stream-priority sets it.
STREAM_PRIORITY = 0


def _stream(streams, device):
    """The state's own stream on a CUDA device, made on first use."""
    if device.type != "cuda":
        return contextlib.nullcontext()
    if device not in streams:
        streams[device] = torch.cuda.Stream(device, priority=STREAM_PRIORITY)
    return torch.cuda.stream(streams[device])
