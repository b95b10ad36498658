"""1-bit Adam (Tang et al., ICML 2021) as a torch.optim.Optimizer over
libdct's 1-bit compressed allreduce (docs/onebit_adam.md):

    opt = OnebitAdam(model.parameters(), lr=1e-3, freeze_step=1000)
    loss.backward(); opt.step()

Warm-up (the first freeze_step steps): exact Adam on the gradients averaged
densely (torch's own Adam arithmetic, parameter by parameter). Compression
stage: each rank folds its local gradient into the momentum, the momentum is
averaged by one 1-bit compressed allreduce (worker and server errors in the
compressor), and the variance frozen at the end of the warm-up preconditions
the update. Every parameter is a slice of one flat fp32 buffer (fp64 when
all are fp64), so a step is one exchange."""
import math
import warnings
import weakref

import torch

from . import onebit_checkpoint
from .comm import Comm
from .config import Config
from .onebit_support import Layout, _MpiChannel, _TorchChannel, vote


def _functional_adam(decoupled):
    """torch's functional Adam (AdamW), the arithmetic torch.optim.Adam runs."""
    if decoupled:
        from torch.optim.adamw import adamw
        return adamw
    from torch.optim.adam import adam
    return adam


class _Owned:
    def __init__(self):
        self.compressor, self.comm, self.groups = None, None, []

    def free(self):
        if self.compressor is not None:
            self.compressor.close()
        if self.comm is not None:
            self.comm.close()
        for g in self.groups:
            g.close()
        self.compressor, self.comm, self.groups = None, None, []


