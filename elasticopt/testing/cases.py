"""A bank of small, named, hand-checked allocation problems.

Each :class:`Case` holds a problem, its optimum worked out by hand (the
reasoning is in the comment above it), and why it is interesting.  Integer
optima are written as literals: with the default scale S = 2**20 and
integer-valued throughputs (objective ``throughput``), option utilities are
``T * 2**20`` exactly.  Every backend must reach these optima
(``tests/test_cases.py``); users can run their own solver on them::

    from elasticopt.testing.cases import CASES
    for case in CASES: ...
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from elasticopt.models.problem import Cluster, Job, Problem, Running
from elasticopt.profiles.throughput import MeasuredThroughput

__all__ = ["Case", "CASES", "case"]

S = 1 << 20  # the default scale: utilities are round(value * S)


@dataclass(frozen=True)
class Case:
    """A named problem with its known optimum.

    Attributes
    ----------
    name
        Short unique name.
    problem
        The problem.
    optimum
        Optimal integer objective; None when the problem is infeasible.
    value
        Optimal float objective (sum of option values); None when infeasible.
    why
        What the case exercises.
    infeasible_jobs
        For an infeasible case, the jobs that must run (any order).
    """

    name: str
    problem: Problem
    optimum: int | None
    value: float | None
    why: str
    infeasible_jobs: tuple[str, ...] = ()


def _job(
    jid: str,
    rows: Sequence[tuple[int, int, float]],
    *,
    running: tuple[int, int] | None = None,
    gpus_min: int = 1,
    weight: float = 1.0,
) -> Job:
    """A job whose only limits are its measured points ``(k, b, samples/s)``."""
    bmax = max(b for _, b, _ in rows)
    local = max(b // k for k, b, _ in rows)
    return Job(
        jid,
        MeasuredThroughput.from_rows(rows),
        batch_min=1,
        batch_max=bmax,
        max_local=local,
        gpus_min=gpus_min,
        running=None if running is None else Running(*running),
        remaining_samples=1e6,
        weight=weight,
    )


def _problem(gpus: int, jobs: Sequence[Job], **kw) -> Problem:
    kw.setdefault("objective", "throughput")
    return Problem(Cluster(gpus, 1), tuple(jobs), **kw)


CASES: list[Case] = []

# lp-fractional: G = 4. a = (3 GPUs, 30/s), b = c = (2 GPUs, 19/s).
# Fits: a alone (30), b + c (38); a + b needs 5. Optimum b + c = 38.
# LP relaxation: a has the best rate (10/GPU), so LP takes a and half of b: 39.5.
# Greedy (best gain per GPU first) takes a and stops at 30.
CASES.append(Case(
    "lp-fractional",
    _problem(4, [_job("a", [(3, 3, 30)]), _job("b", [(2, 2, 19)]), _job("c", [(2, 2, 19)])]),
    optimum=38 * S, value=38.0,
    why="LP relaxation is fractional (39.5); the best-rate job must be left out; greedy gets 30",
))

# ties: G = 3, five identical queued jobs worth 5/s on 1 GPU. Any 3 of them: 15.
CASES.append(Case(
    "ties",
    _problem(3, [_job(f"t{i}", [(1, 1, 5)]) for i in range(5)]),
    optimum=15 * S, value=15.0,
    why="10 optimal allocations: backends may return any, objectives must be equal",
))

# ties-priority: the same with priority t0 > t1 > ... > t4. Bonus of t_r is 5 - r,
# sum of bonuses 15, so B = 2**4 = 16: utilities 5 * S * 16 + bonus.
# Optimum picks t0, t1, t2: 3 * 5 * S * 16 + (5 + 4 + 3) = 15 * 2**24 + 12.
CASES.append(Case(
    "ties-priority",
    _problem(3, [_job(f"t{i}", [(1, 1, 5)]) for i in range(5)], priority=tuple(f"t{i}" for i in range(5))),
    optimum=15 * (1 << 24) + 12, value=15.0,
    why="a priority order breaks ties through integer bonuses below one utility unit",
))

# preemption: G = 2. r runs on 2 GPUs (10/s, at least 2 GPUs); q1, q2 queued (8/s on 1 GPU).
# With preemption: idle r, run q1 + q2 = 16 > 10.
_pre_jobs = [_job("r", [(2, 2, 10)], running=(2, 2), gpus_min=2), _job("q1", [(1, 1, 8)]), _job("q2", [(1, 1, 8)])]
CASES.append(Case(
    "preemption",
    _problem(2, _pre_jobs, allow_preemption=True),
    optimum=16 * S, value=16.0,
    why="the optimum sends a running job back to the queue",
))

# no-preemption: the same without preemption: r must keep 2 GPUs: 10, queue waits.
CASES.append(Case(
    "no-preemption",
    _problem(2, _pre_jobs, allow_preemption=False),
    optimum=10 * S, value=10.0,
    why="a running job may not idle, though idling it would pay",
))

# rescale-penalty: G = 2. r runs on (1, 1) at 10/s, could take (2, 2) at 15/s; q queued (1, 1) at 4/s.
# lambda = 6: r -> 2 GPUs is worth 15 - 6 = 9 < r stays (10) + q (4) = 14. Optimum 14.
_pen_jobs = [_job("r", [(1, 1, 10), (2, 2, 15)], running=(1, 1)), _job("q", [(1, 1, 4)])]
CASES.append(Case(
    "rescale-penalty",
    _problem(2, _pen_jobs, rescale_penalty=6.0),
    optimum=14 * S, value=14.0,
    why="the rescale penalty keeps a running job at its current option",
))

# rescale-free: the same with lambda = 0: r on 2 GPUs (15) beats r + q (14). Optimum 15.
CASES.append(Case(
    "rescale-free",
    _problem(2, _pen_jobs, rescale_penalty=0.0),
    optimum=15 * S, value=15.0,
    why="without the penalty the same job rescales and the queued job waits",
))

# infeasible: G = 3, running a and b each need at least 2 GPUs, no preemption: 4 > 3.
CASES.append(Case(
    "infeasible",
    _problem(3, [_job("a", [(2, 2, 10)], running=(2, 2), gpus_min=2),
                 _job("b", [(2, 2, 10), (3, 3, 12)], running=(2, 2), gpus_min=2),
                 _job("q", [(1, 1, 50)])]),
    optimum=None, value=None,
    why="running jobs' minimum GPUs exceed the cluster: INFEASIBLE naming a and b",
    infeasible_jobs=("a", "b"),
))

# zero-gpus: G = 0 with queued jobs only: everyone idles, optimum 0.
CASES.append(Case(
    "zero-gpus",
    _problem(0, [_job("a", [(1, 1, 3)]), _job("b", [(2, 2, 5)])]),
    optimum=0, value=0.0,
    why="an empty cluster: every job idle, objective 0",
))

# cannot-fit: G = 4. big needs 8 GPUs (never fits); a (1 GPU, 3/s), b (2 GPUs, 5/s), c (2 GPUs, 4/s).
# Best use of 4 GPUs: a + b = 8 (3 GPUs) vs b + c = 9 (4 GPUs) vs a + c = 7. Optimum b + c = 9.
CASES.append(Case(
    "cannot-fit",
    _problem(4, [_job("big", [(8, 8, 100)]), _job("a", [(1, 1, 3)]), _job("b", [(2, 2, 5)]), _job("c", [(2, 2, 4)])]),
    optimum=9 * S, value=9.0,
    why="a queued job with no option that fits stays idle; the rest is a tiny knapsack",
))

# speedup: G = 4, objective speedup (v = T / best per-GPU rate).
# a: (1, 32) 100, (2, 64) 180, (4, 128) 320 -> rate 100 -> v = 1, 1.8, 3.2
# b: (1, 32) 50,  (2, 64) 95,  (4, 128) 160 -> rate 50  -> v = 1, 1.9, 3.2
# a4 or b4: 3.2; a2 + b2: 3.7; a1 + b2: 2.9; a2 + b1: 2.8. Optimum a2 + b2 = 3.7.
# Integer: round(1.8 * 2**20) + round(1.9 * 2**20) = 1887437 + 1992294 = 3879731.
CASES.append(Case(
    "speedup",
    Problem(Cluster(4, 4), (
        Job("a", MeasuredThroughput.from_rows([(1, 32, 100), (2, 64, 180), (4, 128, 320)]), 32, 128, 32),
        Job("b", MeasuredThroughput.from_rows([(1, 32, 50), (2, 64, 95), (4, 128, 160)]), 32, 128, 32),
    )),
    optimum=1887437 + 1992294, value=3.7,
    why="the default objective: splitting the cluster beats giving it to the best-scaling job",
))

# pisinger-strong: a strongly correlated multiple-choice knapsack (Pisinger): 6 classes of 4 items,
# weights w in [1, 10] (the GPU count), profit p = w + 10 (samples/s), item i has batch w * (i + 1).
# Every solution is worth sum(w) + 10 * (classes used). With all 6 classes, sum(w) <= G = 26
# gives at most 86, and 2 + 6 + 3 + 6 + 2 + 7 = 26 reaches it (119 optimal allocations,
# counted by brute force over 5**6 combinations); 5 classes give at most 26 + 50 = 76. Optimum 86.
_PISINGER = [
    [2, 5, 7, 10], [6, 7, 8, 9], [3, 5, 7, 9], [1, 6, 7, 10], [2, 3, 4, 6], [1, 2, 7, 9],
]
CASES.append(Case(
    "pisinger-strong",
    _problem(26, [_job(f"c{c}", [(w, w * (i + 1), w + 10) for i, w in enumerate(ws)]) for c, ws in enumerate(_PISINGER)]),
    optimum=86 * S, value=86.0,
    why="strongly correlated MCKP: every item has nearly the same profit/weight ratio, LP bounds are weak",
))


def case(name: str) -> Case:
    """The case called ``name`` (KeyError listing the names if absent)."""
    for c in CASES:
        if c.name == name:
            return c
    raise KeyError(f"no case {name!r}; cases: {', '.join(c.name for c in CASES)}")
