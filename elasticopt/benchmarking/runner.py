"""Run solvers over instances: warm-up, repeats, verification, cross-check.

For each instance the runner loads (or generates) the problem, compiles it
once (``compile_problem`` then ``reduce_table``, timed separately) and hands
the **same** table to every solver: first one warm-up solve per solver (its
time is ``warmup_s``: jax compiles here), then ``repeats`` timed solves,
round-robin over the solvers so slow drifts of a shared machine hit every
solver alike.  A warm-up that stops at the time limit is not repeated: it
becomes the solver's one timed run on that instance (LIMIT, unsolved), as
another would only spend the limit again.  A solver that raises is an ``ERROR`` row; one that stops at
the time limit is a ``LIMIT`` row; nothing is dropped.

Every result is checked with :func:`~elasticopt.solvers.verify` and against
the instance's best known objective (see :mod:`elasticopt.benchmarking.crosscheck`).
"""

from __future__ import annotations

import dataclasses
import os
import platform
import gc
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from typing import Any

from elasticopt.benchmarking.crosscheck import BenchRun, cross_check
from elasticopt.benchmarking.difficulty import lp_relaxation
from elasticopt.benchmarking.instances import InstanceSpec
from elasticopt.benchmarking.rows import BenchResult, BenchRow, InstanceRecord
from elasticopt.benchmarking.solvers import SolverSpec, resolve_solvers
from elasticopt.errors import ValidationError
from elasticopt.models import Problem, compile_problem, reduce_table
from elasticopt.models.table import OptionTable
from elasticopt.solvers import Solution, Status, verify
from elasticopt.solvers.base import checked_time_limit

__all__ = ["BenchEvent", "run_benchmark", "count_solves", "environment", "REFERENCE_OPS_PER_S"]

#: Int64 max-plus operations per second of a C kernel on one core (docs/design.md §3).
REFERENCE_OPS_PER_S = 1.5e9

#: Backends that run the DP recurrence (their rows get achieved operations/s).
DP_SOLVERS = ("dp", "numpy-dp")


@dataclass(frozen=True)
class BenchEvent:
    """Progress report: ``phase`` is "instance" (loaded), "start" or "done" (a solve).

    ``repeat`` is 0 for the warm-up solve, 1..R for timed ones; ``seconds`` the solve's total time ("done").
    """

    phase: str
    instance: str
    solver: str = ""
    repeat: int = 0
    status: str = ""
    seconds: float | None = None


def count_solves(n_instances: int, n_solvers: int, repeats: int, warmup: bool = True) -> int:
    """How many solve calls a benchmark makes (for a progress bar)."""
    return n_instances * n_solvers * (repeats + (1 if warmup else 0))


def _versions() -> dict[str, str]:
    out = {}
    for dist in ("elasticopt", "numpy", "scipy", "jax", "jaxlib", "ortools", "highspy", "pyomo", "pyscipopt"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


def _commit() -> str | None:
    """The git commit of the elasticopt checkout that runs (``+dirty`` with uncommitted changes); None outside one."""
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=5)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def environment() -> dict[str, Any]:
    """Where the benchmark ran: Python, platform, CPUs, load, package versions, the checkout's commit."""
    try:
        load = list(os.getloadavg())
    except OSError:  # pragma: no cover - not on every platform
        load = None
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "cpu_count": os.cpu_count(),
        "load_average": load,
        "packages": _versions(),
        "reference_ops_per_s": REFERENCE_OPS_PER_S,
        "commit": _commit(),
    }


def _error(spec: SolverSpec, table: OptionTable, message: str, seconds: float) -> Solution:
    return Solution(Status.ERROR, spec.label, message=message, solve_s=seconds, scale=table.scale,
                    tie_scale=table.tie_scale)


