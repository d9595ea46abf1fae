"""Helpers shared by backends: hints, empty tables, integer bounds, the DP outcome.

Kept apart from every backend so that no backend imports another.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from elasticopt.errors import SolverOptionError
from elasticopt.models.table import OptionTable
from elasticopt.solvers.base import Outcome
from elasticopt.solvers.solution import Reason, Solution, Status

__all__ = [
    "presolve_setting",
    "HINT_RULE", "hint_choice", "empty_outcome", "integer_bound", "new_highs", "dp_outcome", "NEG", "INFEASIBLE_BELOW",
    "MAX_CELLS", "MAX_CELLS_RULE", "state_shape", "too_large", "node_counts_of",
]

#: Value of an unreachable state; far below any real total (|total| < 2**52).
NEG = -(1 << 60)
#: F_n(G) below this means no allocation fits.
INFEASIBLE_BELOW = -(1 << 59)


#: Largest DP table (jobs x states) a DP backend builds before answering LIMIT.
MAX_CELLS = 400_000_000

#: The DP backends' ``max_cells`` option (a negative bound answered every instance LIMIT, "> -5 cells").
MAX_CELLS_RULE = ("an integer >= 1 (the largest jobs x states table the DP builds)",
                  lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1)


def state_shape(table: OptionTable) -> tuple[int, ...]:
    """Per type G_t + 1: the shape of the DP state."""
    return tuple(int(c) + 1 for c in table.capacities)


def too_large(table: OptionTable, max_cells: int) -> Outcome | None:
    """A LIMIT outcome when n x prod(G_t + 1) passes ``max_cells``, else None."""
    states = int(np.prod(state_shape(table), dtype=np.float64))
    if table.n_jobs * states > max_cells:
        return Outcome(
            Status.LIMIT,
            message=(
                f"DP state space too large: {table.n_jobs} jobs x {states:.3g} states (prod of G_t + 1 over "
                f"{table.n_types} types) > {max_cells:.3g} cells; use 'milp' or 'cpsat'"
            ),
            stats={"dp_states": states},
            reason=Reason.STATE_SPACE,
        )
    return None


def node_counts_of(table: OptionTable, form: Any, values: np.ndarray) -> dict[int, dict[int, int]] | None:
    """``{job row: {node: GPUs}}`` of the packed options switched on, from a formulation's column values.

    ``form`` is a :class:`~elasticopt.solvers.formulation.Formulation`; None when it has no node variables.
    """
    if not form.node_cols:
        return None
    out: dict[int, dict[int, int]] = {}
    for i, _t, nd, y, z in form.node_cols:
        if values[i] < 0.5 or values[y] < 0.5:
            continue
        r = int(form.rows[i])
        cnt = int(round(values[z])) if z >= 0 else int(table.gpus[r, form.cols[i]])
        if cnt:
            out.setdefault(r, {})[nd] = cnt
    return out


def dp_outcome(table: OptionTable, best: int, choice: np.ndarray | None, ops: int) -> Outcome:
    """The Outcome of a finished DP (shared by both DP backends)."""
    if best < INFEASIBLE_BELOW or choice is None:
        return Outcome(Status.INFEASIBLE, stats={"operations": ops})
    return Outcome(Status.OPTIMAL, choice=choice, bound=int(best), stats={"operations": ops})


#: The option rule of ``hint`` (cpsat, milp): checked before solving, like every option.
HINT_RULE = (
    "a Solution or a mapping job id -> (gpus, batch) | None",
    lambda v: v is None or isinstance(v, (Solution, Mapping)),
)


def hint_choice(table: OptionTable, hint: Any, solver: str = "") -> np.ndarray:
    """Option index per job row (-1 idle, -2 no hint) from a hint.

    Parameters
    ----------
    table
        The option table being solved.
    hint
        A :class:`Solution`, or a mapping ``job id -> (gpus, batch) | None``.
        Jobs it does not name, or whose (k, b) is not an option of the table
        (e.g. removed by a reduction), get no hint.
    solver
        The backend's name, for the error message.

    Raises
    ------
    SolverOptionError
        If ``hint`` is neither.
    """
    if isinstance(hint, Solution):
        alloc: Mapping[str, Any] = hint.allocation
    elif isinstance(hint, Mapping):
        alloc = hint
    else:
        raise SolverOptionError(solver, "hint", "a Solution or a mapping job id -> (gpus, batch) | None",
                                type(hint).__name__)
    out = np.full(table.n_jobs, -2, dtype=np.int64)
    for j, jid in enumerate(table.job_ids):
        if jid not in alloc:
            continue
        a = alloc[jid]
        if a is None:
            if table.idle_allowed[j]:
                out[j] = -1
            continue
        k, b = int(a[0]), int(a[1])
        hit = np.flatnonzero(table.valid[j] & (table.gpus[j] == k) & (table.batch[j] == b))
        if hit.size:
            out[j] = int(hit[0])
    return out


def integer_bound(dual_bound: float, objective: int | None) -> int | None:
    """Floor of a double dual bound, never below a known objective.

    A slack of 1e-6 plus a few units in the last place is added before
    flooring (making the bound weaker, never wrong); a bound below an
    achieved objective is a rounding artefact (the optimum is at least that
    objective), so the objective is returned.
    """
    if dual_bound is None or not math.isfinite(dual_bound):
        return objective
    b = int(math.floor(dual_bound + 1e-6 + 4 * math.ulp(dual_bound)))
    return b if objective is None else max(b, objective)


def empty_outcome(table: OptionTable) -> Outcome:
    """The outcome of a table without any option (solvers reject empty models).

    Every job idles (OPTIMAL, objective 0) unless some job may not idle (INFEASIBLE).
    """
    if not table.idle_allowed.all():
        return Outcome(Status.INFEASIBLE, stats={"columns": 0})
    return Outcome(Status.OPTIMAL, choice=np.full(table.n_jobs, -1, dtype=np.int64), bound=0, stats={"columns": 0})


_BANNER_DONE = False


def new_highs() -> Any:
    """A ``highspy.Highs`` whose one-time start-up banner does not reach stdout.

    HiGHS prints "Running HiGHS ..." on stdout when the first instance of a
    process is created, before any option can be set; that would corrupt
    ``elasticopt solve --json``.  The first construction runs with file
    descriptor 1 pointed at /dev/null.
    """
    global _BANNER_DONE
    import highspy

    if not _BANNER_DONE:
        import os
        import sys

        sys.stdout.flush()
        saved = os.dup(1)
        try:
            with open(os.devnull, "w") as null:
                os.dup2(null.fileno(), 1)
                highspy.Highs()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        _BANNER_DONE = True
    return highspy.Highs()


def presolve_setting(presolve: str, node_variables: bool) -> str:
    """HiGHS's ``presolve`` for our option: ``"auto"`` is ``"off"`` on models with node variables, else ``"choose"``.

    On the node-assignment model (docs/design.md §3) HiGHS's MIP presolve
    (probing, clique cover) costs 50-400x the whole solve without it and does
    not check the time limit: 695 s under a 30 s limit at 1000 jobs on 1024
    fragmented GPUs, where presolve off proves the optimum in 10 s.  On the
    totals-only model neither setting wins everywhere, so HiGHS chooses.
    """
    if presolve == "auto":
        return "off" if node_variables else "choose"
    return presolve
