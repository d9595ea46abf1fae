"""Synthetic workloads: Poisson arrivals at a given load, Philly job sizes and durations.

Job sizes (submitted GPUs) and durations come from the Philly trace of
Microsoft's GPU cluster (2017; public, via the Pollux OSDI'21 artifact,
``simulator/traces/philly.csv``), either from the file itself (``trace=``) or
from the distribution fitted to it and committed below (:data:`PHILLY_FIT`).
Networks and their throughput / batch ranges come from the profile library
(default: the ``t4/*`` profiles, whose accuracy-neutral batch ranges were
measured by Pollux).

A job's duration is its duration on its *submitted* (k, b), so
``total_samples = duration * T(k, b)``; the offered load is
``arrival_rate * E[k * duration] / G``.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from elasticopt.errors import ValidationError
from elasticopt.models.rules import fits
from elasticopt.scheduling.jobspec import JobSpec

__all__ = ["PHILLY_FIT", "DEFAULT_NETWORKS", "JobShape", "philly_shapes", "generate_workload"]

#: Fitted to traces/philly.csv (82,247 jobs; kept the 74,593 of >= 60 s, shorter ones are
#: mostly failed or interactive).  ``gpus``: probability of each power-of-two size (other
#: sizes, 0.03 % of jobs, dropped).  ``duration_quantiles``: duration in seconds at the
#: ``levels`` quantiles, per size class; sampled by log-linear interpolation.
PHILLY_FIT = {
    "source": "Philly trace (Jeon et al., ATC'19) via petuum/adaptdl osdi21-artifact simulator/traces/philly.csv",
    "min_duration_s": 60.0,
    "gpus": {1: 0.94462, 2: 0.00619, 4: 0.02426, 8: 0.02163, 16: 0.00239, 32: 0.00086, 64: 0.00005},
    "levels": (0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1),
    "duration_quantiles": {
        "1": (60.0, 66.0, 71.0, 152.0, 437.0, 847.0, 1393.0, 1956.0, 2579.0, 4069.0, 9145.4, 21763.1,
              146899.3, 3256045.0),
        "2-4": (60.0, 102.0, 139.0, 467.0, 2330.0, 11960.0, 23522.0, 47329.0, 85469.0, 126261.0, 197563.0,
                342270.5, 1039536.1, 2750674.0),
        "8+": (62.0, 161.0, 289.8, 903.6, 4208.8, 12711.2, 27093.0, 66052.0, 136679.8, 199967.0, 346255.8,
               513532.2, 1071112.2, 4628226.0),
    },
}

DEFAULT_NETWORKS = ("t4/bert", "t4/cifar10", "t4/deepspeech2", "t4/imagenet", "t4/ncf", "t4/yolov3")


@dataclass(frozen=True)
class JobShape:
    """A job's submitted GPU count and its duration on its submitted option."""

    gpus: int
    duration_s: float


def _size_class(k: int) -> str:
    return "1" if k == 1 else ("2-4" if k < 8 else "8+")


def philly_shapes(n: int, rng: np.random.Generator, trace: str | os.PathLike[str] | None = None) -> list[JobShape]:
    """Draw ``n`` (GPUs, duration) pairs from the Philly trace or its fit.

    Parameters
    ----------
    n
        How many.
    rng
        Random generator.
    trace
        Path to ``philly.csv`` (columns ``timestamp,duration,num_gpus,...``):
        sample its jobs (>= 60 s, power-of-two sizes) with replacement; None:
        use :data:`PHILLY_FIT`.
    """
    if trace is not None:
        rows = []
        with open(trace, newline="") as fh:
            for r in csv.DictReader(fh):
                d, k = float(r["duration"]), int(float(r["num_gpus"]))
                if d >= PHILLY_FIT["min_duration_s"] and k in PHILLY_FIT["gpus"]:
                    rows.append((k, d))
        if not rows:
            raise ValidationError(f"trace {trace}", "rows with duration >= 60 and num_gpus a power of two", 0)
        idx = rng.integers(0, len(rows), n)
        return [JobShape(rows[i][0], rows[i][1]) for i in idx]
    sizes = np.array(list(PHILLY_FIT["gpus"]))
    p = np.array(list(PHILLY_FIT["gpus"].values()))
    ks = rng.choice(sizes, size=n, p=p / p.sum())
    us = rng.random(n)
    levels = np.array(PHILLY_FIT["levels"])
    out = []
    for k, u in zip(ks.tolist(), us.tolist()):
        q = np.log(np.array(PHILLY_FIT["duration_quantiles"][_size_class(k)]))
        out.append(JobShape(int(k), float(math.exp(np.interp(u, levels, q)))))
    return out


