"""A DDP communication hook shaped like PyTorch's PowerSGD hook:

    state = DctState(process_group=None, density=0.01, model=model)
    model.register_comm_hook(state, dct_hook)

Each DDP bucket (top-K) or parameter (1-bit) gets a libdct compressor whose
error-feedback residual lives in the state; the gradients become the mean
over ranks of compress(gradient + residual), identical bits on every rank.
Buckets go in order through one communication thread, so the backward pass
never waits for them; on a GPU that thread works on a stream of its own,
ordered after the bucket's gradients by an event, and the future it returns
carries the bucket's device, so DDP's later work waits on events, never on
the host. Every rank agrees on the settings, each bucket's layout and any
local failure before it enters a collective (hook_agree.py): a difference
or a failure on one rank fails that bucket on every rank."""
import weakref

import torch
import torch.distributed as dist

from . import hook_checkpoint
from .comm import Comm
from .config import Config
from .groups import PrivateGroup, backend_of, group_ranks, group_timeout
from .hook_agree import settings_of, vote
from .hook_step import BucketJob, StepRunner
from .hook_thread import Worker
from .hook_units import Units
from .library_agree import agree_library
from .onebit_adam import OnebitAdam  # noqa: F401 (libdct.torch's API)
from .onebit_hook import onebit_adam_hook  # noqa: F401


class _Owned:
    """What a state holds that needs freeing: by close(), or by the
    finalizer of a state dropped without it (on its thread, after its jobs)."""

    def __init__(self):
        self.units = Units()
        self.velocity = {}  # key -> velocity (momentum correction, hook_momentum.py)
        self.comms = {}   # device (None: host) -> Comm
        self.groups = []

    def free(self):
        self.units.close()
        self.velocity.clear()
        for c in self.comms.values():
            c.close()
        self.comms.clear()
        for g in self.groups:
            g.close()
        self.groups.clear()


def _finds_unused(requested, model):
    """DctState's find_unused_parameters against the DDP model's."""
    ddp = model if isinstance(model, torch.nn.parallel.DistributedDataParallel) else None
    # static_graph: DDP finds the unused parameters on the first iteration and drops them later
    ddp_finds = ddp is None or bool(ddp.find_unused_parameters or getattr(ddp, "static_graph", False))
    if requested is None:
        return ddp_finds
    if not requested and ddp is not None and ddp_finds:
        raise ValueError("find_unused_parameters=False, but the DDP model finds unused parameters (or has a static "
                         "graph): it would drop their results, and with them their residuals")
    return bool(requested)


def _release(worker, owned):
    worker.submit(owned.free)
    worker.stop(join=False)


