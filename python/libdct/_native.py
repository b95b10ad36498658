"""The C ABI of libdct.so through ctypes: finding the library, the structs
of dct.h, and the prototypes. Nothing here knows about torch or mpi4py."""
import ctypes
import os
import sys

# The dct.h this binding was written against (DCT_VERSION_CODE).
VERSION_CODE = 400
CONFIG_MAGIC = 0xDC7C0F19
CALLBACKS_MAGIC = 0xDC7CCA11
UNDEF_INT = -2147483648
UNDEF_DOUBLE = -1.0e300
NUM_PHASES = 5

_SONAMES = ("libdct.so.0", "libdct.so")


def _candidates():
    """Where users expect the library, in order: an explicit path, next to the
    package, the loader's own search (LD_LIBRARY_PATH, ld.so.cache), then the
    usual install prefixes."""
    explicit = os.environ.get("LIBDCT_LIBRARY")
    if explicit:
        yield explicit
        return
    here = os.path.dirname(os.path.abspath(__file__))
    for name in _SONAMES:
        yield os.path.join(here, name)
    yield from _SONAMES
    for prefix in (sys.prefix, "/usr/local", "/usr"):
        for lib in ("lib", "lib64", "lib/x86_64-linux-gnu"):
            for name in _SONAMES:
                yield os.path.join(prefix, lib, name)


def load():
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(path)
            continue
        try:
            # CDLL (not PyDLL): every call releases the GIL while in C.
            return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise OSError("libdct.so not found; set LIBDCT_LIBRARY to its path or add its folder to "
                  "LD_LIBRARY_PATH. Tried: " + "; ".join(tried))


class Config(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("magic", ctypes.c_uint), ("version", ctypes.c_uint),
                ("density", ctypes.c_double), ("thresholdInterval", ctypes.c_int),
                ("errorFeedback", ctypes.c_int), ("warmupSteps", ctypes.c_int),
                ("thresholdMethod", ctypes.c_int), ("algorithm", ctypes.c_int),
                ("seed", ctypes.c_longlong), ("rowSelection", ctypes.c_int),
                ("wireType", ctypes.c_int), ("compressor", ctypes.c_int), ("autoGlobalTopk", ctypes.c_int),
                ("capacityFactor", ctypes.c_double)]

    @classmethod
    def initializer(cls):
        """DCT_CONFIG_INITIALIZER: every field undefined."""
        c = cls()
        c.size, c.magic, c.version = ctypes.sizeof(cls), CONFIG_MAGIC, VERSION_CODE
        c.density, c.seed, c.capacityFactor = UNDEF_DOUBLE, UNDEF_INT, UNDEF_DOUBLE
        for name in ("thresholdInterval", "errorFeedback", "warmupSteps", "thresholdMethod", "algorithm",
                     "rowSelection", "wireType", "compressor", "autoGlobalTopk"):
            setattr(c, name, UNDEF_INT)
        return c


class Stats(ctypes.Structure):
    _fields_ = [("step", ctypes.c_uint64), ("threshold", ctypes.c_double), ("nnz", ctypes.c_uint64),
                ("nonFinite", ctypes.c_uint64), ("bytesSent", ctypes.c_uint64),
                ("bytesReceived", ctypes.c_uint64), ("denseBytes", ctypes.c_uint64),
                ("algorithm", ctypes.c_int), ("indexBytes", ctypes.c_int),
                ("thresholdEstimates", ctypes.c_uint64), ("totalBytesSent", ctypes.c_uint64),
                ("totalBytesReceived", ctypes.c_uint64), ("totalDenseBytes", ctypes.c_uint64),
                ("phaseUs", ctypes.c_double * NUM_PHASES), ("totalPhaseUs", ctypes.c_double * NUM_PHASES),
                ("ownerKept", ctypes.c_uint64), ("ownerThreshold", ctypes.c_double),
                ("ownerResidualMass", ctypes.c_double)]


_vp, _sz, _int = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
_SizeArray = ctypes.POINTER(ctypes.c_size_t)
ALLGATHER = ctypes.CFUNCTYPE(_int, _vp, _vp, _sz, _vp, _vp)
ALLGATHERV = ctypes.CFUNCTYPE(_int, _vp, _sz, _vp, _SizeArray, _SizeArray, _vp, _vp)
ALLTOALLV = ctypes.CFUNCTYPE(_int, _vp, _SizeArray, _SizeArray, _vp, _SizeArray, _SizeArray, _vp, _vp)
ALLREDUCE_SUM = ctypes.CFUNCTYPE(_int, _vp, _vp, _sz, _int, _vp, _vp)
VOTE_MAX = ctypes.CFUNCTYPE(_int, ctypes.c_int32, ctypes.POINTER(ctypes.c_int32), _vp)


