"""libdct: error-compensated compressed collectives (DCT-DP top-K, 1-bit) for
PyTorch and numpy, over torch.distributed groups or MPI.

    comm = libdct.Comm.from_torch()          # or Comm.from_mpi() under mpirun
    grad = comm.compressor(n, "fp32", density=0.01)
    grad.allreduce(tensor)                   # in place: mean of compressed tensors

libdct.torch has the DDP communication hook (DctState, dct_hook).

Importing the package loads libdct.so (libdct._native: the package's own
copy unless LIBDCT_LIBRARY names another) and checks its version, so a rank
without a usable library fails here, before any collective."""
from . import _native
from ._version import __version__
from .comm import Comm
from .compressor import Compressor
from .config import Config, Stats
from .errors import DctError

_native.lib()
__all__ = ["Comm", "Compressor", "Config", "Stats", "DctError", "__version__"]
