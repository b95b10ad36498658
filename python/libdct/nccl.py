"""A libdct NCCL comm for a torch.distributed NCCL group: a fresh NCCL
communicator whose unique id is broadcast over the group, handed to
dctCommInitNccl. Device buffers, the caller's CUDA stream."""
import ctypes

from . import _native
from .errors import check

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


def nccl_comm(comm_class, group):
    import torch
    import torch.distributed as dist
    lib = _native.lib()
    if not hasattr(lib, "dctCommInitNccl"):
        raise RuntimeError("this libdct.so was built without NCCL; use a gloo group")
    nccl = _libnccl()
    rank, size = dist.get_rank(group), dist.get_world_size(group)
    uid = _UniqueId()
    if rank == 0 and nccl.ncclGetUniqueId(ctypes.byref(uid)) != 0:
        raise RuntimeError("ncclGetUniqueId failed")
    device = torch.device("cuda", torch.cuda.current_device())
    raw_id = bytearray(ctypes.string_at(ctypes.addressof(uid), _UNIQUE_ID_BYTES))
    shared = torch.frombuffer(raw_id, dtype=torch.uint8).to(device)
    root = 0 if group is None else dist.distributed_c10d._get_global_rank(group, 0)
    dist.broadcast(shared, src=root, group=group)
    ctypes.memmove(ctypes.addressof(uid), bytes(shared.cpu().tolist()), _UNIQUE_ID_BYTES)
    raw = ctypes.c_void_p()
    res = nccl.ncclCommInitRank(ctypes.byref(raw), size, uid, rank)
    if res != 0:
        raise RuntimeError(f"ncclCommInitRank: {nccl.ncclGetErrorString(res).decode()}")
    handle = ctypes.c_void_p()
    res = lib.dctCommInitNccl(raw, ctypes.byref(handle))
    if res != 0:
        nccl.ncclCommDestroy(raw)
        check(res)
    return comm_class(handle.value, device_buffers=True, on_close=lambda: nccl.ncclCommDestroy(raw))
