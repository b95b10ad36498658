"""The package and its library, under mpirun at 2 ranks (or more): a gloo
allreduce through Comm.from_torch; ranks that loaded different libdct
versions fail Comm.from_torch and DctState on every rank with a message
naming the versions (one rank's reported version patched here), and the
group works afterwards; `import libdct` without a loadable library fails
with the paths tried. Run from the installed wheel by wheel_install.sh."""
import os
import subprocess
import sys

import torch

import libdct
import libdct._native as native
from harness import all_true, finish, raises, run_cases, same_on_all_ranks, start
from libdct.library_agree import LibraryMismatch
from libdct.torch import DctState

RANK, SIZE = start()


def case_gloo_allreduce():
    with libdct.Comm.from_torch() as comm, comm.compressor(4099, density=0.05) as c:
        g = torch.randn(4099, generator=torch.Generator().manual_seed(RANK))
        out = c.allreduce(g)
        assert same_on_all_ranks(out) and c.stats.step == 1
    print(f"rank {RANK}: {native.lib().dll._name}, libdct {libdct.__version__}", flush=True)


def mismatched(make):
    """make() with the last rank reporting the next patch version: the
    exception it raised on this rank."""
    lib = native.lib()
    real = lib.version_code
    if RANK == SIZE - 1:
        lib.version_code = real + 1
    try:
        return raises(make, LibraryMismatch)
    finally:
        lib.version_code = real


def case_a_version_mismatch_fails_every_rank():
    if SIZE == 1:
        return
    v = native.version_string(native.VERSION_CODE)
    odd = native.version_string(native.VERSION_CODE + 1)
    for make in (libdct.Comm.from_torch, lambda: DctState(density=0.05)):
        err = mismatched(make)
        assert err is not None, make
        assert f"{v} on group rank(s) {list(range(SIZE - 1))}" in str(err), err
        assert f"{odd} on group rank(s) [{SIZE - 1}]" in str(err), err
        assert all_true(err is not None)
    case_gloo_allreduce()  # nothing left half made: the group goes on


def case_import_without_a_library_fails_with_what_was_tried():
    if RANK != 0:
        return
    missing = "/nonexistent/libdct.so"
    env = {**os.environ, "LIBDCT_LIBRARY": missing}
    run = subprocess.run([sys.executable, "-c", "import libdct"], env=env, capture_output=True, text=True)
    assert run.returncode != 0
    assert "ImportError" in run.stderr and f"{missing} (LIBDCT_LIBRARY): no such file" in run.stderr, run.stderr
    # Not a libdct.so (no dctGetVersion): said so, not an AttributeError.
    env["LIBDCT_LIBRARY"] = "libm.so.6"
    run = subprocess.run([sys.executable, "-c", "import libdct"], env=env, capture_output=True, text=True)
    assert run.returncode != 0 and "is not libdct" in run.stderr, run.stderr


if __name__ == "__main__":
    run_cases(globals())
    finish()
