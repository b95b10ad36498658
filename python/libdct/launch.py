"""Process-group start-up for whatever launched this process: torchrun and
torch.multiprocessing set RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT;
under Open MPI's mpirun they are taken from OMPI_COMM_WORLD_*. (Debian 12's
torchrun fails on Python 3.11: launch with mpirun or torch.multiprocessing.)"""
import os


def env_from_launcher(master_addr="127.0.0.1", master_port=29500):
    """Fills RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT from the
    launcher's variables where unset; returns (rank, world_size)."""
    env = os.environ
    mpi = {"RANK": "OMPI_COMM_WORLD_RANK", "WORLD_SIZE": "OMPI_COMM_WORLD_SIZE",
           "LOCAL_RANK": "OMPI_COMM_WORLD_LOCAL_RANK"}
    for name, ompi in mpi.items():
        if name not in env and ompi in env:
            env[name] = env[ompi]
    env.setdefault("MASTER_ADDR", master_addr)
    env.setdefault("MASTER_PORT", str(master_port))
    if "RANK" not in env or "WORLD_SIZE" not in env:
        raise RuntimeError("no launcher found: set RANK and WORLD_SIZE (torchrun, torch.multiprocessing) "
                           "or run under mpirun")
    return int(env["RANK"]), int(env["WORLD_SIZE"])


def init_process_group(backend="gloo", **kwargs):
    """torch.distributed.init_process_group(backend, init_method="env://")
    after env_from_launcher()."""
    import torch.distributed as dist
    rank, size = env_from_launcher()
    dist.init_process_group(backend, init_method="env://", rank=rank, world_size=size, **kwargs)
    return rank, size
