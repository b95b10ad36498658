"""The lossless sparse-input allreduce (dctSparseInputAllreduce) on torch
tensors and numpy arrays: every rank's (indices, values) summed exactly."""
import ctypes

from . import _native
from .buffers import describe
from .enums import ALGORITHM_NAMES, ALGORITHMS, OPS, enum_value


def _index_list(indices, count):
    """Indices as the C call reads them: uint32 (uint64 from count 2^32 on),
    flat and contiguous. torch has no uint32: int32 carries the same bits."""
    if hasattr(indices, "data_ptr"):
        import torch
        return indices.reshape(-1).to(torch.int64 if count > 0xFFFFFFFF else torch.int32).contiguous()
    import numpy as np
    return np.ascontiguousarray(indices.reshape(-1), dtype=np.uint64 if count > 0xFFFFFFFF else np.uint32)


def _pointer(buf):
    return (buf.data_ptr() if hasattr(buf, "data_ptr") else buf.ctypes.data) or None


def _empty(like, n):
    if hasattr(like, "data_ptr"):
        import torch
        return torch.empty(n, dtype=like.dtype, device=like.device)
    import numpy as np
    return np.empty(n, dtype=like.dtype)


def sparse_allreduce(comm, indices, values, count, out=None, op="sum", algorithm="auto", coo=False):
    """The sum over ranks of each rank's COO: indices strictly ascending and
    < count, values of one float type (torch or numpy, host or device as the
    comm moves them). Returns the dense sum (count elements; into `out` when
    given), or with coo=True the sum's nonzero entries as (indices, values).
    comm.sparse_info then says which plan ran and what it moved."""
    idx = _index_list(indices, count)
    vp, nnz, dtype, stream = describe(values, "values")
    if len(idx) != nnz:
        raise ValueError(f"{len(idx)} indices for {nnz} values")
    lib, got, info = _native.lib(), ctypes.c_size_t(0), _native.SparseInputInfo()
    args = (_pointer(idx), vp, nnz, count, dtype, enum_value(OPS, op, "op"), enum_value(ALGORITHMS, algorithm, "algorithm"))
    if coo:
        comm._call(lib.dctSparseInputAllreduce, *args, None, None, None, 0, ctypes.byref(got), None, comm.handle, stream)
        room = max(got.value, 1)
        out_idx, out_val = _empty(idx, room), _empty(values, room)
        comm._call(lib.dctSparseInputAllreduce, *args, None, _pointer(out_idx), _pointer(out_val), room,
                   ctypes.byref(got), ctypes.byref(info), comm.handle, stream)
        result = out_idx[:got.value], out_val[:got.value]
    else:
        result = _empty(values, count) if out is None else out
        op_, n, out_type, _ = describe(result, "out", writable=True)
        if (n, out_type) != (count, dtype):
            raise ValueError(f"out must hold {count} elements of the values' type")
        comm._call(lib.dctSparseInputAllreduce, *args, op_, None, None, 0, ctypes.byref(got), ctypes.byref(info),
                   comm.handle, stream)
    comm.sparse_info = {"algorithm": ALGORITHM_NAMES.get(info.algorithm, info.algorithm),
                        "input_nnz": info.inputNnz, "result_nnz": info.resultNnz,
                        "bytes_sent": info.bytesSent, "bytes_received": info.bytesReceived,
                        "dense_bytes": info.denseBytes}
    return result
