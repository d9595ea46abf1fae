"""``scip``: the option table as a 0/1 MILP solved by SCIP (PySCIPOpt), docs/design.md §3.

The model is :func:`~elasticopt.solvers.formulation.formulate`'s, the same
as ``milp``'s (option columns, a row per job, a capacity row per GPU type,
node variables where placement matters), passed column by column and row by
row to a ``pyscipopt.Model`` (``ExprCons`` with both sides: ranged rows in
one constraint).  ``limits/gap = 0`` and ``limits/absgap`` below 1: the
objective is integer-valued, so a gap under one unit proves the integer
optimum.  The best solution is rounded to 0/1 and re-checked; the dual
bound is floored to an integer.  Every improving solution is timed by a
``BESTSOLFOUND`` event handler (:mod:`elasticopt.solvers.incumbents`).
Symmetry handling is off (option ``symmetry``): SCIP's symmetry detection
does not read its time limit, and on large placement models it ran for
minutes past it.

Install with ``pip install 'elasticopt[scip]'`` (PySCIPOpt wheels bundle SCIP).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from elasticopt.errors import SolverOptionError
from elasticopt.models.table import OptionTable
from elasticopt.solvers.base import Backend, Capabilities, Outcome
from elasticopt.solvers.common import HINT_RULE, empty_outcome, hint_choice, integer_bound, node_counts_of
from elasticopt.solvers.options import SEED_RULE
from elasticopt.solvers.formulation import Formulation, formulate
from elasticopt.solvers.incumbents import IncumbentLog
from elasticopt.solvers.registry import register
from elasticopt.solvers.solution import Status

__all__ = ["SCIP", "STATUS_MAP"]

#: A column value farther than this from an integer is not trusted as integral.
INTEGRALITY_TOL = 1e-6

#: SCIP status (``Model.getStatus()``) -> our status, before the solution is checked: LIMIT may
#: still be proven OPTIMAL by the integer bound.  Names missing from this map (unbounded,
#: inforunbd, unknown...) are ERROR.  ``gaplimit`` is reached when the absolute gap is under
#: ``abs_gap`` < 1, which proves the integer optimum; it is checked like every LIMIT.
STATUS_MAP: dict[str, Status] = {
    "optimal": Status.OPTIMAL,
    "infeasible": Status.INFEASIBLE,
    "timelimit": Status.LIMIT,
    "gaplimit": Status.LIMIT,
    "nodelimit": Status.LIMIT,
    "totalnodelimit": Status.LIMIT,
    "stallnodelimit": Status.LIMIT,
    "memlimit": Status.LIMIT,
    "sollimit": Status.LIMIT,
    "bestsollimit": Status.LIMIT,
    "restartlimit": Status.LIMIT,
    "primallimit": Status.LIMIT,
    "duallimit": Status.LIMIT,
    "userinterrupt": Status.LIMIT,
    "terminate": Status.LIMIT,
}


@dataclass
class _Model:
    scip: Any  # pyscipopt.Model with the problem added
    vars: list  # SCIP variable of formulation column c
    form: Formulation
    log: IncumbentLog
    deadline: float = math.inf  # time.perf_counter() past which the deadline handler interrupts SCIP
    stopped_by_clock: bool = False  # whether it did
    empty_row_violated: int | None = None  # a row with no column whose bounds exclude 0: infeasible, no solve


def _deadline_handler(model: _Model) -> Any:
    """A SCIP event handler that interrupts the solve past ``model.deadline`` (presolve rounds, LPs, nodes).

    SCIP reads ``limits/time`` only at some points: one reference-suite solve (hetero n=922, G=10^5, 392,178
    columns) stopped at 127 s under 60 s.
    """
    from pyscipopt import SCIP_EVENTTYPE, Eventhdlr

    events = SCIP_EVENTTYPE.PRESOLVEROUND | SCIP_EVENTTYPE.LPSOLVED | SCIP_EVENTTYPE.NODESOLVED

    class _Deadline(Eventhdlr):
        def eventinit(self) -> None:
            self.model.catchEvent(events, self)

        def eventexit(self) -> None:
            self.model.dropEvent(events, self)

        def eventexec(self, event: Any) -> None:
            if time.perf_counter() > model.deadline and not model.stopped_by_clock:
                model.stopped_by_clock = True
                self.model.interruptSolve()

    return _Deadline()


def _incumbent_handler(log: IncumbentLog) -> Any:
    """A SCIP event handler adding every new best solution to ``log``."""
    from pyscipopt import SCIP_EVENTTYPE, Eventhdlr

    class _Incumbents(Eventhdlr):
        def eventinit(self) -> None:
            self.model.catchEvent(SCIP_EVENTTYPE.BESTSOLFOUND, self)

        def eventexit(self) -> None:
            self.model.dropEvent(SCIP_EVENTTYPE.BESTSOLFOUND, self)

        def eventexec(self, event: Any) -> None:
            m = self.model
            log.add(m.getSolObjVal(m.getBestSol()))

    return _Incumbents()


def _params_rule(v: Any) -> bool:
    return v is None or (isinstance(v, Mapping) and all(isinstance(k, str) for k in v))


@register
class SCIP(Backend):
    """SCIP branch-and-cut on the 0/1 MILP of the option table."""

    name = "scip"
    exact = True
    requires = ("pyscipopt",)
    extra = "scip"
    description = "SCIP MILP via PySCIPOpt (limits/gap=0, absgap<1)"
    #: the shared formulation with node variables (exact placement), limits/time, the best solution at a limit,
    #: a complete hint as a start solution; not a fall-back of the service's re-solves (milp, cpsat are); it can
    #: overrun limits/time inside a heuristic's probing LP (below): a time limit runs it in a forked process
    capabilities = Capabilities(gpu_types=True, placement="exact", time_limit=True, incumbent=True, warm_start=True,
                                time_limit_overruns=True)
    default_options: Mapping[str, Any] = {
        "seed": 0,
        "abs_gap": 0.5,
        "hint": None,
        "log": False,
        "symmetry": False,
        "params": None,
    }
    option_rules = {
        "abs_gap": (
            "a number in [0, 1) (a gap under one unit proves the integer optimum)",
            lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1,
        ),
        "seed": SEED_RULE,
        "params": ("a mapping of SCIP parameter names (e.g. 'presolving/maxrounds') to values, or None",
                   _params_rule),
        "hint": HINT_RULE,
        "symmetry": ("true or false (SCIP's symmetry handling, misc/usesymmetry; off by default: its graph "
                     "computation does not read the time limit)", lambda v: isinstance(v, bool)),
    }

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        """As :meth:`Backend.check_options`; also every ``params`` name must be a SCIP parameter.

        Raises
        ------
        SolverOptionError
            For an unknown option, a bad value, or a ``params`` name SCIP does not have.
        """
        opts = super().check_options(options)
        if opts.get("params"):
            from pyscipopt import Model

            known = Model().getParams()
            bad = sorted(k for k in opts["params"] if k not in known)
            if bad:
                raise SolverOptionError(cls.name, "params", "SCIP parameter names such as 'limits/nodes' "
                                        "(all of them: pyscipopt.Model().getParams())", bad)
        return opts

    def build(self, table: OptionTable, options: Mapping[str, Any]) -> _Model:
        from pyscipopt import ExprCons, Model, quicksum

        f = formulate(table)
        m = Model("elasticopt")
        if not options["log"]:
            m.hideOutput()
        m.setParam("limits/gap", 0.0)
        m.setParam("limits/absgap", float(options["abs_gap"]))
        m.setParam("randomization/randomseedshift", int(options["seed"]))
        if not options["symmetry"]:
            # SCIP's symmetry detection computes graph automorphisms without reading limits/time: on hetero
            # n=922, G=10^5 (392,178 columns with the node variables) it ran > 150 s under a 10 s limit
            # (elasticopt bench --suite reference: 375 s); off, that solve stops at 10.06 s
            m.setParam("misc/usesymmetry", 0)
        for key, val in dict(options.get("params") or {}).items():
            m.setParam(key, val)
        binary = f.integer & (f.col_upper == 1.0)
        vtype = np.where(binary, "B", np.where(f.integer, "I", "C")).tolist()
        ub, cost = f.col_upper.tolist(), f.cost.tolist()
        xs = [m.addVar(name=f"c{c}", vtype=vtype[c], lb=0.0, ub=ub[c], obj=cost[c]) for c in range(f.n_cols)]
        order = np.lexsort((f.col_of, f.row_of))
        r_of, c_of, cf = f.row_of[order], f.col_of[order].tolist(), f.coef[order].tolist()
        bounds = np.searchsorted(r_of, np.arange(f.n_rows + 1)).tolist()
        lo_all, hi_all = f.row_lower.tolist(), f.row_upper.tolist()
        violated = None
        for r in range(f.n_rows):
            a, b = bounds[r], bounds[r + 1]
            lo, hi = lo_all[r], hi_all[r]
            if a == b:
                # a row without columns is 0: where its bounds exclude 0 (the "= 1" row of a job that may not
                # idle and has no option) the model is infeasible; SCIP is not given such a row, so say it here
                if violated is None and not lo <= 0.0 <= hi:
                    violated = r
                continue
            expr = quicksum(cf[e] * xs[c_of[e]] for e in range(a, b))
            m.addCons(ExprCons(expr, lhs=lo if np.isfinite(lo) else None, rhs=hi if np.isfinite(hi) else None),
                      name=f"r{r}")
        m.setMaximize()
        log = IncumbentLog()
        m.includeEventhdlr(_incumbent_handler(log), "elasticopt_incumbents", "times improving solutions")
        hint = options.get("hint")
        if hint is not None and f.rows.size:
            hc = hint_choice(table, hint, self.name)
            if (hc >= -1).all() and not f.node_cols:  # a complete hint only: SCIP checks it as a start solution
                sol = m.createSol()
                on = (hc[f.rows] == f.cols).tolist()
                for i, v in enumerate(on):
                    m.setSolVal(sol, xs[i], 1.0 if v else 0.0)
                m.addSol(sol, free=True)
        model = _Model(m, xs, f, log, empty_row_violated=violated)
        m.includeEventhdlr(_deadline_handler(model), "elasticopt_deadline", "interrupts the solve past the deadline")
        return model

    def run(self, model: _Model, time_limit_s: float | None, options: Mapping[str, Any]) -> Any:
        if model.form.rows.size == 0 or model.empty_row_violated is not None:
            return None
        m = model.scip
        if time_limit_s is not None:
            m.setParam("limits/time", float(time_limit_s))
            model.deadline = time.perf_counter() + float(time_limit_s)
        model.log.start()
        m.optimize()
        return m

    def extract(self, table: OptionTable, model: _Model, raw: Any) -> Outcome:
        if model.empty_row_violated is not None:
            return Outcome(Status.INFEASIBLE, stats={"empty_row": int(model.empty_row_violated)})
        if raw is None:
            return empty_outcome(table)
        m = raw
        f = model.form
        name = str(m.getStatus())
        stats: dict[str, Any] = {
            "scip_status": name,
            "mip_nodes": int(m.getNTotalNodes()),
            "columns": int(f.rows.size),
            "scip_solving_s": float(m.getSolvingTime()),
        }
        stats.update(model.log.stats())
        if model.stopped_by_clock:
            stats["stopped_by_clock"] = True
        status = STATUS_MAP.get(name, Status.ERROR)
        if status is Status.INFEASIBLE:
            return Outcome(Status.INFEASIBLE, stats=stats)
        if status is Status.ERROR:
            return Outcome(Status.ERROR, message=f"SCIP status {name}", stats=stats)
        dual = float(m.getDualbound())
        if m.getNSols() == 0:
            if status is Status.OPTIMAL:
                return Outcome(Status.ERROR, message="SCIP said optimal without a solution", stats=stats)
            return Outcome(Status.LIMIT, bound=integer_bound(dual, None), message="SCIP stopped before finding a solution",
                           stats=stats)
        best = m.getBestSol()
        allv = np.array([m.getSolVal(best, v) for v in model.vars], dtype=np.float64)
        m_opt = f.rows.size
        xv = allv[:m_opt]
        xr = np.rint(xv)
        frac = float(np.abs(allv - np.rint(allv))[f.integer].max()) if allv.size else 0.0
        if frac > INTEGRALITY_TOL or ((xr != 0) & (xr != 1)).any():
            return Outcome(Status.ERROR, message=f"SCIP solution is not integral (off by {frac:.3g})", stats=stats)
        on = np.flatnonzero(xr == 1)
        if np.unique(f.rows[on]).size != on.size:
            return Outcome(Status.ERROR, message="SCIP solution gives a job two options", stats=stats)
        choice = np.full(table.n_jobs, -1, dtype=np.int64)
        choice[f.rows[on]] = f.cols[on]
        counts = node_counts_of(table, f, np.rint(allv))
        obj, _ = table.objective_of(choice)
        bound = integer_bound(dual, obj)
        if status is Status.OPTIMAL or bound == obj:  # optimal, or a limit whose integer bound proves the optimum
            msg = "" if status is Status.OPTIMAL else f"proven when SCIP stopped ({name})"
            if bound > obj:
                return Outcome(Status.LIMIT, choice=choice, bound=bound, stats=stats, node_counts=counts,
                               message=f"SCIP said optimal but the dual bound {dual!r} is >= 1 above the objective {obj}")
            return Outcome(Status.OPTIMAL, choice=choice, bound=obj, message=msg, stats=stats, node_counts=counts)
        return Outcome(Status.LIMIT, choice=choice, bound=bound, stats=stats, node_counts=counts,
                       message=f"SCIP stopped ({name}): best allocation found and bound")
