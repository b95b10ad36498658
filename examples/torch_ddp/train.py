"""A model under PyTorch DDP (gloo): the Fashion-MNIST CNN (fashion.py) or
a byte-level transformer language model (charlm.py), one run per gradient
hook: PyTorch's allreduce / fp16 / PowerSGD hooks against libdct's dct_hook
(top-K with error feedback, or 1-bit); and the optimizer: SGD, Adam, or
libdct's OnebitAdam (1-bit Adam, with its own DDP hook). See README.md.

    mpirun -np 4 --oversubscribe -x LIBDCT_LIBRARY=build/src/libdct.so -x PYTHONPATH=python \\
        /usr/bin/python3 examples/torch_ddp/train.py --hook dct --density 0.01 --out r.json

Every run starts from the same weights (seed), sees the same global batches
in the same order (each rank a disjoint slice of each one) and follows the
same learning-rate schedule, so only the hook differs between runs.
"""
import argparse
import hashlib
import json
import math
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
from torch.nn.parallel import DistributedDataParallel as DDP

from charlm import TEXT, CharLMTask
from fashion import DATA, FashionTask


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", choices=["fashion", "charlm"], default="fashion",
                   help="fashion: the Fashion-MNIST CNN (fashion.py); charlm: a byte-level transformer "
                        "language model on the fortunes package's text (charlm.py)")
    p.add_argument("--hook", choices=["allreduce", "fp16", "powersgd", "dct", "onebit"], default="dct",
                   help="(--optimizer onebit_adam brings its own: onebit_adam_hook)")
    p.add_argument("--optimizer", choices=["sgd", "adam", "onebit_adam"], default="sgd",
                   help="sgd (--lr, --momentum), adam (--lr, betas 0.9/0.999), or libdct.torch.OnebitAdam")
    p.add_argument("--freeze-step", type=int, default=None,
                   help="onebit_adam: exact-Adam warm-up steps (default: 15%% of the run's steps)")
    p.add_argument("--eps", type=float, default=1e-8, help="adam, onebit_adam: Adam's epsilon")
    p.add_argument("--exchange", default="momentum", choices=["momentum", "preconditioned"],
                   help="onebit_adam: what the 1-bit allreduce carries (docs/onebit_adam.md)")
    p.add_argument("--one-scale", action="store_true",
                   help="onebit_adam: one 1-bit scale for the flat buffer instead of one per tensor")
    p.add_argument("--density", type=float, default=0.01, help="dct: fraction of each bucket sent")
    p.add_argument("--start-iter", type=int, default=0,
                   help="dct/onebit: dense allreduce steps before compression")
    p.add_argument("--algorithm", default="auto", help="dct: auto | allgather | split | dense")
    p.add_argument("--wire-type", default=None, help="dct: fp16 | bf16 values on the wire (default fp32)")
    p.add_argument("--momentum-correction", action="store_true",
                   help="dct: DGC's momentum correction in the hook (DctState(momentum=--momentum)), SGD without momentum")
    p.add_argument("--momentum-masking", type=int, choices=[0, 1], default=1,
                   help="with --momentum-correction: zero a velocity where its entry was sent (DGC's factor masking)")
    p.add_argument("--per-tensor-buckets", action="store_true",
                   help="dct/onebit: one DDP bucket per parameter tensor, so one compressor (and one "
                        "1-bit scale) each, instead of one bucket for the whole model")
    p.add_argument("--rank-approx", type=int, default=1, help="powersgd: matrix_approximation_rank")
    p.add_argument("--start-powersgd-iter", type=int, default=None,
                   help="powersgd: dense steps first (default: 10%% of the run's steps, PowerSGD's "
                        "documented starting point; at least 2, its minimum with error feedback)")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--max-steps", type=int, default=None, help="stop after this many steps in all (smoke)")
    p.add_argument("--batch", type=int, default=64, help="per rank")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--train", type=int, default=60000, help="use the first N training images")
    p.add_argument("--test", type=int, default=10000, help="use the first N test images")
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank (4 ranks share 2 cores)")
    p.add_argument("--data", default=DATA, help="fashion: the dataset's folder")
    p.add_argument("--text", default=TEXT, help="charlm: the folder of text files")
    p.add_argument("--context", type=int, default=64, help="charlm: bytes per window")
    p.add_argument("--out", default=None, help="JSON of the run; a CSV of its epochs goes beside it")
    p.add_argument("--stop-at", type=int, default=None,
                   help="save a checkpoint (model, optimizer, schedule, hook state) after this many steps and stop")
    p.add_argument("--checkpoint", default=None, help="the checkpoint's path prefix (one file per rank)")
    p.add_argument("--resume", action="store_true", help="continue from --checkpoint")
    p.add_argument("--check-accuracy", type=float, default=None,
                   help="exit 1 unless the final test accuracy reaches this fraction")
    p.add_argument("--check-bits", type=float, default=None,
                   help="exit 1 unless the final held-out bits per byte are at most this (charlm)")
    args = p.parse_args()
    if args.check_accuracy is not None and args.task != "fashion":
        p.error("--check-accuracy is for --task fashion")
    if args.check_bits is not None and args.task != "charlm":
        p.error("--check-bits is for --task charlm")
    return args


