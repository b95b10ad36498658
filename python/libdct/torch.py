"""A DDP communication hook shaped like PyTorch's PowerSGD hook:

    state = DctState(process_group=None, density=0.01)
    model.register_comm_hook(state, dct_hook)

Each bucket (by bucket index) gets a libdct compressor whose error-feedback
residual lives in the state; its gradients become the mean over ranks of
compress(gradient + residual), identical bits on every rank. Buckets go in
order through one communication thread, so the backward pass never waits
for them; the hook returns a future that thread completes."""
import contextlib
import queue
import threading

import torch
import torch.distributed as dist

from .comm import Comm
from .config import Config
from .torch_transport import sum_in_place

_DENSE = "dense"


class _Bucket:
    """A compressor and the bucket layout it was made for."""

    def __init__(self, compressor, layout, device):
        self.compressor = compressor
        self.layout = layout  # (numel, dtype, ((param id, numel), ...))
        self.device = device

    def params(self):
        return _params(self.layout)


def _params(layout):
    """(param id, offset, numel) of each parameter in a bucket layout."""
    offset = 0
    for pid, n in layout[2]:
        yield pid, offset, n
        offset += n


class DctState:
    """What dct_hook keeps between steps.

    process_group: the DDP model's group (None: the default group). The
        state talks on its own copy of it, so its traffic never interleaves
        with other collectives on the group.
    density: fraction of each bucket sent (top-K), in (0, 1].
    start_iter: iterations of plain allreduce before compression (like
        start_powerSGD_iter); 0 compresses from the first.
    min_compression_bytes: buckets smaller than this go through allreduce.
    compressor: "topk" (DCT-DP) or "onebit" (1-bit Adam's allreduce, one
        compressor and scale per parameter of min_compression_bytes or more).
    algorithm: "allgather" (default), "split", "dense", "globaltopk" or "auto" (top-K's
        exchange). Not auto by default: its tuner times whole steps, and
        under DDP those are dominated by ranks waiting for each other's
        backward, so it settled on dense steps (5x the bytes) even at 1 Gbit/s.
    wire_type: the values' type on the wire ("fp16", "bf16"; None: the
        bucket's own), the rounding kept in the residual.
    config: a libdct.Config for the remaining fields (threshold_method, ...).
    Every field must be the same on every rank: a rank that differs fails
    the step on every rank with DctError.
    """

    def __init__(self, process_group=None, density=0.01, start_iter=0, min_compression_bytes=16384,
                 compressor="topk", algorithm="allgather", wire_type=None, config=None):
        if not 0 < density <= 1:
            raise ValueError(f"density must be in (0, 1], not {density}")
        self.process_group = process_group
        self.density = density
        self.start_iter = start_iter
        self.min_compression_bytes = min_compression_bytes
        self.compressor = compressor
        self.algorithm = algorithm
        self.wire_type = wire_type
        self.config = config or Config()
        self.compressor_config().to_native()  # a bad name fails here, not in the first backward
        self.iter = 0
        self.rebuilds = 0  # compressors made afresh because DDP re-bucketed
        self.bytes_sent = 0  # payload bytes this rank put on the wire, all buckets
        self.dense_bytes = 0  # what plain allreduce would have put (the buckets' size)
        self.group = _own_copy(process_group)
        self.world_size = dist.get_world_size(self.group)
        self.comm = Comm.from_torch(self.group)
        self._buckets = {}
        self._per_parameter = {}  # 1-bit: param id -> _Bucket of that parameter alone
        self._orphans = {}  # param id -> residual slice waiting for its new bucket
        self._jobs = queue.Queue()
        self._thread = threading.Thread(target=self._serve, name="libdct-comm", daemon=True)
        self._thread.start()

    def compressor_config(self):
        fields = {k: v for k, v in vars(self.config).items() if v is not None}
        fields.update(density=self.density, compressor=self.compressor, algorithm=self.algorithm)
        if self.wire_type is not None:
            fields["wire_type"] = self.wire_type
        return Config(**fields)

    def residuals(self):
        """{param id: residual} of every parameter with one (a copy; taken on
        the communication thread after the steps queued so far)."""
        return self._on_thread(self._collect_residuals)

    def stats(self, bucket_index):
        """libdct.Stats of a bucket's top-K compressor (None while it has none;
        1-bit compressors are per parameter)."""
        return self._on_thread(lambda: (b := self._buckets.get(bucket_index)) and b.compressor.stats)

    def close(self):
        """Stops the communication thread, frees the compressors and the comm."""
        if self._thread.is_alive():
            self._jobs.put(None)
            self._thread.join()
        for b in [*self._buckets.values(), *self._per_parameter.values()]:
            b.compressor.close()
        self._buckets.clear()
        self._per_parameter.clear()
        self.comm.close()

    # --- the communication thread ---

    def _serve(self):
        while True:
            job = self._jobs.get()
            if job is None:
                return
            job()

    def _on_thread(self, fn):
        done = torch.futures.Future()
        self._jobs.put(lambda: _settle(done, fn))
        return done.wait()

    def _reduce(self, buf, index, layout, compress, stream):
        if buf.is_cuda and not self.comm.device_buffers:  # a gloo group: through host memory
            with torch.cuda.stream(stream):
                host = buf.cpu()  # after the gradients, on their stream
            self._reduce(host, index, layout, compress, None)
            with torch.cuda.stream(stream):
                buf.copy_(host)
            stream.synchronize()
            return buf
        with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
            pieces, plain = self._compressed_pieces(index, layout, buf) if compress else ([], [buf])
            for bucket, piece in pieces:
                bucket.compressor.allreduce(piece, op="avg")
                self.bytes_sent += bucket.compressor.stats.bytes_sent
            if plain:  # one dense allreduce for whatever is not compressed
                joined = plain[0] if len(plain) == 1 else torch.cat(plain)
                _dense_allreduce(joined, self.group, self.world_size)
                if joined is not plain[0]:
                    for piece, part in zip(plain, joined.split([p.numel() for p in plain])):
                        piece.copy_(part)
                self.bytes_sent += joined.numel() * joined.element_size()
        self.dense_bytes += buf.numel() * buf.element_size()
        if stream is not None:
            stream.synchronize()
        return buf

    def _compressed_pieces(self, index, layout, buf):
        """([(state, slice of buf)] to compress, [slices to allreduce]).
        Top-K: the whole bucket. 1-bit: each parameter alone, so that each
        gets its own scale (one scale over a bucket of conv and dense layers
        drove a CNN to chance accuracy: examples/torch_ddp), those under
        min_compression_bytes allreduced together; keyed by parameter, so
        re-bucketing leaves them be."""
        if self.compressor != "onebit":
            return [(self._bucket_for(index, layout, buf), buf)], []
        pieces, plain = [], []
        for pid, offset, n in _params(layout):
            piece = buf[offset:offset + n]
            if n * buf.element_size() < self.min_compression_bytes:
                plain.append(piece)
                continue
            one = self._per_parameter.get(pid)
            if one is None:
                piece_layout = (n, layout[1], ((pid, n),))
                one = _Bucket(self.comm.compressor(n, buf.dtype, self.compressor_config()), piece_layout, buf.device)
                self._per_parameter[pid] = one
            pieces.append((one, piece))
        return pieces, plain

    def _bucket_for(self, index, layout, buf):
        """The bucket's compressor; a fresh one when DDP re-bucketed, which
        takes over its parameters' residuals from the buckets that held them."""
        bucket = self._buckets.get(index)
        if bucket is not None and bucket.layout == layout:
            return bucket
        fresh = _Bucket(self.comm.compressor(layout[0], buf.dtype, self.compressor_config()), layout, buf.device)
        wanted = {pid for pid, _, _ in fresh.params()}
        for i, old in list(self._buckets.items()):
            if i == index or any(pid in wanted for pid, _, _ in old.params()):
                residual = _residual_of(old)
                for pid, offset, n in old.params():
                    self._orphans[pid] = residual[offset:offset + n]
                old.compressor.close()
                del self._buckets[i]
        adopted = [pid for pid in wanted if pid in self._orphans]
        if adopted:
            merged = torch.zeros(layout[0], dtype=_residual_dtype(fresh.compressor), device=buf.device)
            for pid, offset, n in fresh.params():
                if pid in self._orphans:
                    merged[offset:offset + n] = self._orphans.pop(pid).to(buf.device)
            fresh.compressor.set_residual(merged)
        if bucket is not None or adopted:
            self.rebuilds += 1
        self._buckets[index] = fresh
        return fresh

    def _collect_residuals(self):
        out = {pid: piece.clone() for pid, piece in self._orphans.items()}
        for b in [*self._buckets.values(), *self._per_parameter.values()]:
            residual = _residual_of(b).cpu()
            for pid, offset, n in b.params():
                out[pid] = residual[offset:offset + n]
        return out


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
    buf = bucket.buffer()
    params = bucket.parameters()
    layout = (buf.numel(), buf.dtype, tuple((id(p), p.numel()) for p in params))
    compress = state.iter >= state.start_iter and buf.numel() * buf.element_size() >= state.min_compression_bytes
    if bucket.is_last():
        state.iter += 1
    stream = torch.cuda.current_stream(buf.device) if buf.is_cuda else None
    future = torch.futures.Future()
    index = bucket.index()
    state._jobs.put(lambda: _settle(future, lambda: state._reduce(buf, index, layout, compress, stream)))
    return future


def _settle(future, fn):
    try:
        future.set_result(fn())
    except BaseException as e:  # the future carries it to the training loop
        future.set_exception(e)


def _dense_allreduce(buf, group, world_size):
    sum_in_place(buf, group)
    buf.div_(world_size)


def _residual_dtype(compressor):
    return torch.float64 if compressor.residual_dtype == "fp64" else torch.float32


def _residual_of(bucket):
    c = bucket.compressor
    return c.get_residual(torch.empty(c.count, dtype=_residual_dtype(c), device=bucket.device))


def _own_copy(group):
    """A new group over group's ranks (collective over the world, like
    dist.new_group)."""
    if group is None or group == dist.group.WORLD:
        ranks = None
    else:
        ranks = sorted(dist.distributed_c10d._pg_group_ranks[group].keys())
    return dist.new_group(ranks=ranks, backend=dist.get_backend(group))
