"""DctState on any process group (launched by mpirun at 1-4 ranks): a state
on a sub-group leaves the other ranks' group creation in step (a later
world new_group and collective do not hang), split groups each with a
state next to a world state never cross wires, the private groups carry
the DDP group's timeout, and close() ends them."""
import datetime

import torch
import torch.distributed as dist

import harness
from harness import raises, same_on_all_ranks
from libdct.torch import DctState
from test_hook import model, train

RANK = SIZE = None  # set by harness.main


def case_a_sub_group_state_leaves_the_world_in_step():
    lower = list(range(max(1, SIZE // 2)))
    groups = [dist.new_group(lower)]  # collective over the world, as new_group is
    if RANK in lower:
        state = DctState(groups[0], density=0.05, min_compression_bytes=0)
        train(model(hook_state=state, group=groups[0]), 2)
        state.close()
    later = dist.new_group(list(range(SIZE)))  # hung here when the state's copy moved the counter
    t = torch.ones(1)
    dist.all_reduce(t, group=later)
    assert t.item() == SIZE


def case_split_groups_and_a_world_state_do_not_cross():
    halves = [list(range(0, (SIZE + 1) // 2)), list(range((SIZE + 1) // 2, SIZE))]
    groups = [dist.new_group(h) if h else None for h in halves]
    mine = 0 if RANK in halves[0] else 1
    group = groups[mine]
    world = DctState(density=0.05, min_compression_bytes=0)
    local = DctState(group, density=0.05, min_compression_bytes=0, algorithm="allgather")
    second = DctState(group, density=0.1, min_compression_bytes=0, algorithm="split")  # same ranks, own store keys
    for state, g in ((local, group), (world, None), (second, group)):
        params = train(model(hook_state=state, group=g), 3)
        peers = [torch.empty_like(params) for _ in range(dist.get_world_size(g))]
        dist.all_gather(peers, params, group=g)
        assert all(torch.equal(peers[0], p) for p in peers)
        assert state.world_size == dist.get_world_size(g)
    for state in (world, local, second):
        state.close()
        state.close()  # idempotent


def case_private_groups_take_the_group_timeout():
    g = dist.new_group(list(range(SIZE)), timeout=datetime.timedelta(seconds=123))
    state = DctState(g)
    assert state.control.timeout == datetime.timedelta(seconds=123), state.control.timeout
    assert state.control.name.startswith("libdct/control/")
    state.close()
    assert state.control.pg is None  # close() ends the groups


def case_master_addr_across_nodes_comes_from_rank_0():
    from libdct import launch
    assert launch._master_addr({"OMPI_COMM_WORLD_LOCAL_SIZE": "4", "OMPI_COMM_WORLD_SIZE": "4"}) == \
        ("127.0.0.1", "single node")
    addr, source = launch._master_addr({"OMPI_COMM_WORLD_LOCAL_SIZE": "1", "OMPI_COMM_WORLD_SIZE": str(SIZE + 1)})
    assert source == "rank 0 over MPI" and addr != "127.0.0.1" or addr.startswith("127."), addr
    mine = torch.tensor(list(addr.encode().ljust(64, b"\0")), dtype=torch.uint8)
    assert same_on_all_ranks(mine)
    assert launch.master_addr_source in ("environment", "single node")  # how the harness started


def case_nccl_comm_failures_reach_every_rank():
    """A failed unique id on rank 0, or a failed init anywhere (here: no GPU),
    fails every rank; none waits in the broadcast or keeps half a comm."""
    from libdct import Comm, nccl
    real = nccl._make_unique_id
    nccl._make_unique_id = (lambda lib, uid: "injected") if RANK == 0 else real
    err = raises(lambda: nccl.nccl_comm(Comm, dist.group.WORLD, "cuda:0", on_device=False), RuntimeError)
    nccl._make_unique_id = real
    assert err is not None and "no NCCL unique id from group rank 0" in str(err), err
    if torch.cuda.is_available():
        return
    err = raises(lambda: nccl.nccl_comm(Comm, dist.group.WORLD, "cuda:0", on_device=False), RuntimeError)
    assert err is not None and "NCCL" in str(err), err


if __name__ == "__main__":
    harness.main(globals())