class Counted:
    """Wraps a hook to count, the same way for every hook, the payload bytes
    this rank contributes to the gradient collectives: PyTorch's hooks by
    every dist.all_reduce they issue on the DDP group (bucket, fp16 copy,
    PowerSGD's P, Q and uncompressed tensors, each as allreduced); libdct's
    by its own count (DctState.bytes_sent: its messages, or the bucket when
    it falls back to allreduce). `dense` is the buckets' size: what
    allreduce_hook would contribute."""

    def __init__(self, hook, state, libdct):
        self.hook, self.state, self.libdct = hook, state, libdct
        self.sent = 0
        self.dense = 0
        self.active = False  # on only while training: evaluation's collectives are not gradients
        if not libdct:
            real = dist.all_reduce

            def counting_all_reduce(tensor, op=dist.ReduceOp.SUM, group=None, async_op=False):
                if self.active and (group is None or group == dist.group.WORLD):  # not libdct's own group
                    self.sent += tensor.numel() * tensor.element_size()
                return real(tensor, op=op, group=group, async_op=async_op)
            dist.all_reduce = counting_all_reduce  # the hooks look it up at call time

    def as_hook(self):
        def counted_hook(state, bucket):  # DDP wants a named function
            self.dense += bucket.buffer().numel() * bucket.buffer().element_size()
            return self.hook(state, bucket)
        return counted_hook

    def bytes_sent(self):
        if type(self.state).__name__ == "OnebitAdam":  # the hook's dense warm-up + the momentum exchange
            return self.sent + self.state.compressor.stats.total_bytes_sent
        return self.state.bytes_sent if self.libdct else self.sent


