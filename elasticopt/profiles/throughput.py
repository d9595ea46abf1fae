"""Throughput models: what a job knows of its samples/s at (k GPUs, global batch b).

Two kinds satisfy :class:`ThroughputModel`: :class:`MeasuredThroughput` (a
finite set of measured points, docs/design.md §7 ``"throughput"``) and the fitted
profiles of :mod:`elasticopt.profiles` (docs/design.md §6, ``"profile"``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from elasticopt.errors import ValidationError

__all__ = ["ThroughputModel", "MeasuredThroughput", "power_of_two_grid"]


@runtime_checkable
class ThroughputModel(Protocol):
    """Anything that answers samples/s for (k GPUs, global batch b).

    A model answers for a set of *known* options: ``candidates`` lists the
    (k, b) pairs the job may be given, ``samples_per_s`` their throughput.
    """

    @property
    def name(self) -> str:
        """Short name, e.g. ``"measured"`` or ``"a100/resnet50"``."""
        ...

    def samples_per_s(self, gpus: int, batch: int) -> float | None:
        """Samples/s on ``gpus`` GPUs at global batch ``batch``; None if unknown."""
        ...

    def candidates(self, gpus_max: int, batch_min: int, batch_max: int) -> list[tuple[int, int]]:
        """The (k, b) pairs with k <= gpus_max and batch_min <= b <= batch_max it knows."""
        ...


def power_of_two_grid(lo: int, hi: int) -> list[int]:
    """Powers of two in [lo, hi], plus lo and hi themselves (sorted, unique)."""
    if hi < lo:
        return []
    out = {lo, hi}
    p = 1
    while p <= hi:
        if p >= lo:
            out.add(p)
        p *= 2
    return sorted(out)


@dataclass(frozen=True)
class MeasuredThroughput:
    """A finite table of measured points ``(gpus, global_batch) -> samples_per_s``.

    Only the measured points are known options: nothing is interpolated.

    Parameters
    ----------
    points
        Mapping from ``(gpus, global_batch)`` to samples/s (finite, > 0), placed
        on any free GPUs of the type.
    packed
        Points measured with the GPUs on the fewest nodes (ceil(k / g)): each
        becomes a packed option (docs/design.md §2).
    """

    points: Mapping[tuple[int, int], float]
    name: str = field(default="measured")
    packed: Mapping[tuple[int, int], float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "points", self._clean(self.points))
        object.__setattr__(self, "packed", self._clean(self.packed))

    @staticmethod
    def _clean(points: Mapping[tuple[int, int], float]) -> dict[tuple[int, int], float]:
        clean: dict[tuple[int, int], float] = {}
        for key, value in dict(points).items():
            k, b = key
            if not (isinstance(k, int) and k >= 1):
                raise ValidationError(f"throughput[{key}]", "gpus an integer >= 1", k)
            if not (isinstance(b, int) and b >= 1):
                raise ValidationError(f"throughput[{key}]", "global batch an integer >= 1", b)
            v = float(value)
            if not (math.isfinite(v) and v > 0):
                raise ValidationError(f"throughput[{key}]", "samples/s finite and > 0", value)
            clean[(k, b)] = v
        return dict(sorted(clean.items()))

    @classmethod
    def assembled(cls, points: Mapping[tuple[int, int], float],
                  packed: Mapping[tuple[int, int], float]) -> "MeasuredThroughput":
        """The table ``MeasuredThroughput(points, packed=packed)`` builds, without its checks: for points known
        to pass them (integer keys >= 1, finite float values > 0; the service's caller-values jobs,
        ``elasticopt/service/translate.py``).  Equal to the checked one, in the same (sorted) order
        (``tests/service/test_service_screen.py``)."""
        self = object.__new__(cls)
        object.__setattr__(self, "points", dict(sorted(points.items())))
        object.__setattr__(self, "name", "measured")
        object.__setattr__(self, "packed", dict(sorted(packed.items())))
        return self

    @classmethod
    def from_rows(cls, rows: Iterable[tuple[int, int, float]]) -> "MeasuredThroughput":
        """Build from ``[gpus, global_batch, samples_per_s]`` rows."""
        return cls({(int(k), int(b)): float(t) for k, b, t in rows})

    def samples_per_s(self, gpus: int, batch: int) -> float | None:
        return self.points.get((gpus, batch))

    def candidates(self, gpus_max: int, batch_min: int, batch_max: int) -> list[tuple[int, int]]:
        return [(k, b) for (k, b) in self.points if k <= gpus_max and batch_min <= b <= batch_max]

    def rows(self) -> list[list[float]]:
        """The points as ``[gpus, global_batch, samples_per_s]`` rows."""
        return [[k, b, t] for (k, b), t in self.points.items()]

    def __hash__(self) -> int:
        return hash((tuple(self.points.items()), tuple(self.packed.items())))
