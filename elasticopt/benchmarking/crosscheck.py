"""Cross-check of every result of one instance against the others.

Best known objective: the largest objective of a **verified** result that
claims OPTIMAL.  A disagreement is any of:

- two results claiming OPTIMAL with different objectives (the loud one: at
  least one backend certified a wrong optimum);
- a verified FEASIBLE / LIMIT objective above a claimed optimum;
- a proven bound below the objective of a verified allocation;
- a verified INFEASIBLE claim next to a verified allocation.

A result below the best known objective without claiming optimality (a
heuristic, a time-out) agrees: it is merely suboptimal, measured by
``gap_to_best``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from elasticopt.solvers import Solution, Status

__all__ = ["BenchRun", "Verdict", "cross_check"]


@dataclass(frozen=True)
class BenchRun:
    """One solve of one instance: ``repeat`` 0 is the warm-up."""

    label: str
    repeat: int
    solution: Solution
    wall_s: float
    verified: bool
    verify_errors: str = ""

    @property
    def who(self) -> str:
        """``label`` or ``label (warm-up)``."""
        return self.label + (" (warm-up)" if self.repeat == 0 else f" #{self.repeat}")


@dataclass(frozen=True)
class Verdict:
    """The cross-check of one instance.

    Attributes
    ----------
    best_objective
        Largest verified OPTIMAL objective; None if no verified proof.
    best_value
        Its float objective.
    best_found
        Largest verified objective of any status (heuristics included).
    disagreements
        Human-readable, one per conflict; empty when everything agrees.
    per_outcome
        ``(label, repeat) -> (agrees_with_best, reason)``; agrees is None when
        there is nothing to compare (no objective, or no proven optimum).
    proven_disagree
        Whether two OPTIMAL claims (or OPTIMAL and INFEASIBLE) differ.
    """

    best_objective: int | None
    best_value: float | None
    best_found: int | None
    disagreements: tuple[str, ...]
    per_outcome: Mapping[tuple[str, int], tuple[bool | None, str]] = field(default_factory=dict)
    proven_disagree: bool = False


def _has_obj(o: BenchRun) -> bool:
    return o.solution.status.has_allocation and o.solution.objective is not None


def cross_check(outcomes: Sequence[BenchRun]) -> Verdict:
    """Compare the results of one instance (see the module docstring)."""
    proven = [o for o in outcomes if o.solution.status is Status.OPTIMAL and o.solution.objective is not None]
    good_proven = [o for o in proven if o.verified]
    best_o = max(good_proven, key=lambda o: o.solution.objective, default=None)
    best = None if best_o is None else int(best_o.solution.objective)  # type: ignore[arg-type]
    feasible = [o for o in outcomes if _has_obj(o) and o.verified]
    top = max(feasible, key=lambda o: o.solution.objective, default=None)
    best_found = None if top is None else int(top.solution.objective)  # type: ignore[arg-type]
    infeasible = [o for o in outcomes if o.solution.status is Status.INFEASIBLE and o.verified]

    msgs: list[str] = []
    proven_disagree = False
    claims = {o.solution.objective for o in proven}
    if len(claims) > 1:
        proven_disagree = True
        per_label: dict[str, list[int]] = {}
        for o in proven:
            objs = per_label.setdefault(o.label, [])
            if o.solution.objective not in objs:
                objs.append(o.solution.objective)  # type: ignore[arg-type]
        detail = ", ".join(f"{lab}={'/'.join(str(v) for v in objs)}" for lab, objs in per_label.items())
        msgs.append(f"PROVEN OPTIMA DISAGREE: {detail}")
    if infeasible and (proven or feasible):
        proven_disagree = True
        who = ", ".join(o.who for o in infeasible)
        other = (proven or feasible)[0]
        msgs.append(f"INFEASIBLE claimed by {who}, but {other.who} returned an allocation (objective {other.solution.objective})")

    per: dict[tuple[str, int], tuple[bool | None, str]] = {}
    for o in outcomes:
        s = o.solution
        reasons: list[str] = []
        agrees: bool | None = None
        if s.status is Status.INFEASIBLE:
            if feasible:
                reasons.append(f"claims INFEASIBLE but {feasible[0].who} found a verified allocation")
            agrees = not reasons if (feasible or best is not None) else None
        elif _has_obj(o):
            obj = int(s.objective)  # type: ignore[arg-type]
            if s.status is Status.OPTIMAL:
                if best is not None and obj != best:
                    reasons.append(f"claims OPTIMAL {obj}, best proven optimum is {best} ({best_o.who})")  # type: ignore[union-attr]
                if best_found is not None and obj < best_found:
                    reasons.append(f"claims OPTIMAL {obj}, but {top.who} found a verified {best_found}")  # type: ignore[union-attr]
            elif best is not None and obj > best and o.verified:
                reasons.append(f"{s.status.name} objective {obj} is above the proven optimum {best} ({best_o.who})")  # type: ignore[union-attr]
            agrees = not reasons if (best is not None or reasons) else None
        if s.bound is not None and best_found is not None and s.bound < best_found:
            reasons.append(f"bound {s.bound} is below the verified objective {best_found} of {top.who}")  # type: ignore[union-attr]
            agrees = False
        if reasons:
            agrees = False
            for r in reasons:  # one instance-level line per solver and conflict, not one per repeat
                line = f"{o.label}: {r}"
                if line not in msgs:
                    msgs.append(line)
        per[(o.label, o.repeat)] = (agrees, "; ".join(reasons))
    return Verdict(best, None if best_o is None else best_o.solution.objective_value, best_found, tuple(msgs), per,
                   proven_disagree)
