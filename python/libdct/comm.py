"""libdct.Comm: a dctComm_t over a torch.distributed process group or an mpi4py
communicator."""
import ctypes

from . import _native
from .compressor import Compressor
from .config import Config
from .errors import DctError, check


class Comm:
    """Create with Comm.from_torch(group) or Comm.from_mpi(comm); collective
    over the group's ranks. Close it (or use `with`) before the group goes."""

    def __init__(self, handle, transport=None, device_buffers=False, on_close=None):
        self.handle = handle
        self.transport = transport  # keeps the callbacks alive while the comm lives
        self.device_buffers = device_buffers
        self._on_close = on_close
        lib = _native.lib()
        rank, size = ctypes.c_int(), ctypes.c_int()
        check(lib.dctCommRank(handle, ctypes.byref(rank)), handle)
        check(lib.dctCommSize(handle, ctypes.byref(size)), handle)
        self.rank, self.size = rank.value, size.value

    @classmethod
    def from_torch(cls, group=None, device=None, control=None):
        """Over a torch.distributed group (None: the default group) or a
        libdct.groups.PrivateGroup. gloo (and any CPU backend): libdct's
        collectives run as the group's own all_gather / all_to_all_single /
        all_reduce. nccl: a libdct NCCL comm on `device` (None: the current
        one) whose unique id travels over `control` (a CPU group over the
        same ranks; None: the nccl group itself, through device memory).
        Every rank first checks that all loaded the same libdct version
        (libdct.library_agree: LibraryMismatch on every rank otherwise)."""
        from .groups import PrivateGroup, backend_of
        from .library_agree import agree_library
        if isinstance(group, PrivateGroup):
            pg, backend = group.pg, group.backend
        else:
            import torch.distributed as dist
            pg, backend = (group if group is not None else dist.group.WORLD), backend_of(group)
        if backend == "nccl":
            from .nccl import nccl_comm
            control = control.pg if isinstance(control, PrivateGroup) else control
            return nccl_comm(cls, pg if control is None else control, device, on_device=control is None)
        from .torch_transport import TorchTransport
        agree_library(pg)
        transport = TorchTransport(pg, backend)
        return cls(cls._init_callbacks(transport), transport)

    @classmethod
    def from_mpi(cls, comm=None):
        """Over an mpi4py communicator (None: COMM_WORLD), through
        dctCommInitMpi: the MPI transport with its pipelining."""
        from mpi4py import MPI
        comm = MPI.COMM_WORLD if comm is None else comm
        handle = ctypes.c_void_p()
        lib = _native.lib()
        check(lib.dctCommInitMpi(ctypes.c_void_p(MPI._handleof(comm)), ctypes.byref(handle)))
        return cls(handle.value)

    @staticmethod
    def _init_callbacks(transport):
        handle = ctypes.c_void_p()
        table = transport.table()
        res = _native.lib().dctCommInitCallbacks(ctypes.byref(table), ctypes.byref(handle))
        check(res, None, transport.take_error())
        return handle.value

    def compressor(self, count, dtype="fp32", config=None, **fields):
        """A Compressor for count elements; config fields as keywords
        (density=0.01, algorithm="split", compressor="onebit", ...)."""
        if fields:
            config = Config(**{**(vars(config) if config else {}), **fields})
        return Compressor(self, count, dtype, config)

    def sparse_allreduce(self, indices, values, count, out=None, op="sum", algorithm="auto", coo=False):
        """The exact sum of every rank's COO (libdct.sparse.sparse_allreduce)."""
        from .sparse import sparse_allreduce
        return sparse_allreduce(self, indices, values, count, out, op, algorithm, coo)

    def async_error(self):
        """The DctError of a fixed-capacity step that failed after its call
        returned (device buffers, Config(capacity_factor=...)), or None
        (dctCommGetAsyncError). Does not wait: a step still queued may fail
        later. Once set it stays set and the comm's later steps change
        nothing: save the compressors' states and continue on a new Comm."""
        if self.handle is None:
            raise ValueError("this Comm is closed")
        code = ctypes.c_int(0)
        check(_native.lib().dctCommGetAsyncError(self.handle, ctypes.byref(code)), self.handle)
        if code.value == 0:
            return None
        return DctError(code.value, "a fixed-capacity step failed after its call returned; this comm's later "
                                    "steps change nothing (continue on a new Comm)")

    def _call(self, fn, *args):
        """A collective C call: a failure raises DctError, chained to the
        exception a callback raised on this rank, if any."""
        if self.handle is None:
            raise ValueError("this Comm is closed")
        res = fn(*args)
        cause = self.transport.take_error() if self.transport is not None else None
        check(res, self.handle, cause)

    def close(self):
        if self.handle is not None:
            _native.lib().dctCommDestroy(self.handle)
            self.handle = None
            if self.transport is not None:
                self.transport.close()  # its group may then go, and with it the group's threads
            if self._on_close:
                self._on_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