def _submitted_option(model, k: int, rng: np.random.Generator, pick: str) -> tuple[int, int] | None:
    """A feasible (k', b) with k' the largest power of two <= k the model accepts."""
    while k >= 1:
        opts = sorted(b for kk, b in model.candidates(k, model.batch_min, model.batch_max)
                      if kk == k and fits(k, b, k, k, model.batch_min, model.batch_max, model.max_local))
        if opts:
            if pick == "min":
                return k, opts[0]
            if pick == "max":
                return k, opts[-1]
            return k, int(opts[rng.integers(0, len(opts))])
        k //= 2
    return None


def check_workload_size(n_jobs: object, load: object, gpus: object = 1, *, seed: object = 0,
                        duration_max_s: object = None, duration_scale: object = 1.0) -> None:
    """The arguments of a generated workload (one rule for every generator): raises :class:`ValidationError`
    naming the argument (``jobs``, ``load``, ``gpus``, ``seed``, ``duration_max_s``, ``duration_scale``; the
    CLI's ``--jobs``, ``--load``, ...) before anything is drawn, so no workload with a NaN arrival is written."""
    for name, value, lo in (("jobs", n_jobs, 1), ("gpus", gpus, 1), ("seed", seed, 0)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lo:
            raise ValidationError(name, f"an integer >= {lo}", value)
    for name, value, what in (("load", load, "a number > 0 (offered load: submitted GPU-demand / GPUs)"),
                              ("duration_scale", duration_scale, "a finite number > 0 (multiplies every duration)"),
                              ("duration_max_s", 1.0 if duration_max_s is None else duration_max_s,
                               "a finite number of seconds > 0 (the clip of every duration), or None for none")):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
                or not 0 < value < math.inf:
            raise ValidationError(name, what, duration_max_s if name == "duration_max_s" else value)


def generate_workload(
    n_jobs: int,
    gpus: int,
    load: float,
    *,
    seed: int = 0,
    networks: Sequence[str] | None = None,
    trace: str | os.PathLike[str] | None = None,
    duration_max_s: float | None = 48 * 3600.0,
    duration_scale: float = 1.0,
    submitted_batch: str = "random",
    max_submitted_fraction: float = 0.25,
) -> list[JobSpec]:
    """Generate a workload: Poisson arrivals at ``load``, Philly sizes and durations.

    Parameters
    ----------
    n_jobs
        Number of jobs.
    gpus
        Cluster size the load refers to.
    load
        Offered load: submitted GPU-seconds arriving per second over ``gpus``
        (1.0 = a static scheduler would be exactly saturated).
    seed
        Seeds everything; same seed, same workload.
    networks
        Profile names to draw from uniformly (default :data:`DEFAULT_NETWORKS`).
    trace
        Path to the Philly CSV (default: the committed fit :data:`PHILLY_FIT`).
    duration_max_s
        Clip durations (None: keep the trace's month-long tail).
    duration_scale
        Multiply every duration (shorter jobs, faster simulations).
    submitted_batch
        How users pick b among the feasible batches for their k: ``random``
        (uniform), ``min`` or ``max``.
    max_submitted_fraction
        Cap a job's submitted GPUs at this fraction of the cluster (halving
        to a power of two).
    """
    check_workload_size(n_jobs, load, gpus, seed=seed, duration_max_s=duration_max_s,
                        duration_scale=duration_scale)
    if submitted_batch not in ("random", "min", "max"):
        raise ValidationError("submitted_batch", "'random', 'min' or 'max'", submitted_batch)
    from elasticopt.profiles import get_profile

    names = list(networks or DEFAULT_NETWORKS)
    models = [get_profile(n) for n in names]
    rng = np.random.default_rng(seed)
    shapes = philly_shapes(n_jobs, rng, trace)
    k_cap = max(1, int(gpus * max_submitted_fraction))
    drafts = []
    for i, sh in enumerate(shapes):
        model = models[int(rng.integers(0, len(models)))]
        k = min(sh.gpus, k_cap)
        k = 1 << (k.bit_length() - 1)
        opt = _submitted_option(model, k, rng, submitted_batch)
        if opt is None:
            raise ValidationError(f"profile {model.name!r}", "a feasible option on 1 GPU", None)
        d = sh.duration_s * duration_scale
        if duration_max_s is not None:
            d = min(d, duration_max_s)
        drafts.append((model, opt, d))
    mean_work = float(np.mean([opt[0] * d for _, opt, d in drafts]))
    rate = load * gpus / mean_work  # jobs per second
    arrivals = np.cumsum(rng.exponential(1.0 / rate, n_jobs))
    arrivals -= arrivals[0]  # first job at t = 0
    jobs = []
    for i, ((model, (k, b), d), t) in enumerate(zip(drafts, arrivals.tolist())):
        jobs.append(
            JobSpec(
                id=f"job-{i:05d}",
                throughput=model,
                batch_min=model.batch_min,
                batch_max=model.batch_max,
                max_local=model.max_local,
                total_samples=d * model.samples_per_s(k, b),
                submitted_gpus=k,
                submitted_batch=b,
                arrival_s=round(t, 3),
            )
        )
    return jobs
