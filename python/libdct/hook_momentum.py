"""Momentum correction and factor masking (DGC, Lin et al., ICLR 2018) in
the hook, with DctState(momentum=m) and an optimizer without momentum.

Each rank keeps a velocity u per parameter key (so it survives DDP's
re-bucketing and checkpoints), in the residual's type. A compressed
parameter's bucket carries u = m u + g instead of g: error feedback then
accumulates velocities, and an entry held back in the residual keeps its
momentum (momentum applied after a sparse exchange would skip it). Where
the residual reads 0 after the step (the entry left whole: sent, or for
global top-k, sent to its owner), u is zeroed (factor masking, unless
DctState(momentum_masking=False)), so a sent velocity is not sent again. A dense parameter (below min_compression_bytes,
before start_iter) gets momentum SGD after its exact mean: u = m u + mean g.
A parameter whose gradient is zero on every rank (unused this step) keeps
its velocity and its residual, and gets 0, as SGD skips a parameter without
gradient. A wire type narrower than the bucket is refused: it leaves each
sent entry's rounding in the residual, where masking looks for 0.
A new velocity is kept once its bucket succeeded on every rank; a unit that
spans buckets (the first iteration after load_state_dict) masks its keys'
kept velocities in place when it runs."""
import torch

from .enums import datatype_from
from .hook_units import residual_dtype


def check_wire(unit):
    """A new unit's wire type (DCT_WIRE_TYPE included) must be its bucket's."""
    wire = unit.compressor.config.wire_type
    if datatype_from(wire) != datatype_from(unit.dtype):
        raise ValueError(f"libdct: DctState(momentum=...) needs the buckets' own wire type, not {wire}: "
                         "masking reads a sent entry's residual as 0, and a narrower type leaves its rounding there")


def _advanced(st, key, grad):
    """m u + g for key, in the residual's type, where grad lives."""
    u = grad.to(residual_dtype(grad.dtype))
    old = st._owned.velocity.get(key)
    if old is None:
        return u.clone() if u is grad else u
    return old.to(u.device).mul(st.momentum).add_(u)


def before_exchange(st, keys, views, new):
    """The compressed keys' new velocities into new and into their views
    (the compressors' input). Local; before the votes."""
    for k in keys:
        new[k] = _advanced(st, k, views[k])
        views[k].copy_(new[k])


def mask(unit, new, held):
    """Factor masking: new velocities zeroed where the unit's residual (less
    global top-k's owner residual) reads 0. After the collective."""
    c = unit.compressor
    r = unit.residual()
    begin, length = c.owner_range()
    if length:
        r[begin:begin + length] -= c.get_owner_residual(torch.empty(length, dtype=r.dtype, device=r.device))
    for k, (at, n) in unit.slices.items():
        if k in new and k not in held:
            new[k].masked_fill_(r[at:at + n] == 0, 0)


def after_dense_sum(st, views, zero_keys, new):
    """Momentum SGD on the dense sums: each view (mean g) becomes m u + mean g."""
    for k, v in views.items():
        if k not in zero_keys:
            new[k] = _advanced(st, k, v)
            v.copy_(new[k])


def commit(st, new, held):
    for k, u in new.items():
        if k not in held:
            st._owned.velocity[k] = u