class Callbacks(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("magic", ctypes.c_uint), ("version", ctypes.c_uint),
                ("rank", _int), ("nranks", _int), ("deviceBuffers", _int), ("context", _vp),
                ("allgather", ALLGATHER), ("allgatherv", ALLGATHERV), ("alltoallv", ALLTOALLV),
                ("allreduceSum", ALLREDUCE_SUM), ("voteMax", VOTE_MAX)]


class SparseInputInfo(ctypes.Structure):
    """dctSparseInputInfo_t."""
    _fields_ = [("algorithm", _int), ("inputNnz", ctypes.c_uint64), ("resultNnz", ctypes.c_uint64),
                ("bytesSent", ctypes.c_uint64), ("bytesReceived", ctypes.c_uint64),
                ("denseBytes", ctypes.c_uint64)]


_PROTOTYPES = {
    "dctGetErrorString": (ctypes.c_char_p, [_int]),
    "dctGetLastError": (ctypes.c_char_p, [_vp]),
    "dctGetVersion": (_int, [ctypes.POINTER(_int)]),
    "dctCommInitCallbacks": (_int, [ctypes.POINTER(Callbacks), ctypes.POINTER(_vp)]),
    "dctCommInitMpi": (_int, [_vp, ctypes.POINTER(_vp)]),
    "dctCommInitNccl": (_int, [_vp, ctypes.POINTER(_vp)]),
    "dctCommDestroy": (_int, [_vp]),
    "dctCommRank": (_int, [_vp, ctypes.POINTER(_int)]),
    "dctCommSize": (_int, [_vp, ctypes.POINTER(_int)]),
    "dctCommGetAsyncError": (_int, [_vp, ctypes.POINTER(_int)]),
    "dctCompressorCreate": (_int, [_vp, _sz, _int, ctypes.POINTER(Config), ctypes.POINTER(_vp)]),
    "dctCompressorDestroy": (_int, [_vp]),
    "dctCompressorGetStats": (_int, [_vp, ctypes.POINTER(Stats)]),
    "dctCompressorGetConfig": (_int, [_vp, ctypes.POINTER(Config)]),
    "dctCompressorGetResidual": (_int, [_vp, _vp, _vp]),
    "dctCompressorSetResidual": (_int, [_vp, _vp, _vp]),
    "dctCompressorGetServerError": (_int, [_vp, _vp, ctypes.POINTER(_sz), ctypes.POINTER(_sz), _vp]),
    "dctCompressorSetSegments": (_int, [_vp, ctypes.POINTER(_sz), _int]),
    "dctCompressorSaveState": (_int, [_vp, _vp, ctypes.POINTER(_sz), _vp]),
    "dctCompressorLoadState": (_int, [_vp, ctypes.c_char_p, _sz, _vp]),
    "dctSparseAllreduce": (_int, [_vp, _vp, _sz, _int, _int, _vp, _vp, _vp]),
    "dctSparseInputAllreduce": (_int, [_vp, _vp, _sz, _sz, _int, _int, _int, _vp, _vp, _vp, _sz,
                                       ctypes.POINTER(_sz), ctypes.POINTER(SparseInputInfo), _vp, _vp]),
}


class Library:
    """The loaded libdct.so with typed entry points (lib.dctSparseAllreduce...)."""

    def __init__(self):
        self.dll = load()
        for name, (restype, argtypes) in _PROTOTYPES.items():
            fn = getattr(self.dll, name, None)
            if fn is None:  # a build without NCCL has no dctCommInitNccl
                continue
            fn.restype, fn.argtypes = restype, argtypes
            setattr(self, name, fn)
        v = ctypes.c_int(0)
        self.dctGetVersion(ctypes.byref(v))
        self.version_code = v.value
        if v.value // 100 != VERSION_CODE // 100:
            raise OSError(f"libdct.so is version {v.value}, this package needs {VERSION_CODE // 10000}."
                          f"{VERSION_CODE // 100 % 100}.x")


_library = None


def lib():
    global _library
    if _library is None:
        _library = Library()
    return _library
