"""``pyomo``: the option-table MILP as a readable Pyomo model (docs/design.md §3).

The same 0/1 model as :mod:`elasticopt.solvers.milp`, written for people::

    JOBS                       the jobs
    TYPES                      the GPU types
    OPTIONS                    (job, type, gpus, batch, packed): the options of every job
    x[j, t, k, b, p] in {0, 1} 1 iff job j runs on k GPUs of type t at global batch b (p: packed)
    one_choice[j]:  sum x[j, ...] <= 1                     (= 1 when j may not idle)
    capacity[t]:    sum_{options of type t} k * x <= G_t
    maximise        sum utility * x                        (integer utilities)

Where placement matters (packed options on a type whose totals do not imply
it), per packed option i and node n of its type::

    y[i, n] in {0, 1}          option i uses node n
    z[i, n] in 0..min(k, free_n)  GPUs of option i on node n (options over several nodes)
    one node (k <= g):  sum_n y[i, n] = x[i];           node rows  sum k_i y[i, n] + ... <= free_n
    m = ceil(k / g) > 1: sum_n y[i, n] <= m x[i], sum_n z[i, n] = k x[i], z <= min(k, free_n) y

Solved by HiGHS (``appsi_highs``) by default, or by any solver Pyomo knows
(``solver_name="glpk"``, ``"cbc"``, ``"gurobi"``...); gaps are set to prove the
integer optimum for the solvers whose option names are known.
:func:`write_model` writes LP / MPS files for outside solvers.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from elasticopt._io import atomic_path
from elasticopt.errors import SolverError
from elasticopt.models.table import OptionTable
from elasticopt.solvers.base import Backend, Capabilities, Outcome
from elasticopt.solvers.common import empty_outcome, integer_bound, new_highs, node_counts_of, presolve_setting
from elasticopt.solvers.registry import register
from elasticopt.solvers.solution import Reason, Solution, Status

__all__ = ["PyomoMILP", "build_pyomo_model", "write_model", "installed_pyomo_solvers", "KNOWN_SOLVERS", "STATUS_MAP"]

#: Pyomo termination condition (``TerminationCondition`` member name) -> (our status, why it stopped),
#: before the solution is read: LIMIT may still be proven OPTIMAL by the integer bound.  Names
#: missing from this map are ERROR.
STATUS_MAP: dict[str, tuple[Status, Reason]] = {
    "optimal": (Status.OPTIMAL, Reason.SOLVED),
    "infeasible": (Status.INFEASIBLE, Reason.SOLVED),
    "infeasibleOrUnbounded": (Status.INFEASIBLE, Reason.SOLVED),
    "maxTimeLimit": (Status.LIMIT, Reason.TIME_LIMIT),
    "maxIterations": (Status.LIMIT, Reason.WORK_LIMIT),
    "maxEvaluations": (Status.LIMIT, Reason.WORK_LIMIT),
    "userInterrupt": (Status.LIMIT, Reason.INTERRUPTED),
    "resourceInterrupt": (Status.LIMIT, Reason.MEMORY_LIMIT),
}

DEFAULT_SOLVER = "appsi_highs"

#: Per solver: (time-limit option name or None for the ``timelimit`` argument, options proving the optimum).
KNOWN_SOLVERS: dict[str, tuple[str | None, dict[str, Any]]] = {
    "appsi_highs": (None, {"mip_rel_gap": 0.0, "mip_abs_gap": 0.5}),
    "highs": (None, {"mip_rel_gap": 0.0, "mip_abs_gap": 0.5}),
    "glpk": ("tmlim", {"mipgap": 0.0}),
    "cbc": ("sec", {"ratioGap": 0.0, "allowableGap": 0.5}),
    "appsi_cbc": (None, {"ratioGap": 0.0, "allowableGap": 0.5}),
    "gurobi": ("TimeLimit", {"MIPGap": 0.0, "MIPGapAbs": 0.5}),
    "gurobi_direct": ("TimeLimit", {"MIPGap": 0.0, "MIPGapAbs": 0.5}),
    "appsi_gurobi": (None, {"MIPGap": 0.0, "MIPGapAbs": 0.5}),
    "cplex": ("timelimit", {"mip_tolerances_mipgap": 0.0, "mip_tolerances_absmipgap": 0.5}),
    "cplex_direct": ("timelimit", {"mip_tolerances_mipgap": 0.0, "mip_tolerances_absmipgap": 0.5}),
    "scip": ("limits/time", {"limits/gap": 0.0, "limits/absgap": 0.5}),
    "xpress": ("maxtime", {"miprelstop": 0.0, "mipabsstop": 0.5}),
}


def _quiet_factory(name: str) -> Any:
    """``pyomo.environ.SolverFactory(name)`` without Pyomo's logged tracebacks."""
    import pyomo.environ as pe

    log = logging.getLogger("pyomo")
    old = log.level
    log.setLevel(logging.CRITICAL)
    try:
        return pe.SolverFactory(name)
    except Exception:
        return None
    finally:
        log.setLevel(old)


