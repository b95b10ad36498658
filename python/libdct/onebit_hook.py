"""The DDP communication hook for OnebitAdam (docs/onebit_adam.md)."""
import torch


def onebit_adam_hook(optimizer, bucket):
    """A DDP communication hook for OnebitAdam:

        ddp.register_comm_hook(optimizer, onebit_adam_hook)

    In the warm-up it averages the bucket like DDP's own allreduce; in the
    compression stage it returns the local gradient untouched, since the
    optimizer's momentum exchange replaces the gradient exchange."""
    import torch.distributed as dist
    optimizer.average_gradients = False
    buf = bucket.buffer()
    if optimizer.compressing:
        fut = torch.futures.Future()
        fut.set_result(buf)
        return fut
    group = optimizer.process_group
    buf.div_(dist.get_world_size(group))
    work = dist.all_reduce(buf, group=group, async_op=True)
    return work.get_future().then(lambda f: f.value()[0])
