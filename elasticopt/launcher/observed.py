"""A throughput model that learns online: measured points override the prior."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from elasticopt.profiles.throughput import ThroughputModel

__all__ = ["ObservedThroughput"]


@dataclass(eq=False)
class ObservedThroughput:
    """Wrap a prior :class:`ThroughputModel`; measured (k, b) points replace its answers.

    Parameters
    ----------
    prior
        The model the job was submitted with (a profile or measured points).
    smoothing
        Weight of a new measurement in the running average of a point (1 = keep
        only the latest).

    Notes
    -----
    ``candidates`` are the prior's plus every observed point in range, so an
    observed option unknown to the prior becomes schedulable.  Not frozen: the
    launcher calls :meth:`observe` as measurements arrive.
    """

    prior: ThroughputModel
    smoothing: float = 0.5
    observed: dict[tuple[int, int], float] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """``observed+<prior name>``."""
        return f"observed+{self.prior.name}"

    def observe(self, gpus: int, batch: int, samples_per_s: float) -> None:
        """Record a measured rate (ignored unless finite and > 0)."""
        if not (math.isfinite(samples_per_s) and samples_per_s > 0):
            return
        old = self.observed.get((gpus, batch))
        a = self.smoothing
        self.observed[(gpus, batch)] = samples_per_s if old is None else a * samples_per_s + (1 - a) * old

    def samples_per_s(self, gpus: int, batch: int) -> float | None:
        got = self.observed.get((gpus, batch))
        return got if got is not None else self.prior.samples_per_s(gpus, batch)

    def candidates(self, gpus_max: int, batch_min: int, batch_max: int) -> list[tuple[int, int]]:
        out = set(self.prior.candidates(gpus_max, batch_min, batch_max))
        out.update((k, b) for (k, b) in self.observed if k <= gpus_max and batch_min <= b <= batch_max)
        return sorted(out)