class DctState:
    """What dct_hook keeps between steps.

    process_group: the DDP model's group (None: the default group). The
        state talks on groups of its own over the same ranks (libdct.groups:
        made by the group's members alone, with the group's timeout), so its
        traffic never interleaves with other collectives. Every member must
        make its states over a group in the same order.
    density: fraction of each bucket sent (top-K), in (0, 1].
    start_iter: iterations of plain allreduce before compression (like
        start_powerSGD_iter); 0 compresses from the first.
    min_compression_bytes: buckets (1-bit: parameters) smaller than this go
        through allreduce, with any residual their parameters hold.
    compressor: "topk" (DCT-DP) or "onebit" (1-bit Adam's allreduce: one
        exchange per bucket with a scale per parameter; on CUDA a compressor
        per parameter, so that its steps stay queued on the stream).
    algorithm: "auto" (default), "allgather", "split", "dense" or "globaltopk":
        top-K's exchange (auto times the exchange itself, after every rank
        has arrived, so a slow rank's backward does not mislead it).
    wire_type: the values' type on the wire ("fp16", "bf16"; None: the
        bucket's own), the rounding kept in the residual.
    config: a libdct.Config for the remaining fields (threshold_method, ...).
    momentum: 0 (default), or DGC's momentum correction with this momentum
        (hook_momentum.py): each rank keeps a velocity per parameter, the
        buckets carry velocities (top-K compresses them; where an entry left
        the residual its velocity is zeroed) and dense parameters get
        momentum after their mean. Use an optimizer without momentum, e.g.
        torch.optim.SGD(params, lr, momentum=0). Top-K, wire_type None.
    momentum_masking: with momentum, zero a velocity where its entry was
        sent (DGC's factor masking, default); False keeps it, so each
        gradient is applied with all of its momentum, as SGD's.
    model: the model (or DDP module) whose parameters the buckets hold:
        names residuals by parameter position, which state_dict() needs.
    find_unused_parameters: whether a parameter can miss a step, as DDP's
        setting of that name. True: each bucket reads back which of its
        parameters have a zero gradient (on CUDA a wait for the bucket's
        gradients) and those zero on every rank keep their residual, which
        DDP would drop. False: no read-back, every parameter is sent; DDP
        refuses an unused parameter then. None (default): the DDP model's
        own setting (True with static_graph), else True. False with a DDP
        model that finds unused parameters raises ValueError: their
        residuals would be lost.
    Every setting must be the same on every rank: the state agrees them over
    the group now and at every bucket; a rank that differs fails every rank
    with a RuntimeError naming the field and the ranks."""

    def __init__(self, process_group=None, density=0.01, start_iter=0, min_compression_bytes=16384,
                 compressor="topk", algorithm="auto", wire_type=None, config=None, model=None, momentum=0.0,
                 momentum_masking=True, find_unused_parameters=None):
        if not 0 < density <= 1:
            raise ValueError(f"density must be in (0, 1], not {density}")
        self.density, self.start_iter, self.min_compression_bytes = density, start_iter, min_compression_bytes
        self.compressor, self.algorithm, self.wire_type = compressor, algorithm, wire_type
        self.config = config or Config()
        narrow = wire_type is not None or self.config.wire_type is not None
        if not 0 <= momentum < 1 or (momentum and (compressor != "topk" or narrow)):
            raise ValueError(f"momentum must be in [0, 1), and 0 unless compressor is 'topk' with the buckets' own "
                             f"wire type (masking reads a sent entry's residual as 0), not {momentum}")
        self.momentum, self.momentum_masking = float(momentum), bool(momentum_masking)
        self.find_unused_parameters = _finds_unused(find_unused_parameters, model)
        self.compressor_config().to_native()  # a bad name fails here, not in the first backward
        self.iter = 0
        self._dense_sent = 0  # bytes_sent by dense sums; the units count their own
        self.dense_bytes = 0  # what plain allreduce would have put (the buckets' size)
        self.process_group = process_group
        self.ranks = group_ranks(process_group)
        if dist.get_rank() not in self.ranks:
            raise ValueError(f"global rank {dist.get_rank()} is not in the process group {self.ranks}")
        self.world_size = len(self.ranks)
        self._positions = {id(p): i for i, p in enumerate(model.parameters())} if model is not None else None
        self._numels = [p.numel() for p in model.parameters()] if model is not None else None
        self._owned = _Owned()
        backend, timeout = backend_of(process_group), group_timeout(process_group)
        self.control = PrivateGroup(self.ranks, "gloo", timeout, "control")
        self._owned.groups.append(self.control)
        self.data = self.control
        try:
            agree_library(self.control.pg)  # every rank loaded the same libdct, before anything else is made
            if backend == "nccl":
                self.data = PrivateGroup(self.ranks, "nccl", timeout, "data")
                self._owned.groups.append(self.data)
            else:
                self._owned.comms[None] = Comm.from_torch(self.control)
            vote(self.control.pg, self.ranks, settings_of(self))  # one digest, before any bucket
        except BaseException:
            self._owned.free()
            raise
        self._runner = StepRunner(self)
        self._worker = Worker()
        self._finalizer = weakref.finalize(self, _release, self._worker, self._owned)
        self._closed = False

    # --- what users call ---

    @property
    def comm(self):
        """The libdct Comm of the host path (gloo groups), else the first device one."""
        comms = self._owned.comms
        return comms.get(None) or next(iter(comms.values()), None)

    @property
    def bytes_sent(self):
        """Payload bytes this rank put on the wire, all buckets, after the
        steps queued so far (on a device it waits for them)."""
        if self._closed:
            return self._dense_sent + self._owned.units.sent
        return self._on_thread(lambda: self._dense_sent + self._owned.units.sent_bytes())

    @bytes_sent.setter
    def bytes_sent(self, value):  # a checkpoint's, on the communication thread
        self._owned.units.sent, self._owned.units.unread = 0, []
        self._dense_sent = value

    @property
    def rebuilds(self):
        """Compressors made afresh to take over residuals (DDP re-bucketed)."""
        return self._owned.units.rebuilds

    def compressor_config(self):
        fields = {k: v for k, v in vars(self.config).items() if v is not None}
        fields.update(density=self.density, compressor=self.compressor, algorithm=self.algorithm)
        if self.wire_type is not None:
            fields["wire_type"] = self.wire_type
        return Config(**fields)

    def residuals(self):
        """{parameter key: residual} of every parameter with one (a copy on
        the host, after the steps queued so far). Keys are positions in the
        model when the state knows it, else id(parameter)."""
        return self._on_thread(self._owned.units.residuals)

    def velocities(self):
        """{parameter key: velocity} (momentum correction; a copy on the
        host, after the steps queued so far)."""
        return self._on_thread(lambda: {k: u.detach().cpu().clone() for k, u in self._owned.velocity.items()})

    def stats(self, bucket_index):
        """libdct.Stats of the top-K compressor that last reduced this bucket
        (None while it has none; 1-bit compressors are per parameter)."""
        return self._on_thread(lambda: self._runner.stats(bucket_index))

    def state_dict(self):
        """This rank's state (residuals by parameter position, compressor
        states, iteration, settings), after the steps queued so far; with
        torch.save it restores into a fresh process that continues bit for
        bit (hook_checkpoint.py). Needs DctState(model=...)."""
        return self._on_thread(lambda: hook_checkpoint.save(self))

    def load_state_dict(self, saved):
        """Replaces the state with a state_dict() of this rank. Collective over
        the group: a state that does not fit (settings, group, model) fails
        on every rank with a RuntimeError naming it."""
        self._on_thread(lambda: hook_checkpoint.load(self, saved))

    def close(self):
        """Ends the communication thread after the queued steps and frees the
        compressors, comms and groups. Idempotent; the hook raises after it."""
        if self._closed:
            return
        self._closed = True
        self._finalizer.detach()
        self._worker.submit(self._owned.free)
        self._worker.stop()

    # --- the communication thread ---

    def _on_thread(self, fn):
        """fn() on the communication thread, after the jobs queued so far
        (at once when called there, e.g. from a future's then() callback)."""
        if self._closed:
            raise RuntimeError("libdct: this DctState is closed")
        if self._worker.on_thread():
            return fn()
        done = torch.futures.Future()
        self._worker.submit(lambda: _settle(done, fn))
        return done.wait()

    def _key(self, p):
        if self._positions is None:
            return id(p)
        try:
            return self._positions[id(p)]
        except KeyError:
            raise ValueError("a bucket holds a parameter that is not the model's (DctState(model=...))") from None

    def _comm_for(self, device):
        """The Comm that runs steps on buffers of this device (created on first use)."""
        key = device if self.data.backend == "nccl" and device.type == "cuda" else None
        comm = self._owned.comms.get(key)
        if comm is None:
            comm = Comm.from_torch(self.data, device=device, control=self.control)
            self._owned.comms[key] = comm
        return comm


