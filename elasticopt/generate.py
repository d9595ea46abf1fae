"""Seeded instance generator: realistic workloads and solver stress tests.

Families
--------
``paper``
    A mix of the real networks (named profiles, docs/design.md §6): per job a window of
    its measured batch range, running and queued jobs, remaining samples.
``uniform``
    Synthetic jobs: random parametric profiles, written as measured points.
``ladder``
    Power-of-two GPU counts, node-granular (divisors or multiples of the node
    size); concave measured scaling at two per-GPU batches.
``mck-uncorrelated``, ``mck-weakly``, ``mck-strongly``, ``mck-subset-sum``
    Multiple-choice knapsack classes in Pisinger's style: per job ``options``
    items, weight w (the GPU count) uniform in [1, R], profit p (measured
    samples/s, objective ``throughput``): uncorrelated p ~ U[1, R]; weakly
    correlated p ~ U[w - R/10, w + R/10] (>= 1); strongly correlated
    p = w + R/10; subset sum p = w (Pisinger 1995).  R defaults to about
    2 G / n so the capacity binds; Pisinger's hard instances use R = 1000 or
    10000 with G about n R / 4 (``--family-option R=1000``).
    Item i of a class has batch b = w * (i + 1), so k always divides b.  Jobs
    run without preemption (placed on their lightest item while those fit in
    G, the rest queued), so exactly one item per class is chosen (the MCKP)
    when G >= the sum of the smallest weights (about n R / 11).

``hetero``, ``placement``
    Heterogeneous and fragmented clusters with node placement: see
    :mod:`elasticopt.generate_hetero`.

Every random draw comes from ``numpy.random.default_rng(seed)``: the same
arguments give the same problem, and :func:`~elasticopt.models.save_instance`
the same file byte for byte.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from elasticopt.errors import ValidationError
from elasticopt.generate_hetero import HETERO_FAMILIES
from elasticopt.generate_hetero import build as build_hetero
from elasticopt.models import Cluster, Job, MeasuredThroughput, Problem, Running
from elasticopt.profiles.throughput import power_of_two_grid
from elasticopt.profiles import IterationTimeParams, ParametricProfile, get_profile, profile_names
from elasticopt.profiles.grid import gpu_grid

__all__ = ["FAMILIES", "ALL_FAMILIES", "generate_instance", "PAPER_SETS"]

#: Profile sets the ``paper`` family draws from.
PAPER_SETS = ("a100", "t4")


def _sig(x: float, digits: int = 6) -> float:
    """x rounded to ``digits`` significant digits (compact, reproducible files)."""
    return float(f"{x:.{digits}g}")


def _log_uniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def _place_running(rng, job: Job, gpus: int, free: int, fraction: float) -> tuple[Job, int]:
    """Make ``job`` running on a random small option with probability ``fraction``."""
    if rng.random() >= fraction:
        return job, free
    opts = [(k, b) for k, b, _ in job.options(gpus_cap=gpus) if k <= max(1, free // 4) and k <= free]
    if not opts:
        return job, free
    k, b = opts[int(rng.integers(len(opts)))]
    return Job(job.id, job.throughput, job.batch_min, job.batch_max, job.max_local, job.gpus_min,
               job.gpus_max, Running(k, b), job.remaining_samples, job.weight), free - k


def _remaining(rng, model, k: int, b: int) -> float:
    """Samples worth 10 minutes to 20 hours at the job's option (k, b)."""
    sps = model.samples_per_s(k, b) or 1.0
    return float(round(sps * _log_uniform(rng, 600.0, 72000.0)))


def _paper(rng, jobs: int, gpus: int, gpus_per_node: int, *, running_fraction: float = 0.3,
           networks: list[str] | None = None, **_) -> tuple[list[Job], str]:
    # the A100 and T4 sets (not later sets such as Gavel's), so that seeds keep their problems
    names = list(networks) if networks else [n for n in profile_names() if n.split("/")[0] in PAPER_SETS]
    out, free = [], gpus
    for i in range(jobs):
        name = names[int(rng.integers(len(names)))]
        prof = get_profile(name)
        grid = power_of_two_grid(prof.batch_min, prof.batch_max)
        job = None
        for _attempt in range(20):  # redraw until the job has 1..12 options
            span = int(rng.integers(1, 3))  # batch range of 1-2 doublings
            lo = int(rng.integers(max(1, len(grid) - span)))
            bmin, bmax = grid[lo], grid[min(lo + span, len(grid) - 1)]
            kcap = 2 ** int(rng.integers(2, 7))  # the job's own GPU limit, 4..64
            cand = Job(f"j{i:04d}-{name.replace('/', '-')}", prof, bmin, bmax, prof.max_local, gpus_max=kcap)
            n_opts = len(cand.options(gpus_cap=gpus))
            if n_opts:
                job = cand
                if n_opts <= 12:
                    break
        if job is None:
            continue
        opts = job.options(gpus_cap=gpus)
        k0, b0, _ = opts[0]
        job = Job(job.id, prof, job.batch_min, job.batch_max, job.max_local, gpus_max=job.gpus_max,
                  remaining_samples=_remaining(rng, prof, k0, b0))
        job, free = _place_running(rng, job, gpus, free, running_fraction)
        out.append(job)
    return out, "speedup"


