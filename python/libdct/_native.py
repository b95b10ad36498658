"""The C ABI of libdct.so through ctypes: finding the library, the structs
of dct.h, and the prototypes. Nothing here knows about torch or mpi4py."""
import ctypes
import os
import sys

from ._version import __version__

# The dct.h this binding was written against (DCT_VERSION_CODE): the
# package's own version, which the library it loads must report.
VERSION_CODE = (lambda x, y, z: x * 10000 + y * 100 + z)(*map(int, __version__.split(".")[:3]))
CONFIG_MAGIC = 0xDC7C0F19
CALLBACKS_MAGIC = 0xDC7CCA11
UNDEF_INT = -2147483648
UNDEF_DOUBLE = -1.0e300
NUM_PHASES = 5

_SYSTEM_NAMES = ("libdct.so.0", "libdct.so")
_PREFIX_LIBS = ("lib", "lib64", "lib/x86_64-linux-gnu")


def version_string(code):
    return f"{code // 10000}.{code // 100 % 100}.{code % 100}"


def _prefixes():
    return list(dict.fromkeys((sys.prefix, "/usr/local", "/usr")))


def _candidates():
    """(path, what it is), in the order they are tried: LIBDCT_LIBRARY alone
    when set (an explicit choice is never silently replaced); else the
    package's own copy (the wheel's); else the loader's search
    (LD_LIBRARY_PATH, ld.so.cache) and the usual prefixes, for a package
    installed without its library."""
    explicit = os.environ.get("LIBDCT_LIBRARY")
    if explicit:
        yield explicit, "LIBDCT_LIBRARY"
        return
    yield os.path.join(os.path.dirname(os.path.abspath(__file__)), "libdct.so"), "the package's own copy"
    for name in _SYSTEM_NAMES:
        yield name, "the loader's search"
    for prefix in _prefixes():
        for lib in _PREFIX_LIBS:
            for name in _SYSTEM_NAMES:
                yield os.path.join(prefix, lib, name), None


def load():
    """The CDLL of the first candidate that loads; otherwise an ImportError
    naming each candidate and why it failed (the loader's message names a
    missing dependency, such as libmpi.so.40)."""
    tried = []
    for path, what in _candidates():
        if os.sep in path and not os.path.exists(path):
            if what:
                tried.append(f"{path} ({what}): no such file")
            continue
        try:
            # CDLL (not PyDLL): every call releases the GIL while in C.
            return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            tried.append(f"{path} ({what or 'a usual prefix'}): {e}")
    if not os.environ.get("LIBDCT_LIBRARY"):
        tried.append(f"{'|'.join(_SYSTEM_NAMES)} under {', '.join(_prefixes())} ({', '.join(_PREFIX_LIBS)}): "
                     "none there")
    raise ImportError(f"libdct {__version__}: cannot load libdct.so. Tried, in order:\n  " + "\n  ".join(tried)
                      + "\nInstall the package with its library (pip install <libdct checkout>) or set "
                        f"LIBDCT_LIBRARY to a libdct.so of version {__version__}. Where a libdct.so exists but "
                        "another library it needs does not (the loader names it above: libmpi.so.40, ...), "
                        "install that one.")


class Config(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("magic", ctypes.c_uint), ("version", ctypes.c_uint),
                ("density", ctypes.c_double), ("thresholdInterval", ctypes.c_int),
                ("errorFeedback", ctypes.c_int), ("warmupSteps", ctypes.c_int),
                ("thresholdMethod", ctypes.c_int), ("algorithm", ctypes.c_int),
                ("seed", ctypes.c_longlong), ("rowSelection", ctypes.c_int),
                ("wireType", ctypes.c_int), ("compressor", ctypes.c_int), ("autoGlobalTopk", ctypes.c_int),
                ("capacityFactor", ctypes.c_double), ("ownerReturn", ctypes.c_int)]

    @classmethod
    def initializer(cls):
        """DCT_CONFIG_INITIALIZER: every field undefined."""
        c = cls()
        c.size, c.magic, c.version = ctypes.sizeof(cls), CONFIG_MAGIC, VERSION_CODE
        c.density, c.seed, c.capacityFactor = UNDEF_DOUBLE, UNDEF_INT, UNDEF_DOUBLE
        for name in ("thresholdInterval", "errorFeedback", "warmupSteps", "thresholdMethod", "algorithm",
                     "rowSelection", "wireType", "compressor", "autoGlobalTopk", "ownerReturn"):
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
    "dctCompressorGetOwnerResidual": (_int, [_vp, _vp, ctypes.POINTER(_sz), ctypes.POINTER(_sz), _vp]),
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
        if not hasattr(self.dll, "dctGetVersion"):
            raise ImportError(f"libdct {__version__}: {self.dll._name} is not libdct.so (no dctGetVersion)")
        for name, (restype, argtypes) in _PROTOTYPES.items():
            fn = getattr(self.dll, name, None)
            if fn is None:  # a build without NCCL has no dctCommInitNccl
                continue
            fn.restype, fn.argtypes = restype, argtypes
            setattr(self, name, fn)
        v = ctypes.c_int(0)
        self.dctGetVersion(ctypes.byref(v))
        self.version_code = v.value
        if v.value != VERSION_CODE:
            raise ImportError(f"libdct {__version__}: {self.dll._name} is libdct {version_string(v.value)}; this "
                              f"package needs the same version (the wheel carries it; LIBDCT_LIBRARY overrides)")


_library = None


def lib():
    global _library
    if _library is None:
        _library = Library()
    return _library
