"""DctState's lifecycle under mpirun at 1-4 ranks: an exception on the
communication thread on one rank (Python error, SystemExit) fails that
bucket on every rank and the next steps go on, before its collectives or
after them (a failed finish is voted with the next bucket, or alone in the
last); close() makes the hook raise at once, is idempotent and lets the
state's groups go at once (their gloo threads with them); stats() and
residuals() work from a future's then() callback (which runs on the
communication thread); a state dropped without close() ends its thread;
interpreter exit while the thread is inside a libdct callback does not
abort the process."""
import gc
import os
import subprocess
import sys
import threading
import time
import weakref

import torch
import torch.distributed as dist

import harness
from harness import raises, same_on_all_ranks
from libdct import hook_work
from libdct.torch import Bucket, DctState, dct_hook
from test_hook import model, train

RANK = SIZE = None  # set by harness.main


def failing_once(on_rank, error):
    """Patches the bucket preparation to raise `error` once on one rank."""
    real = hook_work._Work.__init__
    left = [1 if RANK == on_rank else 0]

    def init(self, runner, job):
        if left[0]:
            left[0] = 0
            raise error
        real(self, runner, job)
    hook_work._Work.__init__ = init
    return lambda: setattr(hook_work._Work, "__init__", real)


def failing_finish_once(on_rank, index, error):
    """Patches bucket `index`'s finish (after its collectives) to raise once on one rank."""
    real = hook_work._Work.finish
    left = [1 if RANK == on_rank else 0]

    def finish(self):
        if left[0] and self.job.index == index:
            left[0] = 0
            raise error
        real(self)
    hook_work._Work.finish = finish
    return lambda: setattr(hook_work._Work, "finish", real)


def case_an_exception_on_the_thread_fails_the_bucket_everywhere():
    for error in (MemoryError("injected"), SystemExit(3)):
        state = DctState(density=0.05, min_compression_bytes=0)
        ddp = model(hook_state=state)
        train(ddp, 1)
        undo = failing_once(SIZE - 1, error)
        err = raises(lambda: train(ddp, 1), BaseException)
        undo()
        assert err is not None, "the step should fail on every rank"
        if SIZE > 1 and RANK != SIZE - 1:
            assert f"failed on global rank {SIZE - 1}" in str(err), err
        train(ddp, 2)  # every rank left the bucket alike: the next steps go on
        state.close()


def case_a_failed_finish_fails_that_bucket_and_the_rest_everywhere():
    params = [torch.nn.Parameter(torch.zeros(n)) for n in (301, 302, 303)]

    def step(state, k):
        g = torch.Generator().manual_seed(100 * k + RANK)
        futures = [dct_hook(state, Bucket(i, torch.randn(p.numel(), generator=g), [p], i == len(params) - 1))
                   for i, p in enumerate(params)]
        return [raises(f.wait, RuntimeError) or f.value() for f in futures]

    for index in range(len(params)):  # its finish voted with the next bucket's vote, or alone (the last)
        state = DctState(density=0.05, min_compression_bytes=0, algorithm="allgather")
        step(state, 0)
        undo = failing_finish_once(SIZE - 1, index, MemoryError("injected"))
        out = step(state, 1)
        undo()
        failed = [isinstance(r, Exception) for r in out]
        assert failed == [i >= index for i in range(len(params))], (index, out)
        if SIZE > 1 and RANK != SIZE - 1:
            assert f"bucket {index} failed on global rank {SIZE - 1}" in str(out[index]), out[index]
        later = step(state, 2)
        assert all(isinstance(r, torch.Tensor) for r in later), later
        assert same_on_all_ranks(torch.cat(later))
        state.close()


def case_close_makes_the_hook_raise_at_once():
    state = DctState(density=0.05, min_compression_bytes=0)
    ddp = model(hook_state=state)
    train(ddp, 1)
    state.close()
    state.close()
    t0 = time.time()
    err = raises(lambda: train(ddp, 1), RuntimeError)
    assert err is not None and "closed" in str(err) and time.time() - t0 < 30, err
    assert raises(state.residuals, RuntimeError) is not None


def case_close_lets_the_groups_go_at_once():
    state = DctState(density=0.05, min_compression_bytes=0)
    train(model(hook_state=state), 1)
    groups = [weakref.ref(g.pg) for g in state._owned.groups]
    assert groups, "the state made no groups of its own"
    gc.disable()  # a collection would hide a cycle that holds a group (and its gloo threads)
    try:
        state.close()
        assert all(g() is None for g in groups), "a closed state's group lives on"
    finally:
        gc.enable()


def case_stats_and_residuals_from_a_then_callback():
    state = DctState(density=0.05, min_compression_bytes=0, algorithm="allgather")
    p = torch.nn.Parameter(torch.zeros(257))
    seen = []
    g = torch.randn(257, generator=torch.Generator().manual_seed(RANK))
    fut = dct_hook(state, Bucket(0, g.clone(), [p], True))
    fut = fut.then(lambda f: seen.append((state.stats(0), state.residuals())) or f.value())
    fut.wait()
    assert seen and seen[0][0].step == 1 and id(p) in seen[0][1], seen
    state.close()


def case_a_dropped_state_ends_its_thread():
    before = {t for t in threading.enumerate() if t.name == "libdct-comm"}
    state = DctState(density=0.05, min_compression_bytes=0)
    train(model(hook_state=state), 1)
    ref = weakref.ref(state)
    del state
    deadline = time.time() + 30
    while ref() is not None and time.time() < deadline:  # the thread may still be leaving its last job
        gc.collect()
        time.sleep(0.05)
    assert ref() is None, "the state is kept alive (by its thread?)"
    while {t for t in threading.enumerate() if t.name == "libdct-comm"} - before and time.time() < deadline:
        time.sleep(0.05)
    assert not {t for t in threading.enumerate() if t.name == "libdct-comm"} - before
    dist.barrier()


EXIT_SCRIPT = """
import os, time, torch, torch.distributed as dist
from libdct.torch import Bucket, DctState, dct_hook
from libdct import torch_transport
dist.init_process_group("gloo", init_method="env://", rank=0, world_size=1)
real = torch_transport.TorchTransport._allgather
def slow(self, *args):
    time.sleep(1.0)  # the main thread ends meanwhile
    real(self, *args)
torch_transport.TorchTransport._allgather = slow
state = DctState(density=0.05, min_compression_bytes=0, algorithm="allgather")
p = torch.nn.Parameter(torch.zeros(1000))
dct_hook(state, Bucket(0, torch.randn(1000), [p], True))
time.sleep(0.3)
print("main thread ends", flush=True)
"""


def case_interpreter_exit_inside_a_callback_does_not_abort():
    if RANK != 0:
        return
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(int(os.environ["MASTER_PORT"]) + 50),
               RANK="0", WORLD_SIZE="1")
    for k in [k for k in env if k.startswith(("OMPI_", "PMIX_"))]:
        del env[k]
    r = subprocess.run([sys.executable, "-c", EXIT_SCRIPT], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "main thread ends" in r.stdout, (r.returncode, r.stdout, r.stderr[-2000:])
    assert "Fatal" not in r.stderr and "terminate" not in r.stderr, r.stderr[-2000:]


if __name__ == "__main__":
    harness.main(globals())
