"""An mpi4py + numpy program that knows nothing of libdct: a few steps of
Allreduce on large float32 and float64 arrays (the float64 one in place),
on a small float32 array, on a large int32 array and with MPI.MAX. Exact
results are checked here; the large sums are written, with their inputs,
to OUT_DIR for tests/preload/preload_reference to compare with libdct's
own dctSparseAllreduce.  Usage: python3 mpi4py_client.py OUT_DIR STEPS"""
import sys

import numpy as np
from mpi4py import MPI

out, steps = sys.argv[1], int(sys.argv[2])
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
rng = np.random.default_rng(100 + rank)
n32, n64 = (1 << 20) + 7, 300001  # 4 MiB and 2.4 MB: above the 1 MiB default
sum32 = np.empty(n32, np.float32)
buf64 = np.empty(n64, np.float64)
ramp = np.arange(1000, dtype=np.float32)
for step in range(steps):
    x = rng.standard_normal(n32, dtype=np.float32)
    x.tofile(f"{out}/f32.in.{rank}.{step}")
    comm.Allreduce(x, sum32, op=MPI.SUM)
    sum32.tofile(f"{out}/f32.out.{rank}.{step}")

    buf64[:] = rng.standard_normal(n64)
    buf64.tofile(f"{out}/f64.in.{rank}.{step}")
    comm.Allreduce(MPI.IN_PLACE, buf64, op=MPI.SUM)
    buf64.tofile(f"{out}/f64.out.{rank}.{step}")

    small = np.empty_like(ramp)  # below the minimum size: MPI's exact sum
    comm.Allreduce(ramp * (rank + 1) + step, small, op=MPI.SUM)
    assert np.array_equal(small, ramp * (size * (size + 1) // 2) + size * step), "small float32 sum"

    ints = np.full(1 << 20, rank + step, np.int32)  # not a float type: exact
    comm.Allreduce(MPI.IN_PLACE, ints, op=MPI.SUM)
    assert np.all(ints == size * (size - 1) // 2 + size * step), "int32 sum"

    peaks = np.empty(n32, np.float32)  # not a sum: exact
    comm.Allreduce((np.arange(n32) % 97).astype(np.float32) * (rank + 1), peaks, op=MPI.MAX)
    assert np.array_equal(peaks, (np.arange(n32) % 97).astype(np.float32) * size), "float32 max"
print(f"rank {rank}: the exact calls were exact after {steps} steps", flush=True)
