"""Tabular throughput profile: measured points on a (GPU count x batch) grid.

Between grid points samples/s is interpolated bilinearly in (log k, log batch):
a convex combination of the (up to four) surrounding measured points, so it is
never above the largest of them and equals a measured point exactly on it.
Where a surrounding cell was not measured (it did not fit or did not run) the
profile answers None; asked outside the measured ranges it raises
:class:`~elasticopt.errors.ValidationError` rather than extrapolate.

The batch axis is either the global batch (``batch_axis="global"``, as in the
A100 grid) or the per-GPU batch (``"local"``, as in the T4 step times).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from elasticopt.errors import ValidationError
from elasticopt.profiles.grid import grid_candidates

__all__ = ["TabularProfile"]


def _bracket(axis: Sequence[int], x: float) -> tuple[int, int, float]:
    """Indices (i, j) around x on a sorted axis and the weight of j (0 if x on axis[i])."""
    j = bisect.bisect_left(axis, x)
    if j < len(axis) and axis[j] == x:
        return j, j, 0.0
    i = j - 1
    w = (math.log(x) - math.log(axis[i])) / (math.log(axis[j]) - math.log(axis[i]))
    return i, j, w


@dataclass(frozen=True, eq=False)
class TabularProfile:
    """Measured samples/s on a grid, interpolated but never extrapolated.

    Parameters
    ----------
    name
        Profile name.
    points
        ``(gpus, batch) -> samples_per_s``; ``batch`` is global or per-GPU as
        ``batch_axis`` says.  A value of 0 or None marks a cell that was tried
        but did not fit; it is never interpolated across.
    batch_axis
        ``"global"`` or ``"local"``.
    gpus_per_node
        Node size of the measured hardware.
    """

    name: str
    points: Mapping[tuple[int, int], float | None]
    batch_axis: str = "global"
    gpus_per_node: int = 8

    def __post_init__(self) -> None:
        where = f"profile {self.name!r}"
        if self.batch_axis not in ("global", "local"):
            raise ValidationError(f"{where}.batch_axis", "'global' or 'local'", self.batch_axis)
        clean: dict[tuple[int, int], float | None] = {}
        for (k, b), v in dict(self.points).items():
            if not (isinstance(k, int) and k >= 1 and isinstance(b, int) and b >= 1):
                raise ValidationError(f"{where}.points[{(k, b)}]", "integer gpus and batch >= 1", (k, b))
            if v is not None:
                v = float(v)
                if not math.isfinite(v) or v < 0:
                    raise ValidationError(f"{where}.points[{(k, b)}]", "samples/s finite and >= 0", v)
            clean[(k, b)] = v if v else None
        if not any(v is not None for v in clean.values()):
            raise ValidationError(f"{where}.points", "at least one measured point > 0", len(clean))
        object.__setattr__(self, "points", dict(sorted(clean.items())))
        object.__setattr__(self, "_gpus", sorted({k for k, _ in clean}))
        object.__setattr__(self, "_batches", sorted({b for _, b in clean}))

    # -- measured ranges -------------------------------------------------
    def _measured(self) -> list[tuple[int, int]]:
        return [key for key, v in self.points.items() if v is not None]

    def _global(self, k: int, b: int) -> int:
        return b if self.batch_axis == "global" else k * b

    @property
    def gpus_max(self) -> int:
        """Largest GPU count with a measurement."""
        return max(k for k, _ in self._measured())

    @property
    def batch_min(self) -> int:
        """Smallest global batch measured."""
        return min(self._global(k, b) for k, b in self._measured())

    @property
    def batch_max(self) -> int:
        """Largest global batch measured."""
        return max(self._global(k, b) for k, b in self._measured())

    @property
    def max_local(self) -> int:
        """Largest per-GPU batch measured (larger did not fit or was not run)."""
        if self.batch_axis == "local":
            return max(b for _, b in self._measured())
        return max(b // k for k, b in self._measured())

    # -- ThroughputModel -------------------------------------------------
    def samples_per_s(self, gpus: int, batch: int) -> float | None:
        """Interpolated samples/s; None where a surrounding cell did not fit.

        Raises
        ------
        ValidationError
            If (gpus, batch) lies outside the measured GPU or batch range.
        """
        x = batch if self.batch_axis == "global" else batch / gpus if gpus >= 1 else 0
        ks, bs = self._gpus, self._batches
        if not (ks[0] <= gpus <= ks[-1]) or not (bs[0] <= x <= bs[-1]):
            raise ValidationError(
                f"profile {self.name!r}.samples_per_s(gpus={gpus}, batch={batch})",
                f"gpus in [{ks[0]}, {ks[-1]}] and {self.batch_axis} batch in [{bs[0]}, {bs[-1]}]"
                " (the measured ranges)",
                (gpus, x),
                hint="a tabular profile does not extrapolate; use a parametric profile",
            )
        exact = self.points.get((gpus, x)) if float(x).is_integer() else None
        if exact is not None:
            return exact
        i0, i1, wk = _bracket(ks, gpus)
        j0, j1, wb = _bracket(bs, x)
        total = 0.0
        for ki, kw in ((ks[i0], 1.0 - wk), (ks[i1], wk)):
            for bj, bw in ((bs[j0], 1.0 - wb), (bs[j1], wb)):
                w = kw * bw
                if w == 0.0:
                    continue
                v = self.points.get((ki, bj))
                if v is None:
                    return None
                total += w * v
        return total

    def candidates(self, gpus_max: int, batch_min: int, batch_max: int) -> list[tuple[int, int]]:
        """Power-of-two grid points inside the measured ranges that have an answer."""
        cap = min(gpus_max, self.gpus_max)
        lo = 1 if self.batch_axis == "global" else self._batches[0]
        out = []
        for k, b in grid_candidates(cap, batch_min, batch_max, gpus_per_node=self.gpus_per_node,
                                    max_local=self.max_local, min_local=lo):
            try:
                if self.samples_per_s(k, b) is not None:
                    out.append((k, b))
            except ValidationError:
                continue
        return out

    def __hash__(self) -> int:
        return hash((self.name, self.batch_axis, self.gpus_per_node, tuple(self.points.items())))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TabularProfile):
            return NotImplemented
        return (self.name, self.batch_axis, self.gpus_per_node, self.points) == (
            other.name, other.batch_axis, other.gpus_per_node, other.points)