class Bucket:
    """What dct_hook reads of DDP's GradBucket, to run the hook without DDP
    (a training loop of one's own, replaying buckets in benchmarks and tests):
    buffer is the flat gradient, parameters the tensors it concatenates."""

    def __init__(self, index, buffer, parameters, is_last):
        self._index, self._buffer, self._parameters, self._last = index, buffer, list(parameters), is_last

    def index(self):
        return self._index

    def buffer(self):
        return self._buffer

    def parameters(self):
        return self._parameters

    def is_last(self):
        return self._last


def dct_hook(state, bucket):
    """The DDP communication hook: bucket gradients in, a future of their
    compressed mean out (see DctState)."""
    if state._closed:
        raise RuntimeError("libdct: dct_hook called with a closed DctState")
    buf = bucket.buffer()
    job = BucketJob(bucket.index(), buf, [state._key(p) for p in bucket.parameters()],
                    [p.numel() for p in bucket.parameters()], bucket.is_last(), state.iter)
    if buf.is_cuda:  # the gradients are ready when the compute stream reaches this point
        job.ready = torch.cuda.Event()
        job.ready.record(torch.cuda.current_stream(buf.device))
        job.future = torch.futures.Future(devices=[buf.device])
    else:
        job.future = torch.futures.Future()
    if bucket.is_last():
        state.iter += 1
    runner = state._runner
    state._worker.submit(lambda: runner.run(job))
    return job.future


def _settle(future, fn):
    try:
        result = fn()
    except BaseException as e:  # SystemExit, KeyboardInterrupt too: the waiter gets it
        if not isinstance(e, Exception):
            err, e = RuntimeError(f"libdct: {type(e).__name__}: {e}"), e
            err.__cause__ = e
            e = err
        future.set_exception(e)
        return
    future.set_result(result)

