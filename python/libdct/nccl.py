"""A libdct NCCL comm for a torch.distributed NCCL group: a fresh NCCL
communicator whose unique id is broadcast over the group, handed to
dctCommInitNccl. Device buffers, the caller's CUDA stream. Every step of
the making is agreed: a failure on any rank fails every rank."""
import ctypes

from . import _native

_UNIQUE_ID_BYTES = 128  # NCCL_UNIQUE_ID_BYTES


class _UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * _UNIQUE_ID_BYTES)]


def _libnccl():
    # The NCCL libdct.so was linked with (already loaded with it).
    nccl = ctypes.CDLL("libnccl.so.2")
    nccl.ncclGetUniqueId.argtypes = [ctypes.POINTER(_UniqueId)]
    nccl.ncclCommInitRank.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, _UniqueId, ctypes.c_int]
    nccl.ncclCommDestroy.argtypes = [ctypes.c_void_p]
    nccl.ncclGetErrorString.restype = ctypes.c_char_p
    return nccl


def nccl_comm(comm_class, group, device=None, on_device=True):
    """group carries rank 0's unique id (a byte of status first, so that a
    failure to make it fails every rank instead of leaving them waiting):
    the nccl group itself (on_device) or a CPU group over the same ranks.
    The comm lives on `device` (None: the current CUDA device)."""
    import torch
    from .groups import all_reduce, broadcast
    from .library_agree import agree_library
    lib = _native.lib()
    device = torch.device("cuda", torch.cuda.current_device()) if device is None else torch.device(device)
    agree_library(group, device if on_device else None)
    rank, size = group.rank(), group.size()
    payload = torch.zeros(1 + _UNIQUE_ID_BYTES, dtype=torch.uint8)
    uid, why = _UniqueId(), None
    if rank == 0:
        why = _make_unique_id(lib, uid)
        payload[0] = 1 if why is None else 2
        payload[1:] = torch.frombuffer(bytearray(ctypes.string_at(ctypes.addressof(uid), _UNIQUE_ID_BYTES)),
                                       dtype=torch.uint8)
    shared = payload.to(device) if on_device else payload
    broadcast(group, shared, 0)
    payload = shared.cpu()
    if payload[0].item() != 1:
        raise RuntimeError(f"libdct: no NCCL unique id from group rank 0: {why or 'it failed there'}")
    ctypes.memmove(ctypes.addressof(uid), bytes(payload[1:].tolist()), _UNIQUE_ID_BYTES)
    nccl, raw, handle, why = None, ctypes.c_void_p(), ctypes.c_void_p(), None
    try:
        nccl = _libnccl()
        with torch.cuda.device(device):
            res = nccl.ncclCommInitRank(ctypes.byref(raw), size, uid, rank)
            if res != 0:
                why = f"ncclCommInitRank: {nccl.ncclGetErrorString(res).decode()}"
            elif (res := lib.dctCommInitNccl(raw, ctypes.byref(handle))) != 0:
                why = f"dctCommInitNccl: {lib.dctGetErrorString(res).decode()}"
    except Exception as e:  # still take part in the vote below
        why = f"{type(e).__name__}: {e}"
    # Every rank learns whether every rank has a comm; none keeps a half-made one.
    failed = torch.tensor([0 if why is None else 1], dtype=torch.int32)
    failed = failed.to(device) if on_device else failed
    all_reduce(group, failed, torch.distributed.ReduceOp.MAX)
    if why is not None or failed.item():
        if handle.value:
            lib.dctCommDestroy(handle)
        if raw.value:
            nccl.ncclCommDestroy(raw)
        raise RuntimeError(f"libdct: making the NCCL comm failed on {'this rank' if why else 'another rank'}"
                           + (f": {why}" if why else ""))
    return comm_class(handle.value, device_buffers=True, on_close=lambda: nccl.ncclCommDestroy(raw))


def _make_unique_id(lib, uid):
    """None, or why there is no unique id."""
    if not hasattr(lib, "dctCommInitNccl"):
        return "this libdct.so was built without NCCL; use a gloo group"
    try:
        res = _libnccl().ncclGetUniqueId(ctypes.byref(uid))
    except OSError as e:
        return f"libnccl.so.2: {e}"
    return None if res == 0 else f"ncclGetUniqueId returned {res}"
