"""Why an instance is hard: its LP-relaxation gap, and what the exact reductions removed.

The LP relaxation is the MILP every MIP backend solves
(:func:`~elasticopt.solvers.formulation.formulate` of the table the solvers
got, node variables included) with integrality dropped, solved by HiGHS
(dual simplex, presolve on).  Its optimum ``z_LP`` bounds the integer optimum
``z*`` from above; the **LP gap** ``(z_LP - z*) / max(1, |z*|)`` is how far
branch-and-bound must close it: near 0 the LP is nearly integral (``paper``),
larger gaps (Pisinger's strongly correlated and subset-sum families) mean
more branching.  HiGHS missing, or an LP that does not solve: no gap.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from elasticopt.models.table import OptionTable

__all__ = ["LPRelaxation", "lp_relaxation", "lp_gap"]


@dataclass(frozen=True)
class LPRelaxation:
    """The LP relaxation of a table: ``bound`` (None unless solved), HiGHS's status and the seconds it took."""

    bound: float | None
    status: str
    seconds: float


def lp_relaxation(table: OptionTable, time_limit_s: float | None = None) -> LPRelaxation:
    """Solve the LP relaxation of ``table``'s MILP with HiGHS (module docstring), within ``time_limit_s``."""
    import importlib.util

    if importlib.util.find_spec("highspy") is None:
        return LPRelaxation(None, "highspy not installed", 0.0)
    import highspy

    from elasticopt.solvers.common import new_highs
    from elasticopt.solvers.formulation import formulate

    from elasticopt.errors import ModelTooLargeError

    t0 = time.perf_counter()
    try:
        f = formulate(table)
    except ModelTooLargeError as exc:
        return LPRelaxation(None, f"not built: {exc}", time.perf_counter() - t0)
    if f.rows.size == 0:
        return LPRelaxation(0.0, "empty", time.perf_counter() - t0)
    start, index, value = f.csc()
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = f.n_cols, f.n_rows
    lp.sense_ = highspy.ObjSense.kMaximize
    lp.col_cost_, lp.col_lower_, lp.col_upper_ = f.cost, np.zeros(f.n_cols), f.col_upper
    lp.row_lower_, lp.row_upper_ = f.row_lower, f.row_upper
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = f.n_cols, f.n_rows
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = start, index, value
    h = new_highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    if time_limit_s is not None:
        h.setOptionValue("time_limit", float(time_limit_s))
    h.passModel(lp)
    h.run()
    st = h.modelStatusToString(h.getModelStatus())
    bound = float(h.getInfo().objective_function_value) if h.getModelStatus() == highspy.HighsModelStatus.kOptimal else None
    return LPRelaxation(bound, st, time.perf_counter() - t0)


def lp_gap(lp_bound: float | None, optimum: int | None) -> float | None:
    """``(lp_bound - optimum) / max(1, |optimum|)``; None when either is unknown."""
    if lp_bound is None or optimum is None:
        return None
    return (lp_bound - optimum) / max(1, abs(optimum))
