"""The incumbent timeline of a MIP backend: when each improving solution was found.

``milp`` (HiGHS' improving-solution callback), ``cpsat`` (a solution callback)
and ``scip`` (a best-solution-found event handler) record every new incumbent
with :class:`IncumbentLog`; :meth:`IncumbentLog.stats` puts the timeline into
the solution's ``stats`` (additive keys, docs/design.md §3):

- ``incumbents``: how many improving solutions the solver reported;
- ``first_incumbent_s``: seconds from the start of the solver run (after the
  model was built) to the first one;
- ``best_incumbent_s``: seconds to the last one (the returned allocation when
  it is optimal: the time to *find* the optimum, not to prove it);
- ``incumbent_timeline``: ``((seconds, objective), ...)``, objectives as the
  solver reported them (floats in the integer utility units).

The clock is :func:`time.perf_counter`, started by :meth:`IncumbentLog.start`
just before the solver runs, the same for every backend.
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["IncumbentLog"]


class IncumbentLog:
    """Times of improving solutions, measured from :meth:`start`."""

    __slots__ = ("t0", "points")

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.points: list[tuple[float, float]] = []

    def start(self) -> None:
        """Start the clock (call just before the solver runs); clears earlier points."""
        self.t0 = time.perf_counter()
        self.points = []

    def add(self, objective: float) -> None:
        """Record an incumbent of ``objective`` found now (a worse or equal one is ignored: maximisation)."""
        if self.points and objective <= self.points[-1][1]:
            return
        self.points.append((time.perf_counter() - self.t0, float(objective)))

    def stats(self) -> dict[str, Any]:
        """The stats keys of the module docstring (``incumbents`` 0 and no times when none was found)."""
        out: dict[str, Any] = {"incumbents": len(self.points), "incumbent_timeline": tuple(self.points)}
        if self.points:
            out["first_incumbent_s"] = self.points[0][0]
            out["best_incumbent_s"] = self.points[-1][0]
        return out
