"""Brute-force optimum of tiny problems, independent of the option table and the DP."""

from __future__ import annotations

import itertools
import math

from elasticopt.models.placement import place
from elasticopt.models.problem import Problem
from elasticopt.models.table import compile_problem, job_values

__all__ = ["brute_force"]


def _placeable(problem: Problem, combo) -> bool:
    """Per type: the GPUs fit and the packed jobs can be placed (exhaustive search, no budget cut)."""
    for t, pool in problem.cluster.pools.items():
        packed = [k for tt, k, p, _ in combo if tt == t and p]
        loose = [k for tt, k, p, _ in combo if tt == t and not p]
        if not packed and sum(loose) <= pool.gpus:
            continue
        res = place(pool, packed, loose, max_steps=10**9)
        if res.status != "placed":
            return False
    return True


def brute_force(problem: Problem, max_combinations: int = 200_000) -> int | None:
    """The optimal integer objective by enumerating every allocation; None if infeasible.

    Utilities are computed job by job from the problem (not from the compiled
    table); only the scale S and the tie-break multiplier B are taken from
    :func:`~elasticopt.models.compile_problem` so the integers are comparable.
    Every allocation is checked against the per-type capacities and placed on
    the nodes by exhaustive search.

    Raises
    ------
    ValueError
        If the problem has more than ``max_combinations`` allocations.
    """
    table = compile_problem(problem)
    S, B = table.scale, table.tie_scale
    prio = problem.priority or ()
    bonus = {jid: len(prio) - r for r, jid in enumerate(prio)}
    choices: list[list[tuple]] = []  # per job: (type, gpus, packed, utility); type None = idle
    total = 1
    for job in problem.jobs:
        opts = job.typed_options(problem.cluster, problem.node_aware)
        vals = job_values(problem, job, opts)
        c = [(o.gpu_type, o.gpus, o.packed, round(v * S) * B + bonus.get(job.id, 0))
             for o, v in zip(opts, vals) if not math.isnan(v)]
        if problem.idle_allowed(job):
            c.append((None, 0, False, 0))
        choices.append(c)
        total *= max(len(c), 1)
    if total > max_combinations:
        raise ValueError(f"{total} allocations: too many to enumerate")
    best: int | None = None
    for combo in itertools.product(*choices):
        u = sum(x[3] for x in combo)
        if best is not None and u <= best:
            continue
        if _placeable(problem, combo):
            best = u
    return best