def _random_profile(rng, name: str, gpus_per_node: int, kmax: int) -> ParametricProfile:
    params = IterationTimeParams(
        compute_base_s=_sig(_log_uniform(rng, 1e-3, 5e-2)),
        compute_per_sample_s=_sig(_log_uniform(rng, 1e-5, 5e-3)),
        sync_base_s=_sig(_log_uniform(rng, 1e-3, 1e-1)),
        sync_per_gpu_s=_sig(_log_uniform(rng, 1e-5, 5e-3)),
        node_sync_base_s=0.0,  # set below: a step up when crossing nodes
        node_sync_per_gpu_s=0.0,
        gamma=_sig(rng.uniform(1.0, 4.0)),
    )
    step = rng.uniform(1.0, 3.0)
    params = IterationTimeParams(params.compute_base_s, params.compute_per_sample_s, params.sync_base_s,
                                 params.sync_per_gpu_s, _sig(params.sync_base_s * step),
                                 _sig(params.sync_per_gpu_s * step), params.gamma)
    bmin = 2 ** int(rng.integers(4, 8))
    k_top = max(gpu_grid(kmax, gpus_per_node))  # largest candidate GPU count: it must fit b_min
    max_local = max(2 ** int(rng.integers(5, 9)), -(-bmin // k_top))
    return ParametricProfile(name, params, gpus_per_node, bmin, bmin * 2 ** int(rng.integers(1, 4)),
                             max_local, gpus_max=kmax)


def _measured(model, points) -> MeasuredThroughput:
    return MeasuredThroughput({(k, b): _sig(model.samples_per_s(k, b)) for k, b in points})


def _uniform(rng, jobs: int, gpus: int, gpus_per_node: int, *, running_fraction: float = 0.3,
             **_) -> tuple[list[Job], str]:
    out, free = [], gpus
    for i in range(jobs):
        kmax = min(gpus, 2 ** int(rng.integers(1, 6)))
        prof = _random_profile(rng, f"synthetic-{i}", gpus_per_node, kmax)
        points = prof.candidates(kmax, prof.batch_min, prof.batch_max)
        tp = _measured(prof, points)
        k0, b0 = points[0]
        job = Job(f"u{i:04d}", tp, prof.batch_min, prof.batch_max, prof.max_local,
                  remaining_samples=_remaining(rng, tp, k0, b0))
        job, free = _place_running(rng, job, gpus, free, running_fraction)
        out.append(job)
    return out, "speedup"


def _ladder(rng, jobs: int, gpus: int, gpus_per_node: int, *, running_fraction: float = 0.3,
            **_) -> tuple[list[Job], str]:
    out, free = [], gpus
    ladder = [k for k in power_of_two_grid(1, max(1, gpus)) if k & (k - 1) == 0
              and (gpus_per_node % k == 0 or k % gpus_per_node == 0)]
    for i in range(jobs):
        kmax = ladder[min(len(ladder) - 1, int(rng.integers(len(ladder))))]
        local = 2 ** int(rng.integers(3, 7))
        base = _log_uniform(rng, 50.0, 2000.0)  # samples/s on one GPU at `local`
        alpha = rng.uniform(0.55, 0.95)  # scaling exponent within a node
        cross = rng.uniform(0.6, 0.95)  # efficiency factor once a job spans nodes
        big = rng.uniform(1.05, 1.4)  # gain of doubling the per-GPU batch
        pts = {}
        for k in ladder:
            if k > kmax:
                break
            t = base * k**alpha * (cross if k > gpus_per_node else 1.0)
            pts[(k, k * local)] = _sig(t)
            pts[(k, 2 * k * local)] = _sig(t * big)
        tp = MeasuredThroughput(pts)
        job = Job(f"l{i:04d}", tp, local, 2 * kmax * local, 2 * local,
                  remaining_samples=_remaining(rng, tp, 1, local))
        job, free = _place_running(rng, job, gpus, free, running_fraction)
        out.append(job)
    return out, "speedup"


def _mck(kind: str) -> Callable:
    def make(rng, jobs: int, gpus: int, gpus_per_node: int, *, options: int = 10, R: int | None = None,
             **_) -> tuple[list[Job], str]:
        if options < 1:
            raise ValidationError("options", "an integer >= 1", options)
        r = int(R) if R is not None else max(2, round(2 * gpus / max(jobs, 1)))
        out = []
        free = gpus
        for i in range(jobs):
            w = rng.integers(1, r + 1, size=options)
            if kind == "uncorrelated":
                p = rng.integers(1, r + 1, size=options)
            elif kind == "weakly":
                d = max(1, r // 10)
                p = np.maximum(1, w + rng.integers(-d, d + 1, size=options))
            elif kind == "strongly":
                p = w + max(1, r // 10)
            else:  # subset-sum
                p = w.copy()
            pts = {(int(k), int(k) * (j + 1)): float(v) for j, (k, v) in enumerate(zip(w, p))}
            bs = [b for _, b in pts]
            # running without preemption (on its lightest item, while those fit): exactly one item
            # per class, as in the MCKP; jobs beyond that stay queued
            light = min(pts)
            running = None
            if light[0] <= free:
                free -= light[0]
                running = Running(light[0], light[1])
            out.append(Job(f"c{i:04d}", MeasuredThroughput(pts), min(bs), max(bs), options, running=running))
        return out, "throughput"

    return make


FAMILIES: dict[str, Callable] = {
    "paper": _paper,
    "uniform": _uniform,
    "ladder": _ladder,
    "mck-uncorrelated": _mck("uncorrelated"),
    "mck-weakly": _mck("weakly"),
    "mck-strongly": _mck("strongly"),
    "mck-subset-sum": _mck("subset-sum"),
}

#: Every family name: :data:`FAMILIES` (one pool of identical GPUs) and the heterogeneous / node-placement
#: families of :mod:`elasticopt.generate_hetero` (clusters of their own; the DP may not prove their optimum).
ALL_FAMILIES: tuple[str, ...] = tuple(FAMILIES) + tuple(HETERO_FAMILIES)

#: The most jobs :func:`generate_instance` makes (about 3.4 KB of memory a job while it builds the problem; a
#: ``--jobs 100000000`` ran until killed before this limit).
MAX_GENERATED_JOBS = 10**6


def generate_instance(family: str, jobs: int, gpus: int, seed: int, gpus_per_node: int = 8,
                      **kw) -> Problem:
    """Generate a seeded allocation problem.

    Parameters
    ----------
    family
        One of :data:`ALL_FAMILIES` (see the module docstring).
    jobs, gpus
        Number of jobs and of GPUs in the cluster.
    seed
        Seed of ``numpy.random.default_rng``; same arguments, same problem.
    gpus_per_node
        Node size of the cluster.
    **kw
        Family options: ``running_fraction`` (paper, uniform, ladder; default
        0.3), ``networks`` (paper: profile names to draw from), ``options``
        (mck: items per class, default 10), ``R`` (mck: largest weight),
        ``objective`` (override the family's objective).

    Returns
    -------
    Problem
    """
    if family not in ALL_FAMILIES:
        raise ValidationError("family", "one of " + ", ".join(ALL_FAMILIES), family)
    for what, v, lo in (("jobs", jobs, 1), ("gpus", gpus, 1), ("gpus_per_node", gpus_per_node, 1), ("seed", seed, 0)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            raise ValidationError(what, f"an integer >= {lo}", v)
    if jobs > MAX_GENERATED_JOBS:
        raise ValidationError("jobs", f"an integer <= {MAX_GENERATED_JOBS:,}", jobs,
                              "every generated job is held in memory before the file is written (10**5 paper jobs: "
                              "8 s, 340 MB); generate several instances, or build larger ones with the Python API")
    objective = kw.pop("objective", None)
    rng = np.random.default_rng(seed)
    if family in HETERO_FAMILIES:
        return build_hetero(family, rng, int(jobs), int(gpus), int(gpus_per_node), objective, **kw)
    job_list, default_objective = FAMILIES[family](rng, int(jobs), int(gpus), int(gpus_per_node), **kw)
    try:
        return Problem(Cluster(int(gpus), int(gpus_per_node)), tuple(job_list), objective or default_objective)
    except ValidationError as e:
        if objective is None:
            raise
        raise ValidationError("objective", f"an objective that can price the '{family}' family's jobs", objective,
                              hint=f"{e}; this family's default is '{default_objective}': drop --objective or "
                                   f"choose a family whose jobs carry what '{objective}' reads") from e
