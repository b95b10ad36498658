"""Before a Comm (or a DctState) makes anything over a torch.distributed
group, its ranks agree that each loaded the same libdct version: a rank
whose libdct.so differs (a stale LIBDCT_LIBRARY, another install on one
node) fails every rank here, with the ranks and versions named, instead of
leaving the others in the library's first collective until the timeout."""
import torch

from . import _native
from .groups import all_gather


class LibraryMismatch(RuntimeError):
    pass


def agree_library(pg, device=None):
    """Collective over pg (a process group or backend object; tensors on
    `device`, None: the CPU). Returns on every rank, or raises
    LibraryMismatch on every rank."""
    mine = _native.lib().version_code
    t = torch.tensor([mine], dtype=torch.int64, device=device)
    every = [torch.empty_like(t) for _ in range(pg.size())]
    all_gather(pg, every, t)
    codes = [int(x.item()) for x in every]
    if all(c == codes[0] for c in codes):
        return
    by_version = {}
    for rank, code in enumerate(codes):
        by_version.setdefault(code, []).append(rank)
    listed = "; ".join(f"{_native.version_string(c)} on group rank(s) {r}" for c, r in sorted(by_version.items()))
    raise LibraryMismatch(f"libdct: the ranks loaded different libdct.so versions ({listed}); this rank (group rank "
                          f"{pg.rank()}) loaded {_native.lib().dll._name}. Every rank needs the same version: "
                          f"install the same wheel everywhere, or point LIBDCT_LIBRARY at the same build")