def _is_available(name: str) -> bool:
    opt = _quiet_factory(name)
    if opt is None:
        return False
    log = logging.getLogger("pyomo")
    old = log.level
    log.setLevel(logging.CRITICAL)
    try:
        return bool(opt.available(exception_flag=False))
    except Exception:
        return False
    finally:
        log.setLevel(old)


def installed_pyomo_solvers() -> list[str]:
    """The solvers of :data:`KNOWN_SOLVERS` that Pyomo can run here."""
    return [n for n in KNOWN_SOLVERS if _is_available(n)]


def check_solver(name: str) -> None:
    """Raise :class:`SolverError` naming ``name`` and what is installed, unless Pyomo can run it."""
    if not _is_available(name):
        raise SolverError(
            f"Pyomo solver {name!r} is not available here; installed MILP solvers Pyomo can use: "
            f"{', '.join(installed_pyomo_solvers()) or 'none'} (HiGHS: pip install 'elasticopt[pyomo]')"
        )


@dataclass
class _Model:
    pyomo: Any  # the ConcreteModel
    keys: list  # keys[i] = (job id, k, b) of option variable i
    rows: np.ndarray  # option variable i is option cols[i] of job row rows[i]
    cols: np.ndarray
    infeasible: bool  # a job that may not idle has no option: no solve needed
    form: Any = None  # the Formulation whose node columns the y / z variables mirror


