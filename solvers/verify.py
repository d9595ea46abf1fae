"""Independent check of a solution against its problem.

:func:`verify` does not use the option table or any backend: it recomputes each
assigned job's feasibility from the :class:`~elasticopt.models.Job` rules, the
capacity, and the integer objective from the job values one job at a time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from elasticopt.models.problem import Problem
from elasticopt.models.table import job_values
from elasticopt.solvers.solution import Solution, Status

__all__ = ["VerifyReport", "verify", "min_gpu_need"]


@dataclass(frozen=True)
class VerifyReport:
    """Outcome of :func:`verify`: ``ok`` iff ``errors`` is empty."""

    ok: bool
    errors: tuple[str, ...] = ()
    objective: int | None = None
    objective_value: float | None = None
    gpus_used: int = 0
    notes: tuple[str, ...] = field(default=())

    def __bool__(self) -> bool:
        return self.ok


def min_gpu_need(problem: Problem) -> tuple[int, list[str]]:
    """GPUs the jobs that may not idle need at least, and those jobs.

    A job with no option fitting the cluster counts as needing G + 1.
    """
    G = problem.cluster.gpus
    need, must = 0, []
    for job in problem.jobs:
        if problem.idle_allowed(job):
            continue
        opts = job.options(gpus_cap=G)
        need += min(k for k, _, _ in opts) if opts else G + 1
        must.append(job.id)
    return need, must


def _tie(problem: Problem, solution: Solution) -> dict[str, int]:
    if not problem.priority:
        return {}
    p = len(problem.priority)
    return {jid: p - r for r, jid in enumerate(problem.priority)}


def verify(problem: Problem, solution: Solution) -> VerifyReport:
    """Recompute feasibility and objective of ``solution`` for ``problem``.

    Parameters
    ----------
    problem
        The problem that was solved.
    solution
        Any backend's solution.

    Returns
    -------
    VerifyReport
        ``ok`` False with the reasons when the allocation is infeasible, the
        objective does not match, a claimed INFEASIBLE is wrong, or a bound is
        below the objective.
    """
    errors: list[str] = []
    G = problem.cluster.gpus
    if solution.status is Status.INFEASIBLE:
        need, must = min_gpu_need(problem)
        if need <= G:
            errors.append(f"claimed INFEASIBLE, but the jobs that must run need {need} <= {G} GPUs")
        return VerifyReport(ok=not errors, errors=tuple(errors))
    if not solution.status.has_allocation or solution.objective is None:
        return VerifyReport(ok=True, notes=(f"status {solution.status.value}: nothing to check",))
    ids = set(problem.job_ids)
    extra = set(solution.allocation) - ids
    if extra:
        errors.append(f"allocation names unknown jobs: {sorted(extra)}")
    bonus = _tie(problem, solution)
    S, B = solution.scale, solution.tie_scale
    used, total_u, total_v = 0, 0, 0.0
    for job in problem.jobs:
        if job.id not in solution.allocation:
            errors.append(f"job {job.id!r} missing from the allocation")
            continue
        a = solution.allocation[job.id]
        if a is None:
            if not problem.idle_allowed(job):
                errors.append(f"running job {job.id!r} left idle but preemption is not allowed")
            continue
        k, b = a
        if not job.is_feasible(k, b) or k > G:
            errors.append(f"job {job.id!r}: ({k} GPUs, batch {b}) is not a feasible option")
            continue
        used += k
        opts = job.options(gpus_cap=G)
        vals = job_values(problem, job, opts)
        v = next(val for (kk, bb, _), val in zip(opts, vals) if (kk, bb) == (k, b))
        total_v += v
        total_u += round(v * S) * B + bonus.get(job.id, 0)
    if used > G:
        errors.append(f"allocation uses {used} GPUs, the cluster has {G}")
    if not errors and total_u != solution.objective:
        errors.append(f"objective is {total_u} recomputed, solution says {solution.objective}")
    if not errors and solution.objective_value is not None:
        if not math.isclose(total_v, solution.objective_value, rel_tol=1e-9, abs_tol=1e-9):
            errors.append(f"float objective is {total_v!r} recomputed, solution says {solution.objective_value!r}")
    if solution.bound is not None and solution.bound < solution.objective:
        errors.append(f"bound {solution.bound} is below the objective {solution.objective}")
    return VerifyReport(
        ok=not errors, errors=tuple(errors), objective=total_u, objective_value=total_v, gpus_used=used
    )
