"""``solve``: problem -> compile -> (reduce) -> backend -> Solution."""

from __future__ import annotations

import os
import time
from typing import Any

from elasticopt.errors import ValidationError

from elasticopt.models.problem import Problem
from elasticopt.models.reductions import compile_reduced, reduce_table
from elasticopt.models.table import OptionTable, compile_problem
from elasticopt.solvers.registry import get_backend
from elasticopt.solvers.solution import Solution

__all__ = ["solve"]


def solve(
    problem: Problem | OptionTable,
    solver: str = "dp",
    *,
    time_limit_s: float | None = None,
    reduce: bool = True,
    isolate: bool | None = None,
    **options: Any,
) -> Solution:
    """Solve an allocation problem with a registered backend.

    Parameters
    ----------
    problem
        A :class:`~elasticopt.models.Problem`, or an already compiled
        :class:`~elasticopt.models.OptionTable`.
    solver
        Backend name (see :func:`elasticopt.available_solvers`).
    time_limit_s
        Wall-clock limit for the backend run; on hitting it the result is
        ``Status.LIMIT`` with the best allocation found and the bound.
    reduce
        Apply the exact reductions of docs/design.md §2 first.
    isolate
        Run the backend in a forked process killed at ``time_limit_s`` plus a
        grace, so the limit is hard (:mod:`elasticopt.solvers.isolation`); a
        killed run is ``LIMIT`` without an allocation.  None (default): for
        the backends whose libraries can overrun their limit (``milp``,
        ``scip``, ``pyomo``) when ``time_limit_s`` is set.
    **options
        Backend options (e.g. ``num_workers`` for ``cpsat``); unknown ones raise.

    Returns
    -------
    Solution
        ``stats["compile_s"]`` holds the compile + reduction seconds.

    Raises
    ------
    ValidationError
        For a ``problem`` that is neither (a file's path: load it with ``load_instance`` first) or a bad
        ``time_limit_s``.
    """
    if not isinstance(problem, (Problem, OptionTable)):
        raise ValidationError("problem", "a Problem or a compiled OptionTable", problem,
                              "read an instance file with elasticopt.models.load_instance(path) first"
                              if isinstance(problem, (str, os.PathLike)) else None)
    backend = get_backend(solver)
    t0 = time.perf_counter()
    if isinstance(problem, OptionTable):
        table = reduce_table(problem) if reduce else problem
    else:  # compile and reduce in one pass (the same table as reduce_table(compile_problem(problem)))
        table = compile_reduced(problem) if reduce else compile_problem(problem)
    compile_s = time.perf_counter() - t0
    return backend.solve(table, time_limit_s=time_limit_s, extra_stats={"compile_s": compile_s}, isolate=isolate,
                         **options)