def build_pyomo_model(table: OptionTable) -> _Model:
    """The readable Pyomo MILP of ``table`` (see the module docstring)."""
    import pyomo.environ as pe

    from elasticopt.solvers.formulation import formulate

    rows, cols = np.nonzero(table.valid)
    ids = table.job_ids
    keys = [
        (ids[j], table.types[int(table.gpu_type[j, o])], int(table.gpus[j, o]), int(table.batch[j, o]), bool(table.packed[j, o]))
        for j, o in zip(rows.tolist(), cols.tolist())
    ]
    gpus = dict(zip(keys, table.gpus[rows, cols].tolist()))
    util = dict(zip(keys, table.utility[rows, cols].tolist()))
    by_job: dict[str, list] = {jid: [] for jid in ids}
    by_type: dict[str, list] = {t: [] for t in table.types}
    for key in keys:
        by_job[key[0]].append(key)
        by_type[key[1]].append(key)
    must = {jid: not bool(table.idle_allowed[j]) for j, jid in enumerate(ids)}
    caps = dict(zip(table.types, np.asarray(table.capacities).tolist()))

    m = pe.ConcreteModel(name="elasticopt_allocation")
    m.JOBS = pe.Set(initialize=list(ids), ordered=True, doc="jobs")
    m.TYPES = pe.Set(initialize=list(table.types), ordered=True, doc="GPU types")
    m.OPTIONS = pe.Set(dimen=5, initialize=keys, ordered=True, doc="(job, type, gpus, batch, packed): the options of every job")
    # x[j, t, k, b, p] = 1 iff job j runs option (t, k, b, p) (no option chosen = idle)
    m.x = pe.Var(m.OPTIONS, domain=pe.Binary, doc="1 iff job j runs option (t, k, b, p)")

    def one_choice(mm, jid):
        opts = by_job[jid]
        if not opts:
            return pe.Constraint.Skip
        expr = pe.quicksum(mm.x[key] for key in opts)
        return expr == 1 if must[jid] else expr <= 1

    m.one_choice = pe.Constraint(m.JOBS, rule=one_choice, doc="at most one option per job (exactly one if it may not idle)")

    def capacity(mm, t):
        if not by_type[t]:
            return pe.Constraint.Skip
        return pe.quicksum(gpus[k] * mm.x[k] for k in by_type[t]) <= int(caps[t])

    m.capacity = pe.Constraint(m.TYPES, rule=capacity, doc="GPUs per type")
    f = formulate(table)
    if f.node_cols:
        # NODE_USE: (option index i, type index, node index); y: option i on node n; z: its GPUs there (several nodes)
        use = [(i, t, nd) for i, t, nd, _, _ in f.node_cols]
        multi = [(i, t, nd) for i, t, nd, _, z in f.node_cols if z >= 0]
        m.NODE_USE = pe.Set(dimen=3, initialize=use, ordered=True, doc="(option, type, node) pairs of packed options")
        m.y = pe.Var(m.NODE_USE, domain=pe.Binary, doc="1 iff packed option i uses node n")
        m.MULTI = pe.Set(dimen=3, initialize=multi, ordered=True, doc="pairs of options spanning several nodes")
        free = {t: table.pools[t].free_per_node() for t in range(table.n_types)}
        m.z = pe.Var(m.MULTI, domain=pe.NonNegativeIntegers, doc="GPUs of option i on node n",
                     bounds=lambda mm, i, t, nd: (0, min(int(table.gpus[rows[i], cols[i]]), free[t][nd])))
        opt_nodes: dict[int, list] = {}
        for i, t, nd in use:
            opt_nodes.setdefault(i, []).append((i, t, nd))
        m.link = pe.ConstraintList(doc="node use follows the option")
        for i, prs in opt_nodes.items():
            k = int(table.gpus[rows[i], cols[i]])
            g = table.pools[prs[0][1]].gpus_per_node
            mi = -(-k // g)
            if mi == 1:
                m.link.add(pe.quicksum(m.y[pr] for pr in prs) == m.x[keys[i]])
            else:
                m.link.add(pe.quicksum(m.y[pr] for pr in prs) <= mi * m.x[keys[i]])
                m.link.add(pe.quicksum(m.z[pr] for pr in prs) == k * m.x[keys[i]])
                for pr in prs:
                    m.link.add(m.z[pr] <= min(k, free[pr[1]][pr[2]]) * m.y[pr])
        node_load: dict[tuple[int, int], list] = {}
        for i, t, nd, _, z in f.node_cols:
            node_load.setdefault((t, nd), []).append((i, t, nd, z >= 0))
        m.node_capacity = pe.ConstraintList(doc="packed GPUs per node <= its free GPUs")
        for (t, nd), items in node_load.items():
            expr = pe.quicksum(
                (m.z[(i, tt, n2)] if multi_ else int(table.gpus[rows[i], cols[i]]) * m.y[(i, tt, n2)])
                for i, tt, n2, multi_ in items
            )
            m.node_capacity.add(expr <= int(free[t][nd]))
    m.utility = pe.Objective(expr=pe.quicksum(util[k] * m.x[k] for k in keys), sense=pe.maximize, doc="integer utility")
    infeasible = any(must[jid] and not by_job[jid] for jid in ids)
    return _Model(m, keys, rows, cols, infeasible, f)


def write_model(table: OptionTable, path: str | os.PathLike[str], fmt: str) -> Path:
    """Write the Pyomo model of ``table`` as an LP or MPS file, atomically.

    Parameters
    ----------
    table
        The option table.
    path
        Destination file.
    fmt
        ``"lp"`` (CPLEX LP) or ``"mps"``.
    """
    from pyomo.opt import ProblemFormat

    formats = {"lp": ProblemFormat.cpxlp, "mps": ProblemFormat.mps}
    if fmt not in formats:
        raise SolverError(f"export format must be one of {', '.join(formats)}, got {fmt!r}")
    model = build_pyomo_model(table).pyomo
    with atomic_path(path, suffix="." + fmt) as tmp:
        model.write(str(tmp), format=formats[fmt], io_options={"symbolic_solver_labels": True})
    return Path(path)


@register
class PyomoMILP(Backend):
    """The MILP as a Pyomo model, HiGHS or any solver Pyomo finds."""

    name = "pyomo"
    exact = True
    requires = ("pyomo", "highspy")
    extra = "pyomo"
    description = "readable Pyomo MILP; HiGHS by default, any Pyomo solver by name"
    #: HiGHS by default (as milp, it can overrun its limit): a time limit runs it in a forked process
    capabilities = Capabilities(gpu_types=True, placement="exact", time_limit=True, incumbent=True, warm_start=False,
                                fallback_rank=2, time_limit_overruns=True)
    default_options: Mapping[str, Any] = {"solver_name": DEFAULT_SOLVER, "solver_options": None, "tee": False}
    option_rules = {
        "solver_options": ("a mapping of the Pyomo solver's option names to values, or None",
                           lambda v: v is None or isinstance(v, Mapping)),
    }

    def solve(self, table: OptionTable, *, time_limit_s: float | None = None,
              extra_stats: Mapping[str, Any] | None = None, isolate: bool | None = None, **options: Any) -> Solution:
        """As :meth:`Backend.solve`; raises :class:`SolverError` when the Pyomo solver is missing."""
        if self.available() and not set(options) - set(self.default_options):
            check_solver(str(options.get("solver_name", DEFAULT_SOLVER)))
        return super().solve(table, time_limit_s=time_limit_s, extra_stats=extra_stats, isolate=isolate, **options)

    def build(self, table: OptionTable, options: Mapping[str, Any]) -> _Model:
        return build_pyomo_model(table)

    def run(self, model: _Model, time_limit_s: float | None, options: Mapping[str, Any]) -> Any:
        if model.infeasible or not model.keys:
            return None
        name = str(options["solver_name"])
        opt = _quiet_factory(name)
        limit_key, proving = KNOWN_SOLVERS.get(name, (None, {}))
        solver_opts = dict(proving)
        if name in ("appsi_highs", "highs"):  # as milp's presolve="auto" (solvers/common.py presolve_setting)
            solver_opts["presolve"] = presolve_setting("auto", bool(model.form is not None and model.form.node_cols))
        solver_opts.update(options["solver_options"] or {})
        kwargs: dict[str, Any] = {"load_solutions": False, "tee": bool(options["tee"])}
        if time_limit_s is not None:
            if limit_key is None:
                kwargs["timelimit"] = float(time_limit_s)
            else:
                solver_opts[limit_key] = float(time_limit_s)
        if name.startswith("appsi_") or name == "highs":
            new_highs()  # keep HiGHS's one-time banner off stdout
        kwargs["options"] = solver_opts
        results = opt.solve(model.pyomo, **kwargs)
        return results

    def extract(self, table: OptionTable, model: _Model, raw: Any) -> Outcome:
        from pyomo.opt import SolutionStatus

        if raw is None:
            return Outcome(Status.INFEASIBLE) if model.infeasible else empty_outcome(table)
        results = raw
        tc = results.solver.termination_condition
        stats = {"termination": str(tc), "columns": len(model.keys)}
        status, reason = STATUS_MAP.get(getattr(tc, "name", str(tc)), (Status.ERROR, Reason.ERROR))
        if status is Status.INFEASIBLE:
            return Outcome(Status.INFEASIBLE, stats=stats)
        ub = results.problem.upper_bound
        dual = float(ub) if ub is not None and math.isfinite(float(ub)) else None
        has_solution = len(results.solution) > 0 and results.solution(0).status in (
            SolutionStatus.optimal,
            SolutionStatus.feasible,
            SolutionStatus.bestSoFar,
            SolutionStatus.locallyOptimal,
        )
        if status is Status.ERROR:
            return Outcome(Status.ERROR, message=f"Pyomo solver stopped with {tc}", stats=stats)
        if not has_solution:
            if status is Status.OPTIMAL:
                return Outcome(Status.ERROR, message="solver said optimal but returned no solution", stats=stats)
            return Outcome(Status.LIMIT, bound=integer_bound(dual, None) if dual is not None else None,
                           message=f"the solver stopped ({tc}) before any solution", stats=stats, reason=reason)
        model.pyomo.solutions.load_from(results)
        xv = np.array([model.pyomo.x[k].value or 0.0 for k in model.keys], dtype=np.float64)
        xr = np.rint(xv)
        if xv.size and (float(np.abs(xv - xr).max()) > 1e-6 or ((xr != 0) & (xr != 1)).any()):
            return Outcome(Status.ERROR, message="solver returned a non 0/1 solution", stats=stats)
        on = np.flatnonzero(xr == 1)
        choice = np.full(table.n_jobs, -1, dtype=np.int64)
        choice[model.rows[on]] = model.cols[on]
        counts = None
        f = model.form
        if f is not None and f.node_cols:
            allv = np.zeros(f.n_cols)
            allv[: xv.size] = xr
            for i, t, nd, y, z in f.node_cols:
                allv[y] = model.pyomo.y[(i, t, nd)].value or 0.0
                if z >= 0:
                    allv[z] = model.pyomo.z[(i, t, nd)].value or 0.0
            counts = node_counts_of(table, f, allv)
        obj, _ = table.objective_of(choice)
        bound = integer_bound(dual, obj) if dual is not None else None
        if status is Status.OPTIMAL:
            if bound is not None and bound > obj:
                return Outcome(Status.LIMIT, choice=choice, bound=bound, node_counts=counts, reason=Reason.NOT_PROVEN,
                               message=f"solver said optimal but its bound {dual!r} is >= 1 above {obj}", stats=stats)
            return Outcome(Status.OPTIMAL, choice=choice, bound=obj, stats=stats, node_counts=counts)
        if bound == obj:  # stopped by the limit, but the integer bound already proves the optimum
            return Outcome(Status.OPTIMAL, choice=choice, bound=obj, message="proven when the limit hit", stats=stats,
                           node_counts=counts)
        return Outcome(Status.LIMIT, choice=choice, bound=bound, node_counts=counts, reason=reason,
                       message=f"Pyomo solver stopped ({tc}): best allocation found and bound", stats=stats)
