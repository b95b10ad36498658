"""libdct failures as Python exceptions: each names dctGetLastError's message."""
import ctypes

from . import _native

RESULT_NAMES = ("success", "invalid argument", "invalid usage", "system error", "internal error",
                "transport error", "CUDA error", "not supported", "out of memory")


class DctError(RuntimeError):
    """A libdct call failed. `result` is the dctResult_t, `message` the library's
    account of it (dctGetLastError)."""

    def __init__(self, result, message):
        self.result = result
        self.message = message
        name = RESULT_NAMES[result] if 0 <= result < len(RESULT_NAMES) else f"result {result}"
        super().__init__(f"libdct: {name}: {message}")


def check(result, comm_handle=None, cause=None):
    """Raises DctError for a failed dctResult_t; `cause` (an exception raised
    inside a callback on this rank) is chained to it."""
    if result == 0:
        return
    message = _native.lib().dctGetLastError(ctypes.c_void_p(comm_handle) if comm_handle else None)
    err = DctError(result, message.decode(errors="replace") if message else "(no message)")
    if cause is not None:
        raise err from cause
    raise err
