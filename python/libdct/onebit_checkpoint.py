"""OnebitAdam's state_dict() and load_state_dict(): torch's param_groups
plus an "onebit" entry (step, stage, the flat momentum and variance, the
compressor's state with both errors), loadable with weights_only=True.
Loading is all or nothing on every rank: each rank checks what it got and
loads the compressor's part, one vote, and a rank that failed makes every
rank put its compressor back and raise."""
import torch

from .onebit_support import vote

FORMAT = 1
KEYS = ("format", "step", "skipped", "freeze_step", "layout", "group", "exp_avg", "exp_avg_sq", "compressor")


def save(opt, base):
    """base (torch's state_dict of opt) with the "onebit" entry."""
    blob = opt.compressor.save_state()
    base["onebit"] = {"format": FORMAT, "step": opt.step_count, "skipped": opt.skipped_steps,
                      "freeze_step": opt.freeze_step, "layout": repr(opt.layout.describe()),
                      "group": (opt._channel.rank, opt._channel.size),
                      "exp_avg": opt.exp_avg.detach().cpu().clone(),
                      "exp_avg_sq": opt.exp_avg_sq.detach().cpu().clone(),
                      "compressor": torch.tensor(list(blob), dtype=torch.uint8)}
    return base


def load(opt, state_dict, load_base):
    """Collective; load_base is torch's Optimizer.load_state_dict of opt."""
    saved = state_dict.get("onebit") if isinstance(state_dict, dict) else None
    compressor, before, failed = opt.compressor, None, None
    try:
        failed = _misfit(opt, saved)
        if failed is None:
            before = compressor.save_state()
            compressor.load_state(bytes(saved["compressor"].tolist()))
    except Exception as e:
        failed = f"OnebitAdam.load_state_dict: {type(e).__name__}: {e}"
    try:
        vote(opt._channel, {"freeze_step": opt.freeze_step, "layout": opt.layout.describe()}, failed)
    except BaseException:
        if before is not None:
            compressor.load_state(before)
        raise
    load_base({k: v for k, v in state_dict.items() if k != "onebit"})
    opt.step_count, opt.skipped_steps = int(saved["step"]), int(saved["skipped"])
    opt.exp_avg.copy_(saved["exp_avg"])
    opt.exp_avg_sq.copy_(saved["exp_avg_sq"])
    opt._denom, opt._mask = None, False


def _misfit(opt, saved):
    """Why saved cannot be loaded into opt, or None."""
    where = "OnebitAdam.load_state_dict"
    if not isinstance(saved, dict) or saved.get("format") != FORMAT or any(k not in saved for k in KEYS):
        return f"{where}: not an OnebitAdam state_dict (no complete 'onebit' entry of format {FORMAT})"
    if saved["freeze_step"] != opt.freeze_step:
        return f"{where}: the state's freeze_step is {saved['freeze_step']}, this optimizer's {opt.freeze_step}"
    if saved["layout"] != repr(opt.layout.describe()):
        return f"{where}: the state's parameters (sizes, types, groups) are not this optimizer's"
    here = (opt._channel.rank, opt._channel.size)
    if tuple(saved["group"]) != here:
        return f"{where}: saved by rank {saved['group'][0]} of {saved['group'][1]}, here rank {here[0]} of {here[1]}"
    for name in ("exp_avg", "exp_avg_sq"):
        t = saved[name]
        if not torch.is_tensor(t) or t.shape != (opt.layout.count,) or t.dtype != opt.layout.dtype or \
                not bool(torch.isfinite(t).all()):
            return f"{where}: the state's {name} is not {opt.layout.count} finite {opt.layout.dtype} values"
    return None
