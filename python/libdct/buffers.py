"""Raw pointers of torch tensors and numpy arrays for the C calls."""
from .enums import datatype_of


def describe(buf, name, writable=False):
    """(pointer, element count, dctDataType_t, stream) of a contiguous torch
    tensor or numpy array; stream is the tensor's current CUDA stream, else None."""
    if hasattr(buf, "data_ptr"):  # torch.Tensor
        if not buf.is_contiguous():
            raise ValueError(f"{name} must be contiguous")
        stream = None
        if buf.is_cuda:
            import torch
            stream = torch.cuda.current_stream(buf.device).cuda_stream
        return buf.data_ptr() or None, buf.numel(), datatype_of(buf), stream
    if hasattr(buf, "ctypes"):  # numpy.ndarray
        if not buf.flags["C_CONTIGUOUS"]:
            raise ValueError(f"{name} must be C-contiguous")
        if writable and not buf.flags["WRITEABLE"]:
            raise ValueError(f"{name} is read-only")
        return buf.ctypes.data or None, buf.size, datatype_of(buf), None
    raise TypeError(f"{name} must be a torch.Tensor or a numpy.ndarray, not {type(buf).__name__}")


def is_device(buf):
    return bool(getattr(buf, "is_cuda", False))
