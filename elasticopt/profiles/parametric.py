"""Parametric throughput profile: compute and gradient synchronisation, overlapped.

Iteration time on k GPUs spread over n nodes at per-GPU batch m = b / k::

    T_compute = compute_base_s + compute_per_sample_s * m
    T_sync    = 0                                             if k == 1
              = sync_base_s + sync_per_gpu_s * (k - 2)           if n == 1
              = node_sync_base_s + node_sync_per_gpu_s * (k - 2) if n > 1
    T_iter    = (T_compute**gamma + T_sync**gamma) ** (1 / gamma)
    samples/s = b / T_iter

gamma = 1 is no overlap (times add), gamma -> inf full overlap (the larger
wins).  This is the Pollux throughput model (Qiao et al., OSDI'21) with a step
when the job crosses nodes; jobs are assumed packed, n = ceil(k / gpus_per_node).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields

import numpy as np

from elasticopt.errors import ValidationError
from elasticopt.profiles.grid import grid_candidates

__all__ = ["IterationTimeParams", "ParametricProfile", "iteration_time_s"]


@dataclass(frozen=True)
class IterationTimeParams:
    """The seven parameters of the iteration-time model (seconds; gamma unitless)."""

    compute_base_s: float
    compute_per_sample_s: float
    sync_base_s: float
    sync_per_gpu_s: float
    node_sync_base_s: float
    node_sync_per_gpu_s: float
    gamma: float

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ValidationError(f"params.{f.name}", "a finite number >= 0", v)
        if self.gamma < 1:
            raise ValidationError("params.gamma", "a number >= 1", self.gamma)
        if self.compute_base_s + self.compute_per_sample_s <= 0:
            raise ValidationError("params.compute_base_s", "compute time > 0 at local batch 1",
                                  self.compute_base_s)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """Parameter names, in the order of :meth:`as_array`."""
        return tuple(f.name for f in fields(cls))

    def as_array(self) -> np.ndarray:
        """The parameters as a float array in :meth:`names` order."""
        return np.array([getattr(self, n) for n in self.names()], dtype=float)

    @classmethod
    def from_array(cls, x) -> "IterationTimeParams":
        """Inverse of :meth:`as_array`."""
        return cls(*(float(v) for v in x))

    def to_dict(self) -> dict[str, float]:
        """Plain dict, for JSON."""
        return asdict(self)


def iteration_time_s(params: IterationTimeParams | np.ndarray, gpus, nodes, local_batch) -> np.ndarray:
    """Vectorised model iteration time; ``params`` as the dataclass or its array."""
    p = params.as_array() if isinstance(params, IterationTimeParams) else np.asarray(params, float)
    c0, c1, s0, s1, n0, n1, gamma = p
    k = np.asarray(gpus, dtype=float)
    n = np.asarray(nodes, dtype=float)
    m = np.asarray(local_batch, dtype=float)
    compute = c0 + c1 * m
    extra = np.maximum(k - 2.0, 0.0)
    sync = np.where(n > 1, n0 + n1 * extra, s0 + s1 * extra)
    sync = np.where(k > 1, sync, 0.0)
    # (a^g + b^g)^(1/g) computed stably as hi * (1 + (lo/hi)^g)^(1/g)
    hi = np.maximum(compute, sync)
    lo = np.minimum(compute, sync)
    ratio = np.divide(lo, hi, out=np.zeros_like(hi), where=hi > 0)
    return hi * (1.0 + ratio**gamma) ** (1.0 / gamma)


@dataclass(frozen=True, eq=False)
class ParametricProfile:
    """A :class:`~elasticopt.models.ThroughputModel` from the iteration-time model.

    Parameters
    ----------
    name
        E.g. ``"a100/resnet50"``.
    params
        The fitted :class:`IterationTimeParams`.
    gpus_per_node
        Node size of the measured hardware (decides where the node step falls).
    batch_min, batch_max
        Global batch range the measurements cover.
    max_local
        Largest per-GPU batch measured (larger did not fit or was not run).
    gpus_max
        Largest GPU count measured; candidates never go past it (None = no cap).
    min_local
        Smallest per-GPU batch offered as a candidate.
    meta
        Provenance and fit figures (free-form, JSON-able).
    """

    name: str
    params: IterationTimeParams
    gpus_per_node: int
    batch_min: int
    batch_max: int
    max_local: int
    gpus_max: int | None = None
    min_local: int = 1
    meta: dict = field(default_factory=dict)
    #: memo of samples_per_s: the profile is immutable and schedulers ask the same (k, b) at every event
    _memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        where = f"profile {self.name!r}"
        for attr in ("gpus_per_node", "batch_min", "batch_max", "max_local", "min_local"):
            v = getattr(self, attr)
            if not (isinstance(v, int) and v >= 1):
                raise ValidationError(f"{where}.{attr}", "an integer >= 1", v)
        if self.batch_max < self.batch_min:
            raise ValidationError(f"{where}.batch_max", f"an integer >= batch_min={self.batch_min}",
                                  self.batch_max)
        if self.gpus_max is not None and not (isinstance(self.gpus_max, int) and self.gpus_max >= 1):
            raise ValidationError(f"{where}.gpus_max", "None or an integer >= 1", self.gpus_max)

    def nodes(self, gpus: int) -> int:
        """Nodes a packed job on ``gpus`` GPUs spans."""
        return -(-int(gpus) // self.gpus_per_node)

    def iteration_time_s(self, gpus: int, batch: int) -> float:
        """Model seconds per iteration at (gpus, global batch)."""
        return float(iteration_time_s(self.params, gpus, self.nodes(gpus), batch / gpus))

    def samples_per_s(self, gpus: int, batch: int) -> float | None:
        """Model samples/s; None for gpus < 1 or batch < gpus (no whole sample per GPU)."""
        key = (gpus, batch)
        if key in self._memo:
            return self._memo[key]
        out = None
        if gpus >= 1 and batch >= gpus:
            t = self.iteration_time_s(gpus, batch)
            out = batch / t if t > 0 and math.isfinite(t) else None
        self._memo[key] = out
        return out

    def samples_per_s_on_nodes(self, gpus: int, batch: int, nodes: int) -> float | None:
        """Model samples/s with the job's GPUs on ``nodes`` nodes (packed: ceil(k / g); spread: more)."""
        if gpus < 1 or batch < gpus or nodes < 1:
            return None
        t = float(iteration_time_s(self.params, gpus, nodes, batch / gpus))
        return batch / t if t > 0 and math.isfinite(t) else None

    def candidates(self, gpus_max: int, batch_min: int, batch_max: int) -> list[tuple[int, int]]:
        """Power-of-two grid (see :func:`~elasticopt.profiles.grid.grid_candidates`)."""
        cap = gpus_max if self.gpus_max is None else min(gpus_max, self.gpus_max)
        return grid_candidates(cap, batch_min, batch_max, gpus_per_node=self.gpus_per_node,
                               max_local=self.max_local, min_local=self.min_local)

    def to_dict(self) -> dict:
        """JSON form (the entry of ``profiles/data/*.json``)."""
        return {
            "params": self.params.to_dict(),
            "gpus_per_node": self.gpus_per_node,
            "batch_min": self.batch_min,
            "batch_max": self.batch_max,
            "max_local": self.max_local,
            "gpus_max": self.gpus_max,
            "min_local": self.min_local,
            **({"meta": self.meta} if self.meta else {}),
        }

    @classmethod
    def from_dict(cls, name: str, d: dict) -> "ParametricProfile":
        """Inverse of :meth:`to_dict`."""
        return cls(
            name=name,
            params=IterationTimeParams(**d["params"]),
            gpus_per_node=int(d["gpus_per_node"]),
            batch_min=int(d["batch_min"]),
            batch_max=int(d["batch_max"]),
            max_local=int(d["max_local"]),
            gpus_max=None if d.get("gpus_max") is None else int(d["gpus_max"]),
            min_local=int(d.get("min_local", 1)),
            meta=dict(d.get("meta", {})),
        )

    def __hash__(self) -> int:
        return hash((self.name, self.params, self.gpus_per_node, self.batch_min, self.batch_max,
                     self.max_local, self.gpus_max, self.min_local))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ParametricProfile):
            return NotImplemented
        return hash(self) == hash(other) and self.to_dict() == other.to_dict()