def make_hook(args, total_steps, model):
    """(state, hook, description) for DDP.register_comm_hook."""
    if args.hook == "allreduce":
        return None, default_hooks.allreduce_hook, "allreduce_hook"
    if args.hook == "fp16":
        return None, default_hooks.fp16_compress_hook, "fp16_compress_hook"
    if args.hook == "powersgd":
        start = args.start_powersgd_iter
        if start is None:
            start = max(2, total_steps // 10)
        args.start_powersgd_iter = start
        # The rest at PowerSGDState's defaults: error feedback, warm start,
        # min_compression_rate 2 (tensors that would not shrink 2x, such as
        # the biases, are allreduced as they are).
        state = powersgd.PowerSGDState(process_group=None, matrix_approximation_rank=args.rank_approx,
                                       start_powerSGD_iter=start, random_seed=args.seed)
        return state, powersgd.powerSGD_hook, f"powerSGD_hook rank {args.rank_approx}, start {start}"
    from libdct.torch import DctState, dct_hook
    compressor = "onebit" if args.hook == "onebit" else "topk"
    state = DctState(process_group=None, density=args.density if compressor == "topk" else 1.0,
                     start_iter=args.start_iter, compressor=compressor, algorithm=args.algorithm,
                     wire_type=args.wire_type, model=model, momentum=args.momentum if args.momentum_correction else 0,
                     momentum_masking=bool(args.momentum_masking))
    what = f"dct_hook topk density {args.density}, algorithm {args.algorithm}" if compressor == "topk" \
        else "dct_hook onebit"
    wire = f", wire {args.wire_type}" if args.wire_type else ""
    buckets = ", a bucket per tensor" if args.per_tensor_buckets else ""
    corrected = f", momentum correction {args.momentum}{'' if args.momentum_masking else ' unmasked'}" \
        if args.momentum_correction else ""
    return state, dct_hook, f"{what}, start_iter {args.start_iter}{wire}{buckets}{corrected}"


def replicas_identical(model):
    """Every rank's parameters, flattened, gathered and compared bit for bit."""
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    everyone = [torch.empty_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(everyone, flat)
    bits = [t.view(torch.int32) for t in everyone]
    return all(torch.equal(bits[0], b) for b in bits[1:])


def save(args, rank, model, opt, sched, state, step):
    """One file per rank: what the run needs to go on as if never stopped."""
    torch.save({"step": step, "model": model.module.state_dict(), "opt": opt.state_dict(),
                "sched": sched.state_dict(),
                "hook": state.state_dict() if hasattr(state, "load_state_dict") and state is not opt else None},
               f"{args.checkpoint}.rank{rank}")


def restore(args, rank, model, opt, sched, state):
    saved = torch.load(f"{args.checkpoint}.rank{rank}")
    model.module.load_state_dict(saved["model"])
    opt.load_state_dict(saved["opt"])
    sched.load_state_dict(saved["sched"])
    if saved["hook"] is not None:
        state.load_state_dict(saved["hook"])
    return saved["step"]


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    from libdct.launch import init_process_group
    rank, size = init_process_group("gloo")

    task = CharLMTask(args) if args.task == "charlm" else FashionTask(args)
    global_batch = args.batch * size
    steps_per_epoch = task.steps_per_epoch(global_batch)
    total_steps = steps_per_epoch * args.epochs
    if args.max_steps is not None:
        total_steps = min(total_steps, args.max_steps)

    torch.manual_seed(args.seed)  # the same initial weights on every rank and in every run
    # One bucket for the whole gradient (3.3 MB), for every hook: DDP's
    # rebuilt buckets would split off a 1 MB first bucket (here the conv
    # layers' 14 KB), and PowerSGD's chained allreduces of two buckets then
    # interleave in a different order on different gloo ranks (a crash:
    # "op.preamble.length <= op.nbytes"). DDP documents this knob.
    # --per-tensor-buckets (libdct's hook only: it reduces its buckets in
    # order on its own group) gives every tensor its own bucket instead.
    if args.per_tensor_buckets and args.hook not in ("dct", "onebit"):
        sys.exit("--per-tensor-buckets is for --hook dct or onebit")
    dist._DEFAULT_FIRST_BUCKET_BYTES = 1 if args.per_tensor_buckets else 25 * 1024 * 1024  # = bucket_cap_mb's default
    model = DDP(task.model(), bucket_cap_mb=1e-6 if args.per_tensor_buckets else 25)
    if args.optimizer == "onebit_adam":
        from libdct.torch import OnebitAdam, onebit_adam_hook
        if args.freeze_step is None:
            args.freeze_step = max(1, round(0.15 * total_steps))
        opt = OnebitAdam(model.parameters(), lr=args.lr, eps=args.eps, freeze_step=args.freeze_step,
                         exchange=args.exchange, per_tensor_scales=not args.one_scale)
        args.hook, state, hook = "onebit_adam", opt, onebit_adam_hook
        described = (f"onebit_adam_hook (OnebitAdam, freeze_step {args.freeze_step}, exchange {args.exchange}, "
                     f"{'one scale' if args.one_scale else 'a scale per tensor'})")
    else:
        state, hook, described = make_hook(args, total_steps, model)
        momentum = 0 if args.momentum_correction else args.momentum  # the hook applies it
        opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=momentum) if args.optimizer == "sgd" \
            else torch.optim.Adam(model.parameters(), lr=args.lr, eps=args.eps)
    counter = Counted(hook, state, args.hook in ("dct", "onebit"))
    model.register_comm_hook(state, counter.as_hook())
    # Cosine decay over the planned steps, the same for every hook.
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * s / total_steps)))
    params = sum(p.numel() for p in model.parameters())
    if rank == 0:
        print(f"{size} ranks, {params} parameters, batch {args.batch}/rank, {steps_per_epoch} steps/epoch, "
              f"{total_steps} steps; hook: {described}", flush=True)

    epochs, step = [], 0
    if args.resume:
        step = restore(args, rank, model, opt, sched, state)
    for epoch in range(1 + step // steps_per_epoch, args.epochs + 1):
        if step >= total_steps or (args.stop_at is not None and step >= args.stop_at):
            break
        order = task.epoch_order(args.seed, epoch, steps_per_epoch, global_batch)
        sent0, dense0, losses, plans = counter.bytes_sent(), counter.dense, [], {}
        dist.barrier()  # every rank starts the clock together
        t0 = time.perf_counter()
        counter.active = True
        for b in range(step % steps_per_epoch, steps_per_epoch):
            if step >= total_steps or (args.stop_at is not None and step >= args.stop_at):
                break
            loss = task.loss(model, *task.batch(order, b, rank, args.batch, global_batch))
            opt.zero_grad(set_to_none=True)
            loss.backward()  # DDP waits here for every bucket's hook future
            opt.step()
            sched.step()
            losses.append(loss.item())
            step += 1
            if hasattr(state, "stats") and (st := state.stats(0)) is not None:  # libdct: the plan bucket 0 ran
                plans[st.algorithm] = plans.get(st.algorithm, 0) + 1
        dist.barrier()
        seconds = time.perf_counter() - t0
        counter.active = False
        sent, dense = counter.bytes_sent() - sent0, counter.dense - dense0
        metric = task.evaluate(model, rank, size)
        # libdct's messages differ in size between ranks: the byte figure is
        # the mean over ranks (the max is kept too); the rest is the same
        # everywhere. The loss of each step: the mean over ranks.
        n = len(losses)
        sums = torch.tensor([sent / n] + losses, dtype=torch.float64)
        dist.all_reduce(sums)
        step_losses = (sums[1:] / size).tolist()
        peak = torch.tensor([sent / n], dtype=torch.float64)
        dist.all_reduce(peak, op=dist.ReduceOp.MAX)
        per_rank = sums[0].item() / size
        row = {"epoch": epoch, "steps": n, "train_loss": sum(step_losses) / n,
               task.metric: metric, "seconds": seconds, "bytes_per_step_per_rank": per_rank,
               "bytes_per_step_max_rank": peak.item(), "dense_bytes_per_step": dense / n,
               "reduction_vs_allreduce": dense / n / per_rank if per_rank else None,
               "libdct_steps_by_algorithm": plans, "step_losses": step_losses}
        epochs.append(row)
        if rank == 0:
            shown = f"test acc {100 * metric:.2f}%" if task.metric == "test_accuracy" else \
                f"held-out {metric:.4f} bits/byte"
            print(f"epoch {epoch:2d}  loss {row['train_loss']:.4f}  {shown}  "
                  f"{seconds:6.1f} s  {per_rank / 1e3:9.1f} KB/step/rank sent  "
                  f"({row['reduction_vs_allreduce'] or 0:.1f}x less than allreduce)"
                  + (f"  plans {plans}" if plans else ""), flush=True)

    if args.stop_at is not None:
        save(args, rank, model, opt, sched, state, step)
        if state is not None:
            state.close()
        return
    identical = replicas_identical(model)
    result = {"task": args.task, "metric": task.metric, "hook": args.hook, "described": described, "ranks": size, "parameters": params,
              "batch_per_rank": args.batch, "steps_per_epoch": steps_per_epoch, "steps": step,
              "optimizer": args.optimizer, "freeze_step": args.freeze_step, "eps": args.eps,
              "exchange": args.exchange,
              "lr": args.lr, "momentum": args.momentum, "seed": args.seed, "threads": args.threads,
              "density": args.density, "start_iter": args.start_iter, "algorithm": args.algorithm,
              "wire_type": args.wire_type, "per_tensor_buckets": args.per_tensor_buckets,
              "rank_approx": args.rank_approx,
              "start_powersgd_iter": args.start_powersgd_iter,
              **task.sizes, "context": args.context if args.task == "charlm" else None,
              "bytes_sent_total": counter.bytes_sent(), "dense_bytes_total": counter.dense,
              "replicas_identical": identical, "resumed": args.resume, "epochs": epochs,
              "parameters_sha256": hashlib.sha256(torch.cat([p.detach().reshape(-1) for p in model.parameters()])
                                                  .numpy().tobytes()).hexdigest()}
    if args.hook == "powersgd":
        # Cross-check of the count: PowerSGD's own statistics (elements
        # allreduced once it compresses) plus its dense warm-up steps.
        rate, before, after = state.compression_stats()
        warm = min(state.start_powerSGD_iter, step)
        from_stats = warm * counter.dense / step + after * 4
        result["powersgd_compression_stats"] = [rate, before, after]
        result["powersgd_bytes_from_stats"] = from_stats
        if from_stats != counter.bytes_sent():
            print(f"rank {rank}: counted {counter.bytes_sent()} bytes, PowerSGD's stats say {from_stats}",
                  file=sys.stderr)
    if args.hook in ("dct", "onebit"):
        st = state.stats(0)  # bucket 0: the whole gradient, or (per tensor) the first one reduced
        result["libdct_last_algorithm"] = st.algorithm if st is not None else None
        result["libdct_rebuilds"] = state.rebuilds
        state.close()
    if rank == 0:
        print(f"replicas bit-identical across {size} ranks: {identical}; parameters sha256 "
              f"{result['parameters_sha256'][:16]}", flush=True)
        if args.out:
            with open(args.out, "w") as f:
                json.dump(result, f, indent=1)
            with open(os.path.splitext(args.out)[0] + ".csv", "w") as f:
                f.write(f"epoch,{task.metric},train_loss,seconds,bytes_per_step_per_rank,reduction_vs_allreduce\n")
                for r in epochs:
                    f.write(f"{r['epoch']},{r[task.metric]:.6f},{r['train_loss']:.6f},{r['seconds']:.3f},"
                            f"{r['bytes_per_step_per_rank']:.1f},{r['reduction_vs_allreduce'] or 0:.3f}\n")
    final = epochs[-1][task.metric] if epochs else None
    good = final is not None and (args.check_accuracy is None or final >= args.check_accuracy) and \
        (args.check_bits is None or final <= args.check_bits)
    ok = identical and (good or (args.check_accuracy is None and args.check_bits is None))
    if not identical:
        print(f"rank {rank}: replicas differ", file=sys.stderr)
    elif not ok and rank == 0:
        print(f"{task.metric} {final} misses the check ({args.check_accuracy or args.check_bits})", file=sys.stderr)
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    # No interpreter teardown: in torch 1.13 ~ProcessGroupGloo (freed with
    # DDP's reducer) joins its worker threads while holding the GIL, and a
    # worker still dropping the last tensor of a finished collective waits
    # for the GIL: a deadlock at exit, seen under bench/netem (pytorch#56297).
    os._exit(0 if ok else 1)


if __name__ == "__main__":
    main()
