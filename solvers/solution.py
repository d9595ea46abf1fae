"""The one result type every backend returns."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Status", "Reason", "Solution"]


class Status(enum.Enum):
    """Outcome of a solve."""

    OPTIMAL = "optimal"  # proven optimum of the integer objective
    FEASIBLE = "feasible"  # a feasible allocation, optimality not proven (heuristics)
    INFEASIBLE = "infeasible"  # no allocation fits: infeasible_jobs names the culprits
    LIMIT = "limit"  # time limit hit: best allocation found (if any) and bound
    ERROR = "error"  # the backend failed; message says why

    @property
    def has_allocation(self) -> bool:
        """Whether a solution with this status may carry an allocation."""
        return self in (Status.OPTIMAL, Status.FEASIBLE, Status.LIMIT)


class Reason(enum.Enum):
    """Why a solve ended, next to its :class:`Status` (one ``LIMIT`` has several causes)."""

    SOLVED = "solved"  # the backend ran to its end (OPTIMAL / INFEASIBLE proven, or a heuristic's answer)
    TIME_LIMIT = "time_limit"  # time_limit_s reached: in the backend, in the placement search or before a re-solve
    WORK_LIMIT = "work_limit"  # an iteration, node or solution limit of the backend's library
    MEMORY_LIMIT = "memory_limit"  # the backend's library ran out of memory
    INTERRUPTED = "interrupted"  # the backend's library was interrupted
    STATE_SPACE = "state_space"  # the model's size: the DP's jobs x states past max_cells, a MILP's columns past MAX_COLUMNS
    NOT_PLACEABLE = "not_placeable"  # the optimum over per-type GPU totals is proven not to fit the nodes
    PLACEMENT_STEPS = "placement_steps"  # the placement search ran out of steps before deciding
    NOT_PROVEN = "not_proven"  # the backend said optimal, but its bound does not prove it
    NO_START = "no_start"  # a heuristic found no allocation (that proves nothing)
    ERROR = "error"  # the backend failed; the message says why


@dataclass(frozen=True)
class Solution:
    """Result of one solve, the same for every backend.

    Attributes
    ----------
    status
        See :class:`Status`.
    solver
        Backend name.
    objective
        Integer objective (sum of option utilities), None without allocation.
    objective_value
        Float objective (sum of option values v), None without allocation.
    bound
        Proven upper bound on the integer objective, None if the backend has none.
    allocation
        Job id -> (gpus, batch), or None for idle. Empty without allocation.
    build_s, solve_s
        Seconds to build the backend's model and to run it.
    message
        Human-readable detail (why ERROR/LIMIT, which jobs are infeasible).
    infeasible_jobs
        For INFEASIBLE: the jobs that must run and together cannot fit.
    scale, tie_scale
        S and B of the option table the objective is measured in.
    stats
        Backend-specific figures (nodes, operations, compile seconds...).
    gpu_types
        Job id -> GPU type of its option (jobs that run).
    packed
        Job id -> whether its option is packed (on the fewest nodes).
    placement
        Job id -> {node name (``"a100/1"``): GPU indices on that node} (jobs that run).
    reason
        Why the solve ended (:class:`Reason`): what a ``LIMIT`` ran into.
    unplaced
        For a ``LIMIT`` whose allocation over per-type GPU totals was not
        placed (``NOT_PLACEABLE``, ``PLACEMENT_STEPS``, or ``TIME_LIMIT`` in
        the placement): that allocation, job id -> (gpus, batch) or None, e.g.
        to start a re-solve from (the ``hint`` option); empty otherwise.
    """

    status: Status
    solver: str
    objective: int | None = None
    objective_value: float | None = None
    bound: int | None = None
    allocation: Mapping[str, tuple[int, int] | None] = field(default_factory=dict)
    build_s: float = 0.0
    solve_s: float = 0.0
    message: str = ""
    infeasible_jobs: tuple[str, ...] = ()
    scale: int = 1
    tie_scale: int = 1
    stats: Mapping[str, Any] = field(default_factory=dict)
    gpu_types: Mapping[str, str] = field(default_factory=dict)
    packed: Mapping[str, bool] = field(default_factory=dict)
    placement: Mapping[str, Mapping[str, tuple[int, ...]]] = field(default_factory=dict)
    reason: Reason = Reason.SOLVED
    unplaced: Mapping[str, tuple[int, int] | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status is Status.ERROR and self.reason is Reason.SOLVED:
            object.__setattr__(self, "reason", Reason.ERROR)

    @property
    def gap(self) -> float | None:
        """Relative gap (bound - objective) / max(1, |bound|), None if unknown."""
        if self.objective is None or self.bound is None:
            return None
        return (self.bound - self.objective) / max(1, abs(self.bound))

    @property
    def gpus_used(self) -> int:
        """GPUs the allocation uses."""
        return sum(a[0] for a in self.allocation.values() if a is not None)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``status`` as its string value)."""
        return {
            "status": self.status.value,
            "reason": self.reason.value,
            "solver": self.solver,
            "objective": self.objective,
            "objective_value": self.objective_value,
            "bound": self.bound,
            "gap": self.gap,
            "scale": self.scale,
            "tie_scale": self.tie_scale,
            "build_s": self.build_s,
            "solve_s": self.solve_s,
            "message": self.message,
            "infeasible_jobs": list(self.infeasible_jobs),
            "allocation": {
                jid: (None if a is None else {"gpus": a[0], "batch": a[1]}) for jid, a in self.allocation.items()
            },
            "gpu_types": dict(self.gpu_types),
            "packed": {jid: bool(p) for jid, p in self.packed.items()},
            "placement": {jid: {n: list(ix) for n, ix in d.items()} for jid, d in self.placement.items()},
            "stats": {k: v for k, v in self.stats.items() if isinstance(v, (int, float, str, bool, type(None)))},
        }
