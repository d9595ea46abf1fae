"""``milp``: the option table as a 0/1 MILP solved by HiGHS (highspy), docs/design.md §3.

The model is :func:`~elasticopt.solvers.formulation.formulate`'s: option
columns x (one per option), a row per job (``<= 1``, ``= 1`` when the job may
not idle), a capacity row per GPU type, and node variables where placement
matters.  The objective maximises ``sum u_i x_i`` (integers, total < 2**52, so
exact in doubles).

The model goes to HiGHS whole, as CSC arrays (``passModel``: 13 ms at 16k
columns against 0.28 s with per-variable calls).  ``mip_rel_gap = 0`` always
(the default 1e-4 returned "Optimal" answers below the optimum) and
``mip_abs_gap`` below 1: the objective is integer-valued, so a gap under 1
proves the integer optimum.  The solution is rounded to 0/1 and re-checked;
the dual bound is floored to an integer.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from elasticopt.models.table import OptionTable
from elasticopt.solvers.base import Backend, Capabilities, Outcome
from elasticopt.solvers.common import (
    HINT_RULE,
    empty_outcome,
    hint_choice,
    integer_bound,
    new_highs,
    node_counts_of,
    presolve_setting,
)
from elasticopt.solvers.formulation import Formulation, formulate
from elasticopt.solvers.options import SEED_RULE, threads_rule
from elasticopt.solvers.incumbents import IncumbentLog
from elasticopt.solvers.registry import register
from elasticopt.solvers.solution import Reason, Status

__all__ = ["HighsMILP"]

#: A column value farther than this from 0 or 1 is not trusted as integral.
INTEGRALITY_TOL = 1e-6

#: HiGHS model status (``highspy.HighsModelStatus`` member name) -> our status, before
#: the solution is checked: LIMIT may still be proven OPTIMAL by the integer bound.
#: Names missing from this map (model/solve errors, unbounded, not set...) are ERROR.
STATUS_MAP: dict[str, Status] = {
    "kOptimal": Status.OPTIMAL,
    "kInfeasible": Status.INFEASIBLE,
    "kTimeLimit": Status.LIMIT,
    "kIterationLimit": Status.LIMIT,
    "kSolutionLimit": Status.LIMIT,
    "kInterrupt": Status.LIMIT,
    "kHighsInterrupt": Status.LIMIT,
    "kMemoryLimit": Status.LIMIT,
}

#: Why a LIMIT status stopped (HiGHS model status name -> reason); a LIMIT missing here is a time limit.
REASON_MAP: dict[str, Reason] = {
    "kTimeLimit": Reason.TIME_LIMIT,
    "kIterationLimit": Reason.WORK_LIMIT,
    "kSolutionLimit": Reason.WORK_LIMIT,
    "kInterrupt": Reason.INTERRUPTED,
    "kHighsInterrupt": Reason.INTERRUPTED,
    "kMemoryLimit": Reason.MEMORY_LIMIT,
}




@dataclass
class _Model:
    highs: Any  # highspy.Highs with the model passed
    rows: np.ndarray  # column i = option cols[i] of job rows[i]
    cols: np.ndarray
    form: Formulation
    log: IncumbentLog | None = None  # improving solutions, timed by HiGHS' callback
    deadline: float = math.inf  # time.perf_counter() past which the interrupt callbacks stop HiGHS
    stopped_by_clock: bool = False  # whether they did


_counts = node_counts_of


@register
class HighsMILP(Backend):
    """HiGHS branch-and-cut on the 0/1 MILP of the option table."""

    name = "milp"
    exact = True
    requires = ("highspy",)
    extra = "milp"
    description = "HiGHS MILP via highspy (CSC arrays, mip_rel_gap=0)"
    #: HiGHS overruns its limit inside root heuristics' sub-MIPs (below): a time limit runs it in a forked process
    capabilities = Capabilities(gpu_types=True, placement="exact", time_limit=True, incumbent=True, warm_start=True,
                                fallback_rank=0, time_limit_overruns=True)
    default_options: Mapping[str, Any] = {
        "threads": 1,
        "seed": 0,
        "mip_abs_gap": 0.5,
        "hint": None,
        "log": False,
        "presolve": "auto",
    }
    option_rules = {
        "mip_abs_gap": (
            "a number in [0, 1) (a gap under one unit proves the integer optimum)",
            lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1,
        ),
        "threads": threads_rule(1),
        "seed": SEED_RULE,
        "presolve": ("one of 'auto', 'choose', 'on', 'off'", lambda v: v in ("auto", "choose", "on", "off")),
        "hint": HINT_RULE,
    }

    def build(self, table: OptionTable, options: Mapping[str, Any]) -> _Model:
        import highspy

        f = formulate(table)
        m = f.n_cols
        start, index, value = f.csc()
        lp = highspy.HighsLp()
        lp.num_col_ = m
        lp.num_row_ = f.n_rows
        lp.sense_ = highspy.ObjSense.kMaximize
        lp.col_cost_ = f.cost
        lp.col_lower_ = np.zeros(m)
        lp.col_upper_ = f.col_upper
        lp.row_lower_ = f.row_lower
        lp.row_upper_ = f.row_upper
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.num_col_ = m
        lp.a_matrix_.num_row_ = f.n_rows
        lp.a_matrix_.start_ = start
        lp.a_matrix_.index_ = index
        lp.a_matrix_.value_ = value
        lp.integrality_ = [highspy.HighsVarType.kInteger] * m
        a = {"rows": f.rows, "cols": f.cols}
        h = new_highs()
        h.setOptionValue("output_flag", bool(options["log"]))
        h.setOptionValue("mip_rel_gap", 0.0)
        h.setOptionValue("mip_abs_gap", float(options["mip_abs_gap"]))
        h.setOptionValue("threads", int(options["threads"]))
        h.setOptionValue("random_seed", int(options["seed"]))
        h.setOptionValue("presolve", presolve_setting(str(options["presolve"]), bool(f.node_cols)))
        st = h.passModel(lp)
        if st == highspy.HighsStatus.kError:
            raise RuntimeError("HiGHS rejected the model (passModel returned kError)")
        hint = options.get("hint")
        if hint is not None and m:
            hc = hint_choice(table, hint, self.name)
            if (hc >= -1).all():  # a hint for every job: HiGHS checks it as a start solution
                x = (hc[a["rows"]] == a["cols"]).astype(np.float64)
                if not f.node_cols:
                    sol = highspy.HighsSolution()
                    sol.col_value = x.tolist()  # every column is an option column
                    sol.value_valid = True
                    h.setSolution(sol)
                else:  # the option columns only: HiGHS completes the node variables (a sub-MIP) or drops the start
                    h.setSolution(int(x.size), np.arange(x.size, dtype=np.int32), x)
        log = IncumbentLog()
        # every improving solution, timed (docs/design.md §3); the callback runs only when one is found
        h.cbMipImprovingSolution.subscribe(lambda e: log.add(e.data_out.objective_function_value))
        model = _Model(h, a["rows"], a["cols"], f, log)
        # HiGHS reads its time_limit only at some points of its search: on mck-weakly n=10^4, G=10^6 (the
        # reference suite) a 60 s limit stopped at 838 s. Its interrupt callbacks (MIP, simplex, IPM) are called
        # at more points: past the deadline they stop the run. Not inside the sub-MIPs of its root heuristics,
        # whose callbacks are not ours: there it can still overrun (docs/design.md §3, the backend table).
        def stop_at_deadline(e: Any) -> None:
            if time.perf_counter() > model.deadline:
                e.data_in.user_interrupt = True
                model.stopped_by_clock = True

        for cb in (h.cbMipInterrupt, h.cbSimplexInterrupt, h.cbIpmInterrupt):
            cb.subscribe(stop_at_deadline)
        return model

    def run(self, model: _Model, time_limit_s: float | None, options: Mapping[str, Any]) -> Any:
        h = model.highs
        if model.rows.size == 0:
            return None
        h.setOptionValue("time_limit", float(time_limit_s) if time_limit_s is not None else math.inf)
        model.deadline = math.inf if time_limit_s is None else time.perf_counter() + float(time_limit_s)
        if model.log is not None:
            model.log.start()
        h.run()
        return h

    def extract(self, table: OptionTable, model: _Model, raw: Any) -> Outcome:
        import highspy

        if raw is None:
            return empty_outcome(table)
        h = raw
        ms = h.getModelStatus()
        info = h.getInfo()
        stats = {
            "model_status": h.modelStatusToString(ms),
            "mip_nodes": int(info.mip_node_count),
            "columns": int(model.rows.size),
        }
        if model.log is not None:
            stats.update(model.log.stats())
        status = STATUS_MAP.get(ms.name, Status.ERROR)
        reason = REASON_MAP.get(ms.name, Reason.TIME_LIMIT) if status is Status.LIMIT else None
        if model.stopped_by_clock and status is Status.LIMIT:
            reason = Reason.TIME_LIMIT  # interrupted by the deadline callback: the time limit
            stats["stopped_by_clock"] = True
        if status is Status.INFEASIBLE:
            return Outcome(Status.INFEASIBLE, stats=stats)
        if status is Status.ERROR:
            return Outcome(Status.ERROR, message=f"HiGHS model status {h.modelStatusToString(ms)}", stats=stats)
        has_primal = int(info.primal_solution_status) == int(highspy.SolutionStatus.kSolutionStatusFeasible)
        dual = float(info.mip_dual_bound) if model.rows.size else 0.0
        if not has_primal:
            if status is Status.OPTIMAL:
                return Outcome(Status.ERROR, message="HiGHS said Optimal without a feasible primal solution", stats=stats)
            return Outcome(Status.LIMIT, bound=integer_bound(dual, None), message="HiGHS stopped before finding a solution",
                           stats=stats, reason=reason)
        allv = np.asarray(h.getSolution().col_value, dtype=np.float64)
        xv = allv[: model.rows.size]
        xr = np.rint(xv)
        frac = float(np.abs(xv - xr).max()) if xv.size else 0.0
        if frac > INTEGRALITY_TOL or ((xr != 0) & (xr != 1)).any():
            return Outcome(Status.ERROR, message=f"HiGHS solution is not 0/1 (off by {frac:.3g})", stats=stats)
        on = np.flatnonzero(xr == 1)
        if np.unique(model.rows[on]).size != on.size:
            return Outcome(Status.ERROR, message="HiGHS solution gives a job two options", stats=stats)
        choice = np.full(table.n_jobs, -1, dtype=np.int64)
        choice[model.rows[on]] = model.cols[on]
        counts = _counts(table, model.form, allv)
        obj, _ = table.objective_of(choice)
        bound = integer_bound(dual, obj)
        if status is Status.OPTIMAL:
            if bound > obj:  # the rounded solution is a full unit below the dual bound: not proven
                return Outcome(
                    Status.LIMIT,
                    choice=choice,
                    bound=bound,
                    message=f"HiGHS said Optimal but the dual bound {dual!r} is >= 1 above the objective {obj}",
                    stats=stats,
                    node_counts=counts,
                    reason=Reason.NOT_PROVEN,
                )
            return Outcome(Status.OPTIMAL, choice=choice, bound=obj, stats=stats, node_counts=counts)
        if bound == obj:  # stopped by the limit, but the integer bound already proves the optimum
            return Outcome(Status.OPTIMAL, choice=choice, bound=obj, message="proven when the limit hit", stats=stats,
                           node_counts=counts)
        return Outcome(
            Status.LIMIT,
            choice=choice,
            bound=bound,
            message=f"HiGHS stopped ({h.modelStatusToString(ms)}): best allocation found and bound",
            stats=stats,
            node_counts=counts,
            reason=reason,
        )
