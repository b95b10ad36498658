"""libdct.Comm and Compressor from Python, under mpirun at 1-4 ranks: over a
torch gloo group (the callback transport) the sparse exchanges give the MPI
transport's results bit for bit; every rank holds the same bits; errors are
DctError naming the library's message, on every rank when a setting
differs or a callback fails; a failed step commits nothing."""
import os

import numpy as np
import torch
import torch.distributed as dist
from mpi4py import MPI

import libdct
from harness import all_true, finish, raises, run_cases, same_on_all_ranks, start

RANK, SIZE = start()


def gradient(n, step, dtype=torch.float32):
    g = torch.Generator().manual_seed(100 * step + RANK)
    return torch.randn(n, generator=g).to(dtype)


def mpi_comm():
    # Compare like with like: the callbacks cannot pipeline, and have no
    # sendrecv for split's recursive halving (which sums in another order).
    os.environ["DCT_PIPELINE"] = "0"
    os.environ["DCT_SPLIT_EXCHANGE"] = "pairwise"
    try:
        return libdct.Comm.from_mpi()
    finally:
        del os.environ["DCT_PIPELINE"]
        del os.environ["DCT_SPLIT_EXCHANGE"]


def run_steps(comm, n, steps, dtype=torch.float32, **fields):
    fields = {"density": 0.02, "threshold_method": "exact", "threshold_interval": 1, **fields}
    with comm.compressor(n, dtype, **fields) as c:
        return [c.allreduce(gradient(n, k, dtype)) for k in range(steps)], c.stats


def case_callbacks_match_mpi_bit_for_bit():
    with libdct.Comm.from_torch() as over_torch, mpi_comm() as over_mpi:
        assert (over_torch.rank, over_torch.size) == (RANK, SIZE)
        for algorithm in ("allgather", "split", "globaltopk"):
            for n in (1, 7, 20011):
                a, sa = run_steps(over_torch, n, 4, algorithm=algorithm)
                b, sb = run_steps(over_mpi, n, 4, algorithm=algorithm)
                assert all(torch.equal(x, y) for x, y in zip(a, b)), (algorithm, n)
                assert (sa.bytes_sent, sa.nnz, sa.algorithm) == (sb.bytes_sent, sb.nnz, sb.algorithm)
                assert all(same_on_all_ranks(x) for x in a)


def case_dense_and_auto_are_identical_on_every_rank():
    # gloo and MPI may sum in other orders: each is identical across its ranks.
    with libdct.Comm.from_torch() as comm:
        for algorithm in ("dense", "auto"):
            out, stats = run_steps(comm, 4099, 5, algorithm=algorithm)
            assert all(same_on_all_ranks(x) for x in out)
            assert stats.step == 5


def case_half_types_and_onebit():
    with libdct.Comm.from_torch() as comm:
        for dtype in (torch.float16, torch.bfloat16):
            for algorithm in ("allgather", "dense"):
                out, _ = run_steps(comm, 1031, 3, dtype, algorithm=algorithm)
                assert out[-1].dtype == dtype and all(same_on_all_ranks(x) for x in out)
        out, stats = run_steps(comm, 4096, 3, compressor="onebit")
        assert all(same_on_all_ranks(x) for x in out) and stats.algorithm == "onebit"


def case_numpy_arrays_over_mpi():
    with mpi_comm() as comm, comm.compressor(513, "fp64", density=0.1) as c:
        send = np.arange(513, dtype=np.float64) * (RANK + 1)
        out = np.zeros_like(send)
        c.allreduce(send, out, op="sum")
        assert same_on_all_ranks(torch.from_numpy(out))
        assert c.config.density == 0.1 and c.config.wire_type == "fp64" and c.config.owner_return is False
    # Global top-k returning what no owner selects: the setting reaches the compressor; nothing is lost.
    with libdct.Comm.from_torch() as comm, comm.compressor(1000, density=0.05, algorithm="globaltopk",
                                                           owner_return=True) as c:
        assert c.config.owner_return is True
        g = torch.randint(-64, 65, (1000,), generator=torch.Generator().manual_seed(RANK)).float() / 4
        out = c.allreduce(g.clone(), op="sum")
        given, held = g.clone(), c.get_residual(torch.empty(1000))
        for t in (given, held):
            dist.all_reduce(t)
        assert same_on_all_ranks(out) and torch.equal(out + held, given)


def case_bad_input_is_a_clear_error():
    with libdct.Comm.from_torch() as comm:
        err = raises(lambda: comm.compressor(10, density=1.5), libdct.DctError)
        assert err is not None and err.result == 1 and "density" in err.message, err
        with comm.compressor(10) as c:
            assert isinstance(raises(lambda: c.allreduce(torch.zeros(10, dtype=torch.int32))), TypeError)
            assert isinstance(raises(lambda: c.allreduce(torch.zeros(20)[::2])), ValueError)
            assert isinstance(raises(lambda: c.allreduce(torch.zeros(10), torch.zeros(9))), ValueError)
            nan = torch.zeros(10)
            nan[3] = float("nan")
            assert isinstance(raises(lambda: c.set_residual(nan)), libdct.DctError)
        assert isinstance(raises(lambda: c.stats), ValueError)  # closed


