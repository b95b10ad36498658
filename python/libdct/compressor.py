"""A compressor: one tensor's (or DDP bucket's) error-feedback state and its
compressed allreduce."""
import ctypes

from . import _native
from .buffers import describe
from .config import Config, Stats
from .enums import DATATYPE_NAMES, OPS, datatype_from, enum_value
from .errors import check


class Compressor:
    def __init__(self, comm, count, dtype, config=None):
        """count elements of dtype ("fp32", "fp64", "fp16", "bf16" or a torch
        dtype); config a Config (None: environment and defaults)."""
        self.comm = comm
        self.count = int(count)
        self.dtype = datatype_from(dtype)
        native = (config or Config()).to_native()
        handle = ctypes.c_void_p()
        comm._call(_native.lib().dctCompressorCreate, comm.handle, self.count, self.dtype,
                   ctypes.byref(native), ctypes.byref(handle))
        self.handle = handle.value

    def allreduce(self, send, out=None, op="avg"):
        """out = sum or mean over ranks of compress(send + residual); in place
        when out is None or send itself. Collective; identical bits on every
        rank. Returns out."""
        out = send if out is None else out
        sp, n, dtype, stream = describe(send, "send")
        rp, rn, rdtype, _ = describe(out, "out", writable=True)
        if (rn, rdtype) != (n, dtype):
            raise ValueError(f"out ({rn} x {DATATYPE_NAMES[rdtype]}) must match send ({n} x {DATATYPE_NAMES[dtype]})")
        self.comm._call(_native.lib().dctSparseAllreduce, sp, rp, n, dtype, enum_value(OPS, op, "op"),
                        self._live(), self.comm.handle, stream)
        return out

    @property
    def stats(self):
        s = _native.Stats()
        check(_native.lib().dctCompressorGetStats(self._live(), ctypes.byref(s)), self.comm.handle)
        return Stats.from_native(s)

    @property
    def config(self):
        c = _native.Config()
        check(_native.lib().dctCompressorGetConfig(self._live(), ctypes.byref(c)), self.comm.handle)
        return Config.from_native(c)

    def get_residual(self, out):
        """Copies the committed residual (count elements: fp64 for fp64
        tensors, else fp32) into out, a tensor or array where the steps run."""
        ptr, n, _, stream = describe(out, "out", writable=True)
        self._expect_residual(out, n)
        check(_native.lib().dctCompressorGetResidual(self._live(), ptr, stream), self.comm.handle)
        return out

    def set_residual(self, residual):
        """Replaces the residual (a checkpoint's, or a rebuilt bucket's)."""
        ptr, n, _, stream = describe(residual, "residual")
        self._expect_residual(residual, n)
        check(_native.lib().dctCompressorSetResidual(self._live(), ptr, stream), self.comm.handle)

    def owner_range(self):
        """Global top-k: (begin, length), the entries of the tensor whose
        owner residual this rank holds (get_residual includes it); (0, 0): none."""
        begin, length = ctypes.c_size_t(0), ctypes.c_size_t(0)
        check(_native.lib().dctCompressorGetOwnerResidual(self._live(), None, ctypes.byref(begin),
                                                          ctypes.byref(length), None), self.comm.handle)
        return begin.value, length.value

    def get_owner_residual(self, out):
        """Copies the owner residual (owner_range()'s length, in the
        residual's type) into out, a tensor or array where the steps run."""
        ptr, n, _, stream = describe(out, "out", writable=True)
        self._expect_residual(out, n, self.owner_range()[1], "owner residual")
        if n:
            begin, length = ctypes.c_size_t(0), ctypes.c_size_t(0)
            check(_native.lib().dctCompressorGetOwnerResidual(self._live(), ptr, ctypes.byref(begin),
                                                              ctypes.byref(length), stream), self.comm.handle)
        return out

    def server_error(self):
        """A 1-bit compressor's server error: (begin, values), the chunk of
        the tensor this rank serves, as a host array of the accumulation type
        (numpy; fp64 for fp64 tensors, else fp32)."""
        import numpy
        lib, begin, length = _native.lib(), ctypes.c_size_t(0), ctypes.c_size_t(0)
        check(lib.dctCompressorGetServerError(self._live(), None, ctypes.byref(begin), ctypes.byref(length), None),
              self.comm.handle)
        out = numpy.zeros(length.value, dtype=numpy.float64 if self.dtype == 1 else numpy.float32)
        if length.value:
            check(lib.dctCompressorGetServerError(self._live(), out.ctypes.data, ctypes.byref(begin),
                                                  ctypes.byref(length), None), self.comm.handle)
        return begin.value, out

    def set_segments(self, offsets):
        """A 1-bit compressor's scale per segment (dctCompressorSetSegments):
        offsets are the segments' boundaries, 0 first and count last,
        non-decreasing (segment s = [offsets[s], offsets[s + 1])), e.g. the
        offsets of several tensors laid side by side in one flat buffer.
        Before the first step; every rank the same (a rank that differs
        fails the next step on every rank)."""
        offsets = [int(o) for o in offsets]
        if len(offsets) < 2:
            raise ValueError(f"set_segments: at least two offsets (0 and count), not {offsets}")
        native = (ctypes.c_size_t * len(offsets))(*offsets)
        check(_native.lib().dctCompressorSetSegments(self._live(), native, len(offsets) - 1), self.comm.handle)

    def save_state(self):
        """The compressor's whole state (residual, threshold schedule, 1-bit
        server error, ...) as bytes, for a checkpoint (dctCompressorSaveState)."""
        lib, size = _native.lib(), ctypes.c_size_t(0)
        check(lib.dctCompressorSaveState(self._live(), None, ctypes.byref(size), None), self.comm.handle)
        out = ctypes.create_string_buffer(size.value)
        check(lib.dctCompressorSaveState(self._live(), out, ctypes.byref(size), None), self.comm.handle)
        return out.raw[:size.value]

    def load_state(self, state):
        """Restores save_state()'s bytes, from a compressor of the same count,
        datatype and configuration (dctCompressorLoadState)."""
        state = bytes(state)
        check(_native.lib().dctCompressorLoadState(self._live(), state, len(state), None), self.comm.handle)

    @property
    def residual_dtype(self):
        return "fp64" if self.dtype == 1 else "fp32"

    def _expect_residual(self, buf, n, count=None, what="residual"):
        """buf (n elements) must be `count` (default: the tensor's) of the residual's type."""
        count = self.count if count is None else count
        want = "float64" if self.dtype == 1 else "float32"
        if n != count or not str(buf.dtype).endswith(want):
            raise ValueError(f"the {what} is {count} x {want}, not {n} x {buf.dtype}")

    def _live(self):
        if self.handle is None:
            raise ValueError("this Compressor is closed")
        return self.handle

    def close(self):
        if self.handle is not None:
            _native.lib().dctCompressorDestroy(self.handle)
            self.handle = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
