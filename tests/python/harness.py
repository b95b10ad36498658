"""Shared by the Python tests: start-up under mpirun or torch.multiprocessing,
cross-rank comparisons, and a runner for the case_* functions of a module.
A failed assertion raises, the rank exits non-zero and mpirun stops the rest."""
import gc
import os
import sys
import time
import traceback

import torch
import torch.distributed as dist

from libdct.launch import init_process_group


def start():
    """Rank and size of a gloo default group, from whatever launched us."""
    return init_process_group("gloo")


def gathered(t, group=None):
    """Every rank's copy of a tensor (same shape everywhere)."""
    t = t.detach().contiguous()
    parts = [torch.empty_like(t) for _ in range(dist.get_world_size(group))]
    dist.all_gather(parts, t, group=group)
    return parts


def same_on_all_ranks(t):
    """True when every rank holds t's bits."""
    raw = t.detach().contiguous().view(-1).view(torch.uint8)
    return all(torch.equal(raw, p) for p in gathered(raw))


def all_true(ok):
    flag = torch.tensor([1 if ok else 0], dtype=torch.int32)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    return bool(flag.item())


def raises(fn, error=Exception):
    """The exception fn raised (None if it returned)."""
    try:
        fn()
    except error as e:
        return e
    return None


def run_cases(namespace, only=None):
    """Runs every case_* function in definition order (or those named in
    argv after --case), reporting each on rank 0."""
    rank = dist.get_rank()
    names = [n for n in namespace if n.startswith("case_") and callable(namespace[n])]
    if only:
        names = [n for n in names if n in only]
    for name in names:
        t0 = time.time()
        try:
            namespace[name]()
        except BaseException:
            traceback.print_exc()
            print(f"rank {rank}: {name} FAILED", flush=True)
            sys.stdout.flush()
            os._exit(1)  # the other ranks may wait in a collective: mpirun ends them
        dist.barrier()
        if rank == 0:
            print(f"{name}: ok ({time.time() - t0:.1f} s)", flush=True)
    if rank == 0:
        print(f"{len(names)} cases passed at {dist.get_world_size()} ranks", flush=True)


def finish():
    """The end of a run. What the cases left in reference cycles (DDP
    models, states) goes first, so that the default group is destroyed here
    and its gloo threads end while the interpreter is whole: one that drops
    the last reference to a Python-made tensor once finalization has begun
    cannot take the GIL, and aborts the process."""
    gc.collect()
    dist.destroy_process_group()


def main(namespace):
    """A test module's entry: start, RANK and SIZE into its globals, its cases, the end."""
    namespace["RANK"], namespace["SIZE"] = start()
    run_cases(namespace)
    finish()
