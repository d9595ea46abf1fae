"""The shape every backend shares: build, run, extract (Pyomo contrib.solver style).

A backend subclasses :class:`Backend`, declares its name, whether it is exact,
the modules it needs (checked without importing them), the pip extra that
installs them and what it can do (:class:`Capabilities`, read by the service
and ``elasticopt bench``), and implements three steps:

- ``build(table, options)``: the backend's model of the option table;
- ``run(model, time_limit_s, options)``: solve it, returning raw results;
- ``extract(table, model, raw)``: an :class:`Outcome` (status, option index
  per job, bound).

:meth:`Backend.solve` times the steps, turns the outcome into a
:class:`Solution` and never lets a backend exception escape as anything but
``Status.ERROR`` with the message.  Every solution carries a
:class:`~elasticopt.solvers.solution.Reason` next to its status.  The time
limit covers build, run and placement: the placement search gets what is
left of it (and stops with ``Reason.TIME_LIMIT``).
"""

from __future__ import annotations

import importlib.util
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from elasticopt.errors import ModelTooLargeError, SolverUnavailableError, ValidationError
from elasticopt.models.table_placement import place_table
from elasticopt.models.table import OptionTable
from elasticopt.solvers.options import OptionRule, check_options
from elasticopt.solvers.placed_dp import best_placed_exact
from elasticopt.solvers.solution import Reason, Solution, Status

#: A time limit longer than this is no limit: it is never reached, and the libraries' clocks overflow on one of
#: 1e300 s (HiGHS, SCIP and Pyomo take whole seconds; a forked run's join overflows a C timestamp).
NO_LIMIT_ABOVE_S = 1e9


#: How a command-line ``--time-limit-s`` words the rule (``solve``, ``serve``: leaving the flag out is no limit).
CLI_TIME_LIMIT = {"expected": "a number of seconds > 0", "hint": "leave --time-limit-s out (or give inf) for no limit"}


def checked_time_limit(time_limit_s: object, path: str = "time_limit_s", *,
                       expected: str = "a number of seconds > 0, or None for no limit",
                       hint: str = "leave it out (or give inf) for no limit") -> float | None:
    """A time limit as the backends take it: seconds > 0, or None for none.

    ``None``, ``inf`` and limits over :data:`NO_LIMIT_ABOVE_S` (about 32 years) are no limit; anything that is
    not a number > 0 (a string, a bool, 0, a negative number, NaN) raises :class:`ValidationError` at ``path``,
    with ``expected`` and ``hint`` (a command-line caller words them for its flag).
    The one rule for every caller: :meth:`Backend.solve`, the benchmark runner, the service, the CLI.
    """
    if time_limit_s is None:
        return None
    if isinstance(time_limit_s, bool) or not isinstance(time_limit_s, (int, float, np.integer, np.floating)) \
            or not time_limit_s > 0:
        raise ValidationError(path, expected, time_limit_s, hint)
    return None if time_limit_s > NO_LIMIT_ABOVE_S else float(time_limit_s)

__all__ = ["Backend", "Outcome", "Capabilities"]

#: The least time a run is given when its build used up the limit (it then stops at once, with its
#: backend's time-limit status).
MIN_RUN_S = 1e-3

