"""dctConfig_t and dctStats_t as Python objects. A Config field left None takes
the DCT_* environment variable as the comm read it, else the built-in default
(dct.h documents each)."""
import dataclasses
from typing import Optional

from . import _native
from .enums import (ALGORITHMS, ALGORITHM_NAMES, COMPRESSORS, DATATYPE_NAMES, ROW_SELECTIONS,
                    THRESHOLD_METHODS, datatype_from, enum_value)


@dataclasses.dataclass
class Config:
    density: Optional[float] = None            # fraction kept, in (0, 1]
    threshold_interval: Optional[int] = None   # L: steps between threshold estimates
    error_feedback: Optional[bool] = None
    warmup_steps: Optional[int] = None         # dense steps first
    threshold_method: Optional[str] = None     # sampled | exact | bisect
    algorithm: Optional[str] = None            # auto | allgather | dense | split | globaltopk
    seed: Optional[int] = None
    row_selection: Optional[str] = None        # all-to-all only: topk | threshold
    wire_type: Optional[object] = None         # fp32 | fp64 | fp16 | bf16 (or a torch dtype)
    compressor: Optional[str] = None           # topk | onebit
    auto_global_topk: Optional[bool] = None    # auto may choose globaltopk (it changes the result)
    capacity_factor: Optional[float] = None    # 0: off; c >= 1: fixed messages of c * k entries
    owner_return: Optional[bool] = None        # global top-k: unselected entries back to their senders

    def to_native(self):
        c = _native.Config.initializer()
        plain = {"density": "density", "threshold_interval": "thresholdInterval",
                 "warmup_steps": "warmupSteps", "seed": "seed", "capacity_factor": "capacityFactor"}
        for field, native in plain.items():
            value = getattr(self, field)
            if value is not None:
                setattr(c, native, value)
        if self.error_feedback is not None:
            c.errorFeedback = int(bool(self.error_feedback))
        if self.auto_global_topk is not None:
            c.autoGlobalTopk = int(bool(self.auto_global_topk))
        if self.owner_return is not None:
            c.ownerReturn = int(bool(self.owner_return))
        enums = {"threshold_method": ("thresholdMethod", THRESHOLD_METHODS),
                 "algorithm": ("algorithm", ALGORITHMS), "row_selection": ("rowSelection", ROW_SELECTIONS),
                 "compressor": ("compressor", COMPRESSORS)}
        for field, (native, table) in enums.items():
            value = getattr(self, field)
            if value is not None:
                setattr(c, native, enum_value(table, value, field))
        if self.wire_type is not None:
            c.wireType = datatype_from(self.wire_type)
        return c

    @classmethod
    def from_native(cls, c):
        """The resolved configuration (every field defined)."""
        def name(table, value):
            return {v: k for k, v in table.items()}.get(value, value)
        return cls(density=c.density, threshold_interval=c.thresholdInterval,
                   error_feedback=bool(c.errorFeedback), warmup_steps=c.warmupSteps,
                   threshold_method=name(THRESHOLD_METHODS, c.thresholdMethod),
                   algorithm=name(ALGORITHMS, c.algorithm), seed=c.seed,
                   row_selection=name(ROW_SELECTIONS, c.rowSelection),
                   wire_type=DATATYPE_NAMES.get(c.wireType, c.wireType),
                   compressor=name(COMPRESSORS, c.compressor), auto_global_topk=bool(c.autoGlobalTopk),
                   capacity_factor=c.capacityFactor, owner_return=bool(c.ownerReturn))


PHASES = ("compress", "agree", "exchange", "reduce", "other")


@dataclasses.dataclass
class Stats:
    """What the last step did, plus totals since creation (dctStats_t). Bytes
    are payload bytes this rank put on / took off the wire."""
    step: int
    threshold: float
    nnz: int
    non_finite: int
    bytes_sent: int
    bytes_received: int
    dense_bytes: int
    algorithm: str
    index_bytes: int
    threshold_estimates: int
    total_bytes_sent: int
    total_bytes_received: int
    total_dense_bytes: int
    phase_us: dict
    total_phase_us: dict
    owner_kept: int = 0            # global top-k: entries this rank's range delivered
    owner_threshold: float = 0.0   # ... and the tau it kept them by
    owner_residual_mass: float = 0.0  # sum of |owner residual| after the step

    @classmethod
    def from_native(cls, s):
        return cls(step=s.step, threshold=s.threshold, nnz=s.nnz, non_finite=s.nonFinite,
                   bytes_sent=s.bytesSent, bytes_received=s.bytesReceived, dense_bytes=s.denseBytes,
                   algorithm=ALGORITHM_NAMES.get(s.algorithm, str(s.algorithm)), index_bytes=s.indexBytes,
                   threshold_estimates=s.thresholdEstimates, total_bytes_sent=s.totalBytesSent,
                   total_bytes_received=s.totalBytesReceived, total_dense_bytes=s.totalDenseBytes,
                   phase_us=dict(zip(PHASES, s.phaseUs)), total_phase_us=dict(zip(PHASES, s.totalPhaseUs)),
                   owner_kept=s.ownerKept, owner_threshold=s.ownerThreshold,
                   owner_residual_mass=s.ownerResidualMass)
