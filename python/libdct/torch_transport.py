"""dctCallbacks_t over a torch.distributed process group (gloo or any CPU
backend; a registered group or a libdct.groups private one): libdct's host
buffers wrapped as uint8 tensors without copies.
gloo has no uneven allgather, so allgatherv is an all_to_all_single of the
rank's message to every rank, which moves the same bytes."""
import ctypes

import torch
import torch.distributed as dist

from . import _native
from .groups import all_gather, all_reduce, all_to_all_single, sum_in_place

_TORCH_TYPES = {0: torch.float32, 1: torch.float64, 2: torch.float16, 3: torch.bfloat16}


def _view(ptr, nbytes, dtype=torch.uint8):
    """A tensor over nbytes of host memory at ptr (shared, not copied)."""
    if nbytes == 0:
        return torch.empty(0, dtype=dtype)
    return torch.frombuffer((ctypes.c_char * nbytes).from_address(ptr), dtype=dtype)


def _packed(offsets, sizes):
    return all(offsets[q] == offsets[0] + sum(sizes[:q]) for q in range(len(sizes)))


class TorchTransport:
    def __init__(self, group=None, backend="gloo"):
        self.group = group if group is not None else dist.group.WORLD
        self.backend = backend
        self.rank, self.size = self.group.rank(), self.group.size()
        self._error = None
        self._faults = {}  # tests: op name -> calls to let pass before one fails
        self._funcs = (_native.ALLGATHER(self._guard("allgather", self._allgather)),
                       _native.ALLGATHERV(self._guard("allgatherv", self._allgatherv)),
                       _native.ALLTOALLV(self._guard("alltoallv", self._alltoallv)),
                       _native.ALLREDUCE_SUM(self._guard("allreduce", self._allreduce_sum)),
                       _native.VOTE_MAX(self._vote_max))

    def table(self):
        t = _native.Callbacks()
        t.size, t.magic, t.version = ctypes.sizeof(t), _native.CALLBACKS_MAGIC, _native.VERSION_CODE
        t.rank, t.nranks, t.deviceBuffers, t.context = self.rank, self.size, 0, None
        t.allgather, t.allgatherv, t.alltoallv, t.allreduceSum, t.voteMax = self._funcs
        return t

    def close(self):
        """Lets go of the group, once the comm that calls back here is
        destroyed. The callbacks reference this object, so without this the
        group would live until a garbage collection: a gloo group's worker
        threads would then outlive close(), and one that drops the last
        reference to a tensor made here after the interpreter has begun to
        finalize aborts the process (it cannot take the GIL)."""
        self.group, self._funcs = None, ()

    def take_error(self):
        """The exception a callback raised on this rank since the last call."""
        err, self._error = self._error, None
        return err

    def inject_failure(self, op, after=0):
        """Tests: the op's call number `after` (from now) takes part in its
        collective, then reports failure, as a real fault would."""
        self._faults[op] = after

    def _guard(self, name, body):
        def callback(*args):
            try:
                body(*args)
                left = self._faults.get(name)
                if left is not None:
                    self._faults[name] = left - 1
                    if left == 0:
                        del self._faults[name]
                        raise RuntimeError(f"injected failure in {name} on rank {self.rank}")
                return 0
            except BaseException as e:  # never unwind through C
                self._error = self._error or e
                return 1
        return callback

    def _allgather(self, send, recv, nbytes, context, stream):
        if nbytes == 0:
            return
        out = _view(recv, nbytes * self.size)
        mine = _view(send, nbytes).clone()  # send may lie inside recv
        all_gather(self.group, list(out.split(nbytes)), mine)

    def _allgatherv(self, send, send_bytes, recv, recv_bytes, recv_offsets, context, stream):
        sizes = [recv_bytes[q] for q in range(self.size)]
        offsets = [recv_offsets[q] for q in range(self.size)]
        if sum(sizes) == 0:
            return
        mine = _view(send, send_bytes).repeat(self.size)
        self._exchange(mine, [send_bytes] * self.size, recv, sizes, offsets)

    def _alltoallv(self, send, send_bytes, send_offsets, recv, recv_bytes, recv_offsets, context, stream):
        ssizes = [send_bytes[q] for q in range(self.size)]
        soffsets = [send_offsets[q] for q in range(self.size)]
        rsizes = [recv_bytes[q] for q in range(self.size)]
        roffsets = [recv_offsets[q] for q in range(self.size)]
        if _packed(soffsets, ssizes):
            outgoing = _view(send + soffsets[0], sum(ssizes)).clone() if sum(ssizes) else _view(0, 0)
        else:
            outgoing = torch.cat([_view(send + o, n) for o, n in zip(soffsets, ssizes)])
        self._exchange(outgoing, ssizes, recv, rsizes, roffsets)

    def _exchange(self, outgoing, ssizes, recv, rsizes, roffsets):
        total = sum(rsizes)
        packed = _packed(roffsets, rsizes)
        incoming = _view(recv + roffsets[0], total) if packed and total else torch.empty(total, dtype=torch.uint8)
        all_to_all_single(self.group, incoming, outgoing, rsizes, ssizes)
        if not packed:
            for piece, o in zip(incoming.split(rsizes), roffsets):
                _view(recv + o, piece.numel()).copy_(piece)

    def _allreduce_sum(self, send, recv, count, datatype, context, stream):
        dtype = _TORCH_TYPES[datatype]
        nbytes = count * torch.empty(0, dtype=dtype).element_size()
        out = _view(recv, nbytes, dtype)
        if send != recv:
            out.copy_(_view(send, nbytes, dtype))
        if count == 0:
            return
        sum_in_place(self.group, out, self.backend)

    def _vote_max(self, mine, result, context):
        try:
            t = torch.tensor([mine], dtype=torch.int32)
            all_reduce(self.group, t, dist.ReduceOp.MAX)
            result[0] = int(t.item())
            return 0
        except BaseException as e:
            self._error = self._error or e
            return 1
