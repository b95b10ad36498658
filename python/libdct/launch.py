"""Process-group start-up for whatever launched this process: torchrun and
torch.multiprocessing set RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT;
under Open MPI's mpirun they are taken from OMPI_COMM_WORLD_*. (Debian 12's
torchrun fails on Python 3.11: launch with mpirun or torch.multiprocessing.)

MASTER_ADDR, where the environment does not set it: 127.0.0.1 when every
rank runs on this node (OMPI_COMM_WORLD_LOCAL_SIZE == SIZE); across nodes,
rank 0's address shared over MPI (mpi4py), else an error that asks for it.
`master_addr_source` says which."""
import os
import socket

master_addr_source = None  # "environment", "single node", "rank 0 over MPI" or "argument"


def env_from_launcher(master_addr=None, master_port=29500):
    """Fills RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT from the
    launcher's variables where unset; returns (rank, world_size)."""
    global master_addr_source
    env = os.environ
    mpi = {"RANK": "OMPI_COMM_WORLD_RANK", "WORLD_SIZE": "OMPI_COMM_WORLD_SIZE",
           "LOCAL_RANK": "OMPI_COMM_WORLD_LOCAL_RANK"}
    for name, ompi in mpi.items():
        if name not in env and ompi in env:
            env[name] = env[ompi]
    if "MASTER_ADDR" in env:
        master_addr_source = "environment"
    elif master_addr is not None:
        env["MASTER_ADDR"], master_addr_source = master_addr, "argument"
    else:
        env["MASTER_ADDR"], master_addr_source = _master_addr(env)
    env.setdefault("MASTER_PORT", str(master_port))
    if "RANK" not in env or "WORLD_SIZE" not in env:
        raise RuntimeError("no launcher found: set RANK and WORLD_SIZE (torchrun, torch.multiprocessing) "
                           "or run under mpirun")
    return int(env["RANK"]), int(env["WORLD_SIZE"])


def _master_addr(env):
    local, size = env.get("OMPI_COMM_WORLD_LOCAL_SIZE"), env.get("OMPI_COMM_WORLD_SIZE")
    if local is None or local == size:
        return "127.0.0.1", "single node"
    try:
        from mpi4py import MPI
    except ImportError:
        raise RuntimeError("mpirun across nodes: set MASTER_ADDR to rank 0's address (mpirun -x MASTER_ADDR=...) "
                           "or install mpi4py so that libdct can share it") from None
    mine = socket.gethostbyname(socket.getfqdn()) if MPI.COMM_WORLD.Get_rank() == 0 else None
    return MPI.COMM_WORLD.bcast(mine, root=0), "rank 0 over MPI"


def init_process_group(backend="gloo", **kwargs):
    """torch.distributed.init_process_group(backend, init_method="env://")
    after env_from_launcher()."""
    import torch.distributed as dist
    rank, size = env_from_launcher()
    dist.init_process_group(backend, init_method="env://", rank=rank, world_size=size, **kwargs)
    return rank, size