def _solve_once(spec: SolverSpec, table: OptionTable, time_limit_s: float | None) -> tuple[Solution, float]:
    """One solve call: (solution, wall seconds). Exceptions become ERROR solutions.

    As ``timeit`` does, the garbage collector is paused during the timed call, so one
    solver's garbage is not collected on another solver's clock.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    t0 = time.perf_counter()
    try:
        sol = spec.solver.solve(table, time_limit_s=time_limit_s, **spec.options)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # a failing solver is a result, never a crash of the benchmark
        return _error(spec, table, f"{type(exc).__name__}: {exc}", time.perf_counter() - t0), time.perf_counter() - t0
    finally:
        if was_enabled:
            gc.enable()
    wall = time.perf_counter() - t0
    if not isinstance(sol, Solution):
        return _error(spec, table, f"solve() returned {type(sol).__name__}, not a Solution", wall), wall
    # a solve run in a forked process (a hard time limit, solvers/isolation.py): its call as timed inside the
    # child, as a benchmark runner's process start is not on a solver's clock
    return sol, float(sol.stats.get("isolated_call_s", wall))


class _Verifier:
    """verify() with a cache: repeats usually return the same allocation."""

    def __init__(self, problem: Problem):
        self.problem = problem
        self.cache: dict[Any, tuple[bool, str]] = {}

    def __call__(self, sol: Solution) -> tuple[bool, str]:
        try:
            key = (sol.status, sol.objective, sol.objective_value, sol.bound, sol.scale, sol.tie_scale,
                   tuple(sorted(sol.allocation.items(), key=lambda kv: kv[0])))
            hash(key)
        except TypeError:
            key = None
        if key is not None and key in self.cache:
            return self.cache[key]
        try:
            rep = verify(self.problem, sol)
            res = (rep.ok, "; ".join(rep.errors))
        except Exception as exc:  # a malformed solution of a user's solver
            res = (False, f"verify raised {type(exc).__name__}: {exc}")
        if key is not None:
            self.cache[key] = res
        return res


def _table(problem: Problem, reduce: bool) -> tuple[OptionTable, float, float]:
    t0 = time.perf_counter()
    table = compile_problem(problem)
    t1 = time.perf_counter()
    if reduce:
        table = reduce_table(table)
    return table, t1 - t0, time.perf_counter() - t1


def _bench_instance(
    spec: InstanceSpec,
    specs: list[SolverSpec],
    repeats: int,
    warmup: bool,
    time_limit_s: float | None,
    reduce: bool,
    notify: Callable[[BenchEvent], None],
    order: str = "interleaved",
    lp: bool = True,
) -> tuple[InstanceRecord, list[BenchRow], bool]:
    """Every solver on one instance: (record, rows, interrupted by Ctrl-C)."""
    t0 = time.perf_counter()
    problem = spec.load()
    load_s = time.perf_counter() - t0
    table, compile_s, reduce_s = _table(problem, reduce)
    notify(BenchEvent("instance", spec.name))
    check = _Verifier(problem)
    outcomes: list[BenchRun] = []
    warm: dict[str, float] = {}
    interrupted = False
    try:
        runs = ([0] if warmup else []) + list(range(1, repeats + 1))
        if order == "grouped":
            plan = [(r, s) for s in specs for r in runs]
        else:
            plan = [(r, s) for r in runs for s in specs]
        at_limit: set[str] = set()  # solvers whose warm-up stopped at the time limit: not run again
        for r, s in plan:
            if s.label in at_limit:
                continue
            notify(BenchEvent("start", spec.name, s.label, r))
            sol, wall = _solve_once(s, table, time_limit_s)
            ok, errs = check(sol)
            notify(BenchEvent("done", spec.name, s.label, r, sol.status.name, wall))
            if r == 0:
                warm[s.label] = wall
                if sol.status is Status.LIMIT and repeats > 0:
                    # a warm-up that reached the limit is the timed run: repeating it would only cost the limit again
                    at_limit.add(s.label)
                    r = 1
            outcomes.append(BenchRun(s.label, r, sol, wall, ok, errs))
    except KeyboardInterrupt:  # keep what was measured: the caller reports a partial benchmark
        interrupted = True
    verdict = cross_check(outcomes)
    relax = lp_relaxation(table, time_limit_s) if lp and not interrupted else None  # after the timed solves: not on their clock
    rec = InstanceRecord.make(spec, problem, table, load_s, compile_s, reduce_s, verdict, relax)
    dp_ops = table.n_options * (table.capacity + 1)
    by_label = {s.label: s for s in specs}
    rows = [
        BenchRow.make(rec, by_label[o.label], o, verdict, warm.get(o.label), time_limit_s, dp_ops,
                      by_label[o.label].name in DP_SOLVERS or "operations" in o.solution.stats, REFERENCE_OPS_PER_S)
        for o in outcomes
        if o.repeat > 0
    ]
    return rec, rows, interrupted


def run_benchmark(
    solvers: Iterable[Any] | str | None,
    instances: Sequence[InstanceSpec] | Iterable[InstanceSpec],
    *,
    repeats: int = 3,
    warmup: bool = True,
    time_limit_s: float | None = None,
    reduce: bool = True,
    progress: Callable[[BenchEvent], None] | None = None,
    order: str = "interleaved",
    lp_relaxation: bool = True,
) -> BenchResult:
    """Benchmark ``solvers`` on ``instances``.

    Parameters
    ----------
    solvers
        Registered names, solver objects (``name`` + ``solve(table, *,
        time_limit_s=None)``), ``(name or object, options)`` pairs; None or
        ``"all"`` for every installed backend (see :func:`resolve_solvers`).
    instances
        :class:`InstanceSpec` s, e.g. from :func:`family_instances` or
        :func:`file_instances`.
    repeats
        Timed solves per solver and instance (>= 1).
    warmup
        First run one untimed solve per solver and instance; its seconds are
        reported as ``warmup_s`` (jax compile time shows here).
    time_limit_s
        Passed to every solve call; None for no limit.
    reduce
        Apply the exact reductions after compiling (docs/design.md §2).
    progress
        Called with a :class:`BenchEvent` before and after every solve.
    order
        ``"interleaved"`` (default): repeat r of every solver before repeat
        r + 1, so drifts of a shared machine hit all solvers alike, and each
        solve starts with caches the other solvers left cold.
        ``"grouped"``: all repeats of one solver back to back (warm caches,
        as in a scheduler that only runs its own solver).
    lp_relaxation
        Solve each instance's LP relaxation with HiGHS after its timed solves
        (``InstanceRecord.lp_bound``/``lp_gap``: why an instance is hard;
        :mod:`elasticopt.benchmarking.difficulty`).

    A Ctrl-C (KeyboardInterrupt) stops the benchmark after cross-checking
    what was measured: the partial result has ``settings["interrupted"]``
    True.  A backend whose library can overrun ``time_limit_s`` (``milp``,
    ``scip``, ``pyomo``) runs in a forked process killed at the limit plus a
    grace (:mod:`elasticopt.solvers.isolation`), timed inside that process;
    another solver that ignores the limit cannot be stopped from here: it is
    reported with its real time and ``within_limit`` False.

    Returns
    -------
    BenchResult
        One row per (instance, solver, repeat), the per-instance records
        (best known objective, disagreements) and the environment.

    Raises
    ------
    ValidationError
        For bad arguments or instances; solver failures are rows, not raises.
    """
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValidationError("repeats", "an integer >= 1", repeats)
    if order not in ("interleaved", "grouped"):
        raise ValidationError("order", "'interleaved' or 'grouped'", order)
    time_limit_s = checked_time_limit(time_limit_s)
    specs = resolve_solvers(solvers)
    inst = list(instances)
    if not inst:
        raise ValidationError("instances", "at least one instance", "none")
    names = [i.name for i in inst]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValidationError("instances", "distinct instance names", ", ".join(dup))
    notify = progress or (lambda ev: None)
    started = datetime.now(timezone.utc).isoformat(timespec="seconds")
    env = environment()
    t_start = time.perf_counter()
    rows: list[BenchRow] = []
    records: list[InstanceRecord] = []
    interrupted = False
    for spec in inst:
        rec, new_rows, interrupted = _bench_instance(spec, specs, repeats, warmup, time_limit_s, reduce, notify,
                                                     order, lp_relaxation)
        records.append(rec)
        rows.extend(new_rows)
        if interrupted:
            break
    settings = {
        "solvers": [{"label": s.label, "name": s.name, "options": dict(s.options),
                     "type": f"{type(s.solver).__module__}.{type(s.solver).__qualname__}",
                     "capabilities": (dataclasses.asdict(s.solver.capabilities)
                                      if dataclasses.is_dataclass(getattr(s.solver, "capabilities", None)) else None)}
                    for s in specs],
        "repeats": repeats,
        "warmup": warmup,
        "time_limit_s": time_limit_s,
        "reduce": reduce,
        "order": order,
        "lp_relaxation": lp_relaxation,
        "started_utc": started,
        "elapsed_s": time.perf_counter() - t_start,
        "interrupted": interrupted,
    }
    return BenchResult(tuple(rows), tuple(records), settings, env)
