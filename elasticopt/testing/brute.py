"""Brute-force optimum of tiny problems, independent of the option table and the DP."""

from __future__ import annotations

import itertools

from elasticopt.models.problem import Problem
from elasticopt.models.table import compile_problem, job_values

__all__ = ["brute_force"]


def brute_force(problem: Problem, max_combinations: int = 200_000) -> int | None:
    """The optimal integer objective by enumerating every allocation; None if infeasible.

    Utilities are computed job by job from the problem (not from the compiled
    table); only the scale S and the tie-break multiplier B are taken from
    :func:`~elasticopt.models.compile_problem` so the integers are comparable.

    Raises
    ------
    ValueError
        If the problem has more than ``max_combinations`` allocations.
    """
    table = compile_problem(problem)
    S, B = table.scale, table.tie_scale
    prio = problem.priority or ()
    bonus = {jid: len(prio) - r for r, jid in enumerate(prio)}
    G = problem.cluster.gpus
    choices: list[list[tuple[int, int]]] = []  # per job: (gpus, utility); gpus 0 = idle
    total = 1
    for job in problem.jobs:
        opts = job.options(gpus_cap=G)
        vals = job_values(problem, job, opts)
        c = [(k, round(v * S) * B + bonus.get(job.id, 0)) for (k, _, _), v in zip(opts, vals)]
        if problem.idle_allowed(job):
            c.append((0, 0))
        choices.append(c)
        total *= max(len(c), 1)
    if total > max_combinations:
        raise ValueError(f"{total} allocations: too many to enumerate")
    best: int | None = None
    for combo in itertools.product(*choices):
        if sum(k for k, _ in combo) <= G:
            u = sum(u for _, u in combo)
            if best is None or u > best:
                best = u
    return best