def case_a_setting_that_differs_fails_every_rank():
    if SIZE == 1:
        return
    with libdct.Comm.from_torch() as comm:
        for fields in ({"density": 0.01 if RANK else 0.02}, {"wire_type": "fp16" if RANK else "fp32"}):
            with comm.compressor(1000, **fields) as c:
                err = raises(lambda: c.allreduce(gradient(1000, 0)), libdct.DctError)
                assert err is not None and err.result == 2, err
                assert all_true(err is not None)
                assert c.stats.step == 0  # nothing committed


def case_a_failed_callback_fails_every_rank_and_commits_nothing():
    # Each op the step runs fails once on one rank; the retry gives the result
    # of a run that never failed. Small steps' messages ride in the header
    # allgather's slots: without them (DCT_GATHER_SLOTS=0) the allgatherv runs.
    for algorithm, op, slots in (("allgather", "allgatherv", "0"), ("split", "alltoallv", "1"),
                                 ("dense", "allreduce", "1"), ("allgather", "allgather", "1"),
                                 ("globaltopk", "alltoallv", "1")):
        if SIZE == 1 and op != "allgather":
            continue  # one rank: no exchange to fail
        os.environ["DCT_GATHER_SLOTS"] = slots
        try:
            comm = libdct.Comm.from_torch()
        finally:
            del os.environ["DCT_GATHER_SLOTS"]
        with comm:
            clean, _ = run_steps(comm, 5003, 3, algorithm=algorithm)
            with comm.compressor(5003, density=0.02, threshold_method="exact", threshold_interval=1,
                                 algorithm=algorithm) as c:
                out = [c.allreduce(gradient(5003, 0))]
                if RANK == SIZE - 1:
                    comm.transport.inject_failure(op)
                err = raises(lambda: c.allreduce(gradient(5003, 1)), libdct.DctError)
                assert err is not None, (algorithm, op)
                assert RANK != SIZE - 1 or "injected failure" in str(err.__cause__), err
                assert c.stats.step == 1
                out += [c.allreduce(gradient(5003, k)) for k in (1, 2)]
                assert all(torch.equal(x, y) for x, y in zip(out, clean)), (algorithm, op)


def case_sparse_allreduce_of_torch_embedding_gradients():
    # torch's own sparse gradient (nn.Embedding(sparse=True)), rows flattened
    # to element indices, summed exactly: gloo's all_reduce of the densified
    # gradients, bit for bit (counts of ids: exact in any order).
    emb = torch.nn.Embedding(1000, 8, sparse=True)
    ids = torch.randint(0, 1000, (50,), generator=torch.Generator().manual_seed(RANK))
    emb(ids).sum().backward()
    grad = emb.weight.grad.coalesce()
    idx = (grad.indices()[0][:, None] * 8 + torch.arange(8)).reshape(-1)
    want = grad.to_dense()
    dist.all_reduce(want)
    with libdct.Comm.from_torch() as comm:
        for algorithm in ("auto", "allgather", "split", "dense"):
            out = comm.sparse_allreduce(idx, grad.values().reshape(-1), 8000, algorithm=algorithm)
            assert torch.equal(out.view(1000, 8), want), algorithm
            assert comm.sparse_info["algorithm"] == algorithm or algorithm == "auto"
            got_idx, got_val = comm.sparse_allreduce(idx, grad.values().reshape(-1), 8000, coo=True)
            assert torch.equal(got_idx.long(), want.reshape(-1).nonzero().reshape(-1))
            assert torch.equal(got_val, want.reshape(-1)[got_idx.long()])
    with mpi_comm() as comm:  # numpy over the MPI transport
        out = comm.sparse_allreduce(idx.numpy(), grad.values().reshape(-1).numpy(), 8000)
        assert np.array_equal(out.reshape(1000, 8), want.numpy())
        unsorted = np.array([5, 3], dtype=np.uint32)
        err = raises(lambda: comm.sparse_allreduce(unsorted, np.ones(2, np.float32), 10), libdct.DctError)
        assert err is not None and "ascending" in err.message, err


def case_residual_round_trip():
    with libdct.Comm.from_torch() as comm, comm.compressor(333, density=0.05) as c:
        c.allreduce(gradient(333, 0))
        r = c.get_residual(torch.empty(333))
        assert r.abs().sum() > 0
        c.set_residual(torch.zeros(333))
        assert torch.equal(c.get_residual(torch.empty(333)), torch.zeros(333))


if __name__ == "__main__":
    assert MPI.COMM_WORLD.size == SIZE
    run_cases(globals())
    finish()