class OnebitAdam(torch.optim.Optimizer):
    """1-bit Adam. Construction is collective over the group (every rank, in
    the same order as its other libdct objects over that group).

    freeze_step: exact-Adam warm-up steps; the variance freezes after them.
    weight_decay, decoupled_weight_decay: AdamW's decay (p *= 1 - lr * wd)
        when decoupled (default), else Adam's L2 term added to the gradient.
    bias_correction: Adam's 1 - beta^t corrections (torch.optim.Adam's in
        the warm-up); in the compression stage the variance's correction is
        frozen with the variance, the momentum's keeps counting. False: none
        (DeepSpeed's OnebitAdam).
    process_group: a torch.distributed group (None: the default one); or
    mpi_comm: an mpi4py communicator (CPU parameters).
    average_gradients: the warm-up averages the gradients itself (dense
        allreduce). onebit_adam_hook under DDP does it instead (the hook
        turns this off); with plain DDP pass False.
    nonfinite: a NaN/Inf gradient on any rank skips the step on every rank,
        nothing changed, with a RuntimeWarning ("skip", default; counted in
        skipped_steps), or raises a RuntimeError on every rank ("raise").
    exchange: "momentum" (the paper's: the momentum goes through the 1-bit
        allreduce) or "preconditioned" (m / (sqrt(v_hat) + eps) does, so
        the compression error is in the update's units; docs/onebit_adam.md).
        Either way, entries whose frozen variance is zero are masked.
    eps: the compression stage's error per entry is about lr * scale /
        (sqrt(v_hat) + eps); eps = 1e-8 lets entries with a tiny variance
        blow up: see "Choosing eps" in docs/onebit_adam.md.
    per_tensor_scales: the 1-bit exchange keeps a scale per parameter tensor
        (one segment per tensor, dctCompressorSetSegments) instead of one
        for the whole flat buffer, so a tensor with large entries does not
        set the step size of the others (docs/onebit_adam.md). Default True;
        a checkpoint keeps the scales it was saved with.
    config: a libdct.Config for the compressor's remaining fields.
    Settings that decide the collectives (freeze_step, the stage and step,
    the flat layout, the hyperparameters) are agreed at construction and at
    every step: a rank that differs fails every rank with a RuntimeError."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, *, freeze_step,
                 decoupled_weight_decay=True, bias_correction=True, process_group=None, mpi_comm=None,
                 average_gradients=True, nonfinite="skip", exchange="momentum", per_tensor_scales=True,
                 config=None):
        if process_group is not None and mpi_comm is not None:
            raise ValueError("pass process_group or mpi_comm, not both")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)
        super().__init__(params, defaults)
        self.freeze_step, self.bias_correction = freeze_step, bool(bias_correction)
        self.decoupled_weight_decay, self.nonfinite = bool(decoupled_weight_decay), nonfinite
        self.average_gradients = bool(average_gradients)
        self.exchange = exchange
        self.per_tensor_scales = bool(per_tensor_scales)
        self.step_count = 0      # steps taken (skipped ones not counted)
        self.skipped_steps = 0
        self._denom = None       # the frozen preconditioner, made at the first compressed step
        self._mask = False       # the momentum mask, likewise (False: not made yet)
        self._owned = _Owned()
        self._finalizer = weakref.finalize(self, self._owned.free)
        self.compressor_config = Config(**{**{k: v for k, v in vars(config or Config()).items() if v is not None},
                                           "compressor": "onebit", "warmup_steps": 0, "error_feedback": True})
        # What is wrong here is carried into the first vote, so that a rank
        # whose arguments differ fails every rank instead of leaving them waiting.
        failed, self.layout = None, None
        try:
            self._check_arguments()
            self.layout = Layout(self.param_groups)
            self.compressor_config.to_native()
        except (ValueError, TypeError) as e:
            failed = e
        try:
            self._open_channel(process_group, mpi_comm)
            if failed is None and mpi_comm is not None and self.layout.device.type != "cpu":
                failed = ValueError("OnebitAdam over an mpi4py communicator takes CPU parameters")
            if failed is None and mpi_comm is None and self.layout.device.type == "cuda" and self._backend != "nccl":
                failed = ValueError(f"OnebitAdam: CUDA parameters need an NCCL process group, not {self._backend}")
            vote(self._channel, self._fields(construction=True), failed)
            self._open_data(process_group, mpi_comm)
        except BaseException:
            self.close()
            raise
        self._first = [0]  # group i's parameters start at layout.params[_first[i]]
        for g in self.param_groups:
            self._first.append(self._first[-1] + len(g["params"]))
        self.exp_avg, self.exp_avg_sq = self.layout.zeros(), self.layout.zeros()
        self._grad, self._send = self.layout.zeros(), self.layout.zeros()

    def _check_arguments(self):
        if not isinstance(self.freeze_step, int) or self.freeze_step < 1:
            raise ValueError(f"freeze_step must be an int >= 1 (exact-Adam warm-up steps), not {self.freeze_step!r}")
        if self.exchange not in ("momentum", "preconditioned"):
            raise ValueError(f"exchange must be 'momentum' or 'preconditioned', not {self.exchange!r}")
        if self.nonfinite not in ("skip", "raise"):
            raise ValueError(f"nonfinite must be 'skip' or 'raise', not {self.nonfinite!r}")
        for g in self.param_groups:
            if not g["params"]:
                raise ValueError("OnebitAdam: an empty parameter group")
            if not all(0.0 <= b < 1.0 for b in g["betas"]):
                raise ValueError(f"betas must be in [0, 1), not {g['betas']}")

    # --- set-up ---

    def _open_channel(self, process_group, mpi_comm):
        """The control channel (votes): mpi4py's communicator, or a private
        gloo group over the process group's ranks."""
        self.process_group = process_group
        if mpi_comm is not None:
            self._channel, self._backend = _MpiChannel(mpi_comm), "mpi"
            return
        from .groups import PrivateGroup, backend_of, group_ranks, group_timeout
        import torch.distributed as dist
        ranks, self._backend = group_ranks(process_group), backend_of(process_group)
        if dist.get_rank() not in ranks:
            raise ValueError(f"global rank {dist.get_rank()} is not in the process group {ranks}")
        control = PrivateGroup(ranks, "gloo", group_timeout(process_group), "adam-control")
        self._owned.groups.append(control)
        self._channel = _TorchChannel(control, control)

    def _open_data(self, process_group, mpi_comm):
        """The libdct comm of the momentum exchange (and, for CUDA parameters
        on NCCL, a private NCCL group for the warm-up's averages)."""
        owned = self._owned
        if mpi_comm is not None:
            owned.comm = Comm.from_mpi(mpi_comm)
        elif self.layout.device.type == "cuda":
            from .groups import PrivateGroup, group_timeout
            control = self._channel.control
            data = PrivateGroup(control.ranks, "nccl", group_timeout(process_group), "adam-data")
            owned.groups.append(data)
            self._channel.data = data
            owned.comm = Comm.from_torch(data, device=self.layout.device, control=control)
        else:
            owned.comm = Comm.from_torch(self._channel.control)
        owned.compressor = owned.comm.compressor(self.layout.count, self.layout.dtype, self.compressor_config)
        if self.per_tensor_scales:  # one exchange, a scale per tensor
            owned.compressor.set_segments(list(self.layout.offsets) + [self.layout.count])

    @property
    def compressor(self):
        """The libdct Compressor of the momentum exchange (its residual is
        the worker error; save_state() holds both errors)."""
        if self._owned.compressor is None:
            raise RuntimeError("OnebitAdam: closed")
        return self._owned.compressor

    @property
    def world_size(self):
        return self._channel.size

    @property
    def compressing(self):
        """True when the next step is a compression-stage step."""
        return self.step_count >= self.freeze_step

    def _averages_here(self):
        return self.average_gradients and self._channel.size > 1

    def _fields(self, construction=False):
        fields = {"freeze_step": self.freeze_step, "layout": self.layout.describe() if self.layout else None,
                  "settings": (self.bias_correction, self.decoupled_weight_decay, self.nonfinite, self.exchange,
                               self.per_tensor_scales,
                               repr(sorted(vars(self.compressor_config).items())))}
        if not construction:
            fields["step and stage"] = (self.step_count, self.compressing)
            fields["average_gradients"] = self._averages_here()
            fields["hyperparameters"] = tuple((g["lr"], tuple(g["betas"]), g["eps"], g["weight_decay"])
                                              for g in self.param_groups)
        return fields

    # --- the step ---

    @torch.no_grad()
    def step(self, closure=None):
        """One step, collective over the group. A NaN/Inf gradient on any
        rank: see nonfinite. Returns closure's loss."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        compressor = self.compressor
        failed = None
        try:
            failed = self.layout.gather_grads(self._grad)
            nonfinite = failed is None and not bool(torch.isfinite(self._grad).all())
        except Exception as e:  # carried into the vote: every rank fails together
            failed, nonfinite = f"OnebitAdam: {type(e).__name__}: {e}", False
        [any_nonfinite] = vote(self._channel, self._fields(), failed, [nonfinite])
        if any_nonfinite:
            return self._skip("a gradient", loss)
        if not self.compressing:
            self._warmup_step()
            return loss
        preconditioned = self.exchange == "preconditioned"
        send = self._momentum_into(self._send)
        if preconditioned:
            send.div_(self._frozen_denominator())
        compressor.allreduce(send, op="avg")  # the average of compressed momenta, same bits everywhere
        if not bool(torch.isfinite(send).all()):  # the compressor kept its errors; skip on every rank alike
            return self._skip("the exchanged momentum", loss)
        mask = self._momentum_mask()
        if mask is not None:
            send.mul_(mask)
        if preconditioned:
            torch.mul(send, self._frozen_denominator(), out=self.exp_avg)
        else:
            self.exp_avg.copy_(send)
        self._compressed_update(send if preconditioned else None)
        return loss

    def _skip(self, what, loss):
        self.skipped_steps += 1
        message = (f"OnebitAdam: {what} is not finite on some rank: step {self.step_count + 1} skipped on "
                   f"every rank, nothing changed")
        if self.nonfinite == "raise":
            raise RuntimeError(message)
        warnings.warn(message, RuntimeWarning, stacklevel=3)
        return loss

    def _warmup_step(self):
        grad = self._grad
        if self._averages_here():
            self._channel.sum_(grad)
            grad.div_(self._channel.size)
        if self.bias_correction:
            self._torch_adam(grad)
        else:
            self._plain_adam(grad)
        self.step_count += 1

    def _torch_adam(self, grad):
        """torch.optim.Adam's (AdamW's) own arithmetic, parameter by parameter."""
        adam = _functional_adam(self.decoupled_weight_decay)
        grads, ms, vs = self.layout.views(grad), self.layout.views(self.exp_avg), self.layout.views(self.exp_avg_sq)
        at = 0
        for g in self.param_groups:
            n = len(g["params"])
            params = [self._working(p) for p in g["params"]]
            steps = [torch.tensor(float(self.step_count)) for _ in range(n)]
            adam(params, grads[at:at + n], ms[at:at + n], vs[at:at + n], [], steps, foreach=None, capturable=False,
                 amsgrad=False, beta1=g["betas"][0], beta2=g["betas"][1], lr=g["lr"],
                 weight_decay=g["weight_decay"], eps=g["eps"], maximize=False)
            self._write_back(g["params"], params)
            at += n

    def _plain_adam(self, grad):
        """Adam without bias correction (DeepSpeed's OnebitAdam), group by group."""
        for i, g in enumerate(self.param_groups):
            beta1, beta2 = g["betas"]
            m, v = self.layout.group_views(self.exp_avg)[i], self.layout.group_views(self.exp_avg_sq)[i]
            gr = self._l2(i, self.layout.group_views(grad)[i])
            m.mul_(beta1).add_(gr, alpha=1 - beta1)
            v.mul_(beta2).addcmul_(gr, gr, value=1 - beta2)
            self._apply(i, m, v.sqrt().add_(g["eps"]), g["lr"])

    def _working(self, p):
        """p itself when it has the state's type, else a copy in that type."""
        return p if p.dtype == self.layout.dtype else p.to(self.layout.dtype)

    @staticmethod
    def _write_back(params, working):
        for p, q in zip(params, working):
            if q is not p:
                p.copy_(q)

    def _group_params(self, i):
        """Group i's parameters as one flat tensor of the state's type (a copy)."""
        return torch.cat([p.detach().reshape(-1).to(self.layout.dtype) for p in self.param_groups[i]["params"]])

    def _l2(self, i, grad):
        """grad + weight_decay * p for Adam's (not decoupled) decay, else grad."""
        g = self.param_groups[i]
        if g["weight_decay"] and not self.decoupled_weight_decay:
            return grad.add(self._group_params(i), alpha=g["weight_decay"])
        return grad

    def _apply(self, i, m, denom, step_size):
        """Group i: p -= step_size * m / denom (after AdamW's decay), each
        parameter computed in the state's type and rounded once to its own."""
        g = self.param_groups[i]
        a = self.layout.group_ranges[i][0]
        for p, o in zip(g["params"], self.layout.offsets[self._first[i]:]):
            q = self._working(p)
            if g["weight_decay"] and self.decoupled_weight_decay:
                q.mul_(1 - g["lr"] * g["weight_decay"])
            n = p.numel()
            if denom is None:
                q.add_(m[o - a:o - a + n].view_as(p), alpha=-step_size)
            else:
                q.addcdiv_(m[o - a:o - a + n].view_as(p), denom[o - a:o - a + n].view_as(p), value=-step_size)
            if q is not p:
                p.copy_(q)

    def _momentum_into(self, out):
        """out = beta1 * m + (1 - beta1) * g, this rank's gradient (plus the
        L2 term when the decay is not decoupled), group by group."""
        grads, ms, outs = (self.layout.group_views(x) for x in (self._grad, self.exp_avg, out))
        for i, (g, grad, m, o) in enumerate(zip(self.param_groups, grads, ms, outs)):
            beta1 = g["betas"][0]
            grad = self._l2(i, grad)
            torch.mul(m, beta1, out=o)
            o.add_(grad, alpha=1 - beta1)
        return out

    def _momentum_mask(self):
        """1 where the frozen variance is positive, 0 where every warm-up
        gradient was exactly zero (None when there is no such entry). Signs
        cannot send a zero: unmasked, such an entry would move by lr * scale
        / eps each step (DeepSpeed asks its users for this mask; here it
        comes from the variance, the same on every rank)."""
        if self._mask is False:
            zero = self.exp_avg_sq == 0
            self._mask = (~zero).to(self.layout.dtype) if bool(zero.any()) else None
        return self._mask

    def _frozen_denominator(self):
        """sqrt(v / (1 - beta2^freeze_step)) + eps, per group: fixed from the
        first compressed step on (not saved: rebuilt from the saved v)."""
        if self._denom is None:
            denom = self.exp_avg_sq.sqrt()
            for g, d in zip(self.param_groups, self.layout.group_views(denom)):
                if self.bias_correction:
                    d.div_(math.sqrt(1 - g["betas"][1] ** self.freeze_step))
                d.add_(g["eps"])
            self._denom = denom
        return self._denom

    def _compressed_update(self, direction=None):
        """p -= lr / (1 - beta1^t) * m / denom; direction: m / denom as
        exchanged (exchange="preconditioned")."""
        self.step_count += 1
        t = self.step_count
        denom = self._frozen_denominator()
        ms = self.layout.group_views(self.exp_avg if direction is None else direction)
        for i, (g, m, d) in enumerate(zip(self.param_groups, ms, self.layout.group_views(denom))):
            beta1 = g["betas"][0]
            self._apply(i, m, None if direction is not None else d,
                        g["lr"] / (1 - beta1 ** t) if self.bias_correction else g["lr"])

    # --- checkpoints (onebit_checkpoint.py) ---

    def state_dict(self):
        """param_groups as torch's, plus the flat state under "onebit": step,
        stage, the momentum, the (frozen) variance and the compressor's state
        (worker and server errors). Restores into a fresh process with the
        same group size, rank and parameters, continuing bit for bit."""
        return onebit_checkpoint.save(self, super().state_dict())

    def load_state_dict(self, state_dict):
        """Collective: a state that does not fit (another freeze_step, layout,
        group size or rank, a corrupt compressor state) fails on every rank
        with nothing changed."""
        onebit_checkpoint.load(self, state_dict, super().load_state_dict)

    def close(self):
        """Frees the compressor, the comm and the groups. Idempotent."""
        self._finalizer()
