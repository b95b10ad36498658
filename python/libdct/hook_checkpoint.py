"""DctState.state_dict() / load_state_dict(): a rank's hook state by
parameter position (never id(), which CPython reuses): each unit's whole
compressor state (dctCompressorSaveState: residual, threshold schedule,
1-bit server error, ...), the orphaned residuals, the velocities (momentum
correction), the last iteration's
dense groups (hook_dense.py), the iteration and the settings. Loading is
collective: every rank checks its own state against its model and
settings, and every rank fails if any rank's does not fit.
The restored units and dense groups hold for the first iteration, when DDP
in a fresh process may bucket differently, so the run continues bit for
bit (the auto tuner re-learns: its timings are not saved)."""
import torch

from .hook_agree import SETTINGS, Disagreement, digest, settings_of, vote
from .hook_units import Unit

FORMAT, VERSION = "libdct.DctState", 3
READS = (2, 3)  # version 2: no velocities (momentum 0)
VERSION_2_DEFAULTS = {"momentum": 0.0, "momentum_masking": True}
RUN_ONLY = ("find_unused_parameters",)  # agreed, but shapes nothing saved: a checkpoint loads under either


def save(state):
    if state._positions is None:
        raise ValueError("DctState.state_dict() needs DctState(model=...): residuals are saved by parameter position")
    units = state._owned.units
    for u in units.by_keys.values():
        if u.device.type == "cuda":
            torch.cuda.synchronize(u.device)
    return {"format": FORMAT, "version": VERSION, "settings": settings_of(state), "iteration": state.iter,
            "group_size": state.world_size, "group_rank": state.control.rank,
            "units": [{"keys": list(u.keys), "numels": list(u.numels), "dtype": str(u.dtype).split(".")[-1],
                       "device": u.device.type, "signature": u.signature, "state": u.compressor.save_state()}
                      for u in units.by_keys.values()],
            "orphans": {k: r.detach().cpu().clone() for k, r in units.orphans.items()},
            "velocity": {k: u.detach().cpu().clone() for k, u in state._owned.velocity.items()},
            "dense": [list(g) for g in state._runner.last_dense],
            "bytes_sent": state.bytes_sent, "dense_bytes": state.dense_bytes, "rebuilds": units.rebuilds}


def load(state, saved):
    problem = None
    try:
        _check(state, saved)
    except Exception as e:
        problem = e
    failed_rank = _agree(state, problem)
    if failed_rank is not None:
        _fail(state, problem, failed_rank)
    try:
        _agree_on(state, saved)
    except Disagreement:
        raise RuntimeError("libdct: load_state_dict: the saved units differ across the group's ranks: "
                           "every rank must load its own state_dict() of the same checkpoint") from None
    made, problem = [], None
    try:
        for s in saved["units"]:
            device = torch.device("cpu") if s["device"] == "cpu" else torch.device("cuda", torch.cuda.current_device())
            dtype = getattr(torch, s["dtype"])
            c = state._comm_for(device).compressor(sum(s["numels"]), dtype, state.compressor_config())
            made.append(Unit(s["keys"], s["numels"], dtype, s["signature"], c, device))
            c.load_state(s["state"])
    except Exception as e:
        problem = e
    failed_rank = _agree(state, problem)
    if failed_rank is not None:
        for u in made:
            u.close()
        _fail(state, problem, failed_rank)
    units = state._owned.units
    units.close()
    for u in made:
        units.add(u)
    units.orphans = {int(k): r.clone() for k, r in saved["orphans"].items()}
    state._owned.velocity = {int(k): u.clone() for k, u in saved.get("velocity", {}).items()}
    units.rebuilds = saved["rebuilds"]
    state.iter, state.bytes_sent, state.dense_bytes = saved["iteration"], saved["bytes_sent"], saved["dense_bytes"]
    state._runner.keep_partition = True
    state._runner.saved_dense = [tuple(g) for g in saved["dense"]]
    state._runner.last_dense = list(state._runner.saved_dense)
    state._runner.last_unit.clear()


def _check(state, saved):
    if not isinstance(saved, dict) or saved.get("format") != FORMAT:
        raise ValueError("not a DctState.state_dict()")
    if saved.get("version") not in READS:
        raise ValueError(f"a DctState.state_dict() of version {saved.get('version')}; this libdct reads {READS}")
    if state._positions is None:
        raise ValueError("load_state_dict() needs DctState(model=...)")
    mine = settings_of(state)
    for name in SETTINGS:
        if name in RUN_ONLY:
            continue
        theirs = saved["settings"].get(name, VERSION_2_DEFAULTS.get(name))
        if theirs != mine[name]:
            raise ValueError(f"saved with {name} = {theirs!r}, this DctState has {mine[name]!r}")
    if (saved["group_size"], saved["group_rank"]) != (state.world_size, state.control.rank):
        raise ValueError(f"saved by group rank {saved['group_rank']} of {saved['group_size']}, "
                         f"loaded by group rank {state.control.rank} of {state.world_size}")
    numels, seen = state._numels, set()
    pieces = [(k, n) for s in saved["units"] for k, n in zip(s["keys"], s["numels"])]
    pieces += [(k, r.numel()) for k, r in saved["orphans"].items()]
    for k, u in saved.get("velocity", {}).items():
        if not 0 <= k < len(numels) or numels[k] != u.numel():
            raise ValueError(f"the saved velocity of parameter {k} ({u.numel()} elements) does not fit the model")
    for k, n in pieces:
        if not 0 <= k < len(numels) or numels[k] != n or k in seen:
            raise ValueError(f"the saved state does not fit the model: parameter {k} "
                             f"({n} elements) is not one of its {len(numels)} parameters, or is saved twice")
        seen.add(k)
    dense = [k for g in saved["dense"] for k in g]
    if len(set(dense)) != len(dense) or not all(0 <= k < len(numels) for k in dense):
        raise ValueError(f"the saved dense groups {saved['dense']} do not fit the model's {len(numels)} parameters")


def _agree_on(state, saved):
    shape = [(s["keys"], s["numels"], s["dtype"]) for s in saved["units"]]
    vote(state.control.pg, state.ranks, settings_of(state), digest((saved["iteration"], shape, saved["dense"])))


def _agree(state, problem):
    """The highest global-rank-order group rank that failed, or None."""
    return vote(state.control.pg, state.ranks, settings_of(state), 0, problem is not None).failed_rank


def _fail(state, problem, failed_rank):
    if problem is not None:
        raise RuntimeError(f"libdct: load_state_dict on global rank {state.ranks[state.control.rank]}: {problem}") \
            from problem
    raise RuntimeError(f"libdct: load_state_dict failed on global rank {state.ranks[failed_rank]}; "
                       "nothing was loaded on any rank")