#: Required modules already found installed in this process.
_FOUND: set[str] = set()


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do, as data (the service and ``elasticopt bench`` read it).

    Attributes
    ----------
    gpu_types
        Solves tables with several GPU types.
    placement
        ``"exact"``: node variables, exact on the whole model (docs/design.md
        §2); ``"checked"``: exact over per-type totals, the result placed
        afterwards (``LIMIT`` with ``Reason.NOT_PLACEABLE`` where it does not
        place); ``"heuristic"``: every step checked by placing it, never exact.
    time_limit
        Its run stops at ``time_limit_s`` (placement always does; a backend
        without it is bounded otherwise, e.g. the DP's ``max_cells``).
    incumbent
        Stopped by a limit, it returns the best allocation found so far.
    warm_start
        Takes a ``hint`` option (a :class:`Solution` or an allocation) to start from.
    fallback_rank
        Order in which the service tries exact-placement backends for a
        re-solve (lower first); None: never used for it.
    time_limit_overruns
        Its library can run past ``time_limit_s`` (HiGHS, SCIP: docs/design.md
        §3); with a time limit, :meth:`Backend.solve` runs it in a forked
        process killed at the deadline (:mod:`elasticopt.solvers.isolation`).
    """

    gpu_types: bool = True
    placement: str = "checked"
    time_limit: bool = False
    incumbent: bool = False
    warm_start: bool = False
    fallback_rank: int | None = None
    time_limit_overruns: bool = False


@dataclass(frozen=True)
class Outcome:
    """What a backend extracted from its run.

    ``choice[j]`` is the option index of job row j (-1 = idle); None when the
    backend found no allocation.  ``bound`` is a proven upper bound on the
    integer objective, if the backend has one.
    """

    status: Status
    choice: np.ndarray | None = None
    bound: int | None = None
    message: str = ""
    stats: Mapping[str, Any] = field(default_factory=dict)
    #: optional ``{job row: {node index: GPUs}}`` of packed jobs, from a backend's node variables
    node_counts: Mapping[int, Mapping[int, int]] | None = None
    #: why the run ended; None: SOLVED, or for LIMIT the time limit (if one was set) else a work limit
    reason: Reason | None = None


def _check_choice(table: OptionTable, choice: np.ndarray) -> str:
    """Why ``choice`` is not a feasible allocation of ``table``'s totals; "" if it is (placement aside)."""
    from elasticopt.models.kernels import check_choice

    if choice.shape != (table.n_jobs,):
        return f"expected {table.n_jobs} choices, got shape {choice.shape}"
    code, where, used = check_choice(choice, table.valid, table.gpus, table.gpu_type, table.idle_allowed,
                                     np.asarray(table.capacities, dtype=np.int64))
    if code == 1:
        return f"job {table.job_ids[where]!r} left idle but it may not be"
    if code == 2:
        return f"job {table.job_ids[where]!r} given option {int(choice[where])}, which does not exist"
    if code == 3:
        t = int(where)
        if table.n_types == 1:
            return f"uses {int(used[t])} GPUs, capacity is {table.capacity}"
        return f"uses {int(used[t])} GPUs of type {table.types[t]!r}, which has {int(table.capacities[t])}"
    return ""


def _results(table: OptionTable, choice: np.ndarray) -> tuple[int, float, dict, dict, dict]:
    """Integer and float objective, allocation, GPU types and packing of a feasible ``choice``, gathered once."""
    rows = np.flatnonzero(choice >= 0)
    cols = choice[rows]
    obj = int(table.utility[rows, cols].sum()) if rows.size else 0
    val = float(table.value[rows, cols].sum()) if rows.size else 0.0
    ids = table.job_ids
    run = [ids[r] for r in rows.tolist()]
    allocation: dict[str, tuple[int, int] | None] = dict.fromkeys(ids)
    allocation.update(zip(run, zip(table.gpus[rows, cols].tolist(), table.batch[rows, cols].tolist())))
    types = table.types
    gtypes = dict(zip(run, [types[t] for t in table.gpu_type[rows, cols].tolist()]))
    return obj, val, allocation, gtypes, dict(zip(run, table.packed[rows, cols].tolist()))


class Backend(ABC):
    """Base class of solver backends; see the module docstring."""

    #: Registry name, e.g. ``"dp"``.
    name: ClassVar[str]
    #: Whether the backend proves optima (takes part in cross-checks).
    exact: ClassVar[bool] = True
    #: Modules the backend imports inside its solve call.
    requires: ClassVar[tuple[str, ...]] = ()
    #: The pip extra that installs ``requires``.
    extra: ClassVar[str | None] = None
    #: Options the backend accepts, with their defaults (a default's type is the value's rule).
    default_options: ClassVar[Mapping[str, Any]] = {}
    #: Rules for options a type does not describe: name -> (expected, in words; check).
    option_rules: ClassVar[Mapping[str, OptionRule]] = {}
    #: One line for ``--help`` and listings.
    description: ClassVar[str] = ""
    #: What the backend can do (read by the service and ``elasticopt bench``).
    capabilities: ClassVar[Capabilities] = Capabilities()

    @classmethod
    def missing_modules(cls) -> list[str]:
        """Required modules that are not installed (checked without importing)."""
        # find_spec reads the file system: a module imported (sys.modules[m] None marks one blocked)
        # or found once is not looked up again
        missing = []
        for m in cls.requires:
            if m in sys.modules:
                if sys.modules[m] is None:
                    missing.append(m)
                continue
            if m in _FOUND:
                continue
            if importlib.util.find_spec(m) is None:
                missing.append(m)
            else:
                _FOUND.add(m)
        return missing

    @classmethod
    def available(cls) -> bool:
        """Whether every required module is installed."""
        return not cls.missing_modules()

    @abstractmethod
    def build(self, table: OptionTable, options: Mapping[str, Any]) -> Any:
        """Build the backend's model of ``table``."""

    @abstractmethod
    def run(self, model: Any, time_limit_s: float | None, options: Mapping[str, Any]) -> Any:
        """Solve the model; return the backend's raw results."""

    @abstractmethod
    def extract(self, table: OptionTable, model: Any, raw: Any) -> Outcome:
        """Turn raw results into an :class:`Outcome`."""

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> dict[str, Any]:
        """The default options updated with ``options``, names and values checked.

        Raises
        ------
        SolverOptionError
            For an option the backend does not know or a value it does not accept.
        """
        return check_options(cls.name, cls.default_options, options, cls.option_rules)

    def solve(self, table: OptionTable, *, time_limit_s: float | None = None,
              extra_stats: Mapping[str, Any] | None = None, isolate: bool | None = None,
              **options: Any) -> Solution:
        """Solve ``table``; see :func:`elasticopt.solve` for the public entry point.

        ``extra_stats`` are added to the solution's ``stats`` (``solve`` adds
        its compile time).  ``isolate``: run the solve in a forked process
        killed at ``time_limit_s`` plus a grace (a hard limit,
        :mod:`elasticopt.solvers.isolation`); None (default): where the backend
        declares ``time_limit_overruns``, a time limit is set and the platform
        can fork.

        Raises
        ------
        SolverUnavailableError
            If the backend's library is not installed.
        SolverOptionError
            For an unknown option or a bad option value.
        ValidationError
            For a time limit that is not a number of seconds > 0 (:func:`checked_time_limit`; ``inf`` or over
            :data:`NO_LIMIT_ABOVE_S` is no limit).
        """
        time_limit_s = checked_time_limit(time_limit_s)
        opts = self.check_options(options)
        if isolate is None:
            isolate = time_limit_s is not None and self.capabilities.time_limit_overruns
        if isolate and time_limit_s is not None:
            from elasticopt.solvers.isolation import fork_available, solve_isolated

            if fork_available():
                return solve_isolated(
                    lambda: self.solve(table, time_limit_s=time_limit_s, extra_stats=extra_stats, isolate=False,
                                       **opts),
                    solver=self.name, time_limit_s=time_limit_s, extra_stats=extra_stats, scale=table.scale,
                    tie_scale=table.tie_scale)
            extra_stats = {**(extra_stats or {}),
                           "isolation": "none (no safe fork here: Windows, macOS or a daemonic worker): a soft limit"}
        common = {"scale": table.scale, "tie_scale": table.tie_scale, "solver": self.name}
        t0 = time.perf_counter()
        deadline = None if time_limit_s is None else t0 + time_limit_s
        try:
            model = self.build(table, opts)
            t1 = time.perf_counter()
            # the run gets what the build left of the limit (the limit covers build, run and placement)
            raw = self.run(model, None if deadline is None else max(deadline - t1, MIN_RUN_S), opts)
            t2 = time.perf_counter()
            out = self.extract(table, model, raw)
        except ModelTooLargeError as exc:  # a size limit, as a solver's own memory limit: LIMIT, no allocation
            return Solution(Status.LIMIT, message=f"{self.name}: {exc}", solve_s=time.perf_counter() - t0,
                            stats=dict(extra_stats or {}), reason=Reason.STATE_SPACE, **common)
        except Exception as exc:  # a backend failure is a result, not a crash
            # availability is checked by get_backend; here only when an import inside the solve fails
            if isinstance(exc, ImportError) and self.missing_modules():
                raise SolverUnavailableError(self.name, self.missing_modules(), self.extra) from None
            t = time.perf_counter() - t0
            return Solution(Status.ERROR, message=f"{type(exc).__name__}: {exc}", solve_s=t,
                            stats=dict(extra_stats or {}), **common)
        build_s, solve_s = t1 - t0, t2 - t1
        stats = dict(table.stats)
        stats.update(out.stats)
        if extra_stats:
            stats.update(extra_stats)
        if out.status is Status.INFEASIBLE:
            culprits = table.infeasible_jobs()
            if not culprits:
                return Solution(
                    Status.ERROR,
                    message="backend reported INFEASIBLE but the minimum GPU needs fit the capacity",
                    build_s=build_s,
                    solve_s=solve_s,
                    stats=stats,
                    **common,
                )
            need = int(table.min_gpus()[~table.idle_allowed].sum())
            msg = (
                f"infeasible: jobs that must run need at least {need} GPUs together, "
                f"capacity is {table.capacity}: {', '.join(culprits)}"
            )
            return Solution(
                Status.INFEASIBLE,
                bound=None,
                message=msg,
                infeasible_jobs=culprits,
                build_s=build_s,
                solve_s=solve_s,
                stats=stats,
                **common,
            )
        reason = out.reason
        if reason is None:
            reason = Reason.SOLVED
            if out.status is Status.LIMIT:
                reason = Reason.TIME_LIMIT if time_limit_s is not None else Reason.WORK_LIMIT
        common["reason"] = reason
        if out.choice is None:
            return Solution(
                out.status, bound=out.bound, message=out.message, build_s=build_s, solve_s=solve_s, stats=stats, **common
            )
        if out.status is Status.OPTIMAL and not self.exact:
            # a backend that is not exact never proves an optimum, whatever it says (docs/design.md §3)
            out = replace(out, status=Status.FEASIBLE, bound=None,
                          message=f"{self.name} is not an exact backend: its result is FEASIBLE, not OPTIMAL "
                          "(solve with an exact backend to prove the optimum)")
        choice = np.asarray(out.choice, dtype=np.int64)
        problem = _check_choice(table, choice)
        if problem:
            common["reason"] = Reason.ERROR
            return Solution(
                Status.ERROR,
                message=f"backend returned an invalid allocation: {problem}",
                build_s=build_s,
                solve_s=solve_s,
                stats=stats,
                **common,
            )
        t3 = time.perf_counter()
        where = place_table(table, choice, counts=out.node_counts, deadline=deadline)
        placed, nodes = where.status, where.nodes
        stats["placement_s"] = time.perf_counter() - t3
        stats["placement_steps"] = where.steps
        if placed != "placed":
            # only the DP (which sees per-type totals) can get here: its optimum of the totals does not place
            if placed == "impossible":
                why, common["reason"] = "cannot be placed on the nodes", Reason.NOT_PLACEABLE
            elif where.stop == "time":
                why, common["reason"] = (f"was not placed within the time limit ({time_limit_s} s)",
                                         Reason.TIME_LIMIT)
            else:
                why, common["reason"] = "was not placed within the search budget", Reason.PLACEMENT_STEPS
            common["unplaced"] = _results(table, choice)[2]
            message = (f"{self.name}: the best allocation over per-type GPU totals {why}; "
                       "solve with 'cpsat' or 'milp' (exact with node variables)")
            status, bound = Status.LIMIT, out.bound
            found = None
            if out.status is Status.OPTIMAL and common["reason"] is not Reason.TIME_LIMIT:
                t4 = time.perf_counter()  # the best allocation that places: branch and bound under the totals' optimum
                found = best_placed_exact(table, deadline=deadline)
                stats["placed_search_s"] = time.perf_counter() - t4
                stats["placed_search_steps"] = found.steps
            if found is None or found.choice is None:
                return Solution(status, bound=bound, message=message, build_s=build_s, solve_s=solve_s, stats=stats,
                                **common)
            again = place_table(table, found.choice, counts=found.counts, deadline=deadline)
            if again.status != "placed":  # the search placed its packed jobs one type at a time: cannot happen
                return Solution(status, bound=bound, message=message, build_s=build_s, solve_s=solve_s, stats=stats,
                                **common)
            choice, nodes = found.choice, again.nodes
            if found.proven:
                status, bound, common["reason"] = Status.OPTIMAL, found.value, Reason.SOLVED
                how = "the DP over node counts" if found.counts is not None else "branch and bound under it"
                message = (f"{self.name}: the optimum over per-type GPU totals {why}; the best allocation that "
                           f"places, proven by {how}")
            else:
                if found.stop == "time":
                    common["reason"] = Reason.TIME_LIMIT
                message = (f"{self.name}: the best allocation over per-type GPU totals {why}; best placed "
                           f"allocation found (search stopped: {found.stop}) and the totals' bound; "
                           "solve with 'cpsat' or 'milp' (exact with node variables)")
        else:
            status, bound, message = out.status, out.bound, out.message
        obj, val, allocation, gtypes, packed = _results(table, choice)
        return Solution(
            status,
            objective=obj,
            objective_value=val,
            bound=bound,
            allocation=allocation,
            build_s=build_s,
            solve_s=solve_s,
            message=message,
            stats=stats,
            gpu_types=gtypes,
            packed=packed,
            placement={table.job_ids[r]: d for r, d in nodes.items()},
            **common,
        )
