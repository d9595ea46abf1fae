"""Metrics of one run: completions, JCT, queueing, utilisation, rescales, solver time."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["Metrics", "compute_metrics"]


@dataclass(frozen=True)
class Metrics:
    """Summary of one run (times in seconds; None where undefined).

    ``jct_*`` are over completed jobs; ``jct_mean_all_s`` counts every job
    that arrived before the end, an unfinished one at ``end - arrival`` (a
    lower bound on its JCT).  ``queue_delay_*`` is arrival to first start
    (``end - arrival`` if never started).  ``utilisation`` is the
    time-average of GPUs held over [0, end] divided by the cluster size
    (restarting jobs count as holding).  ``makespan_s`` is the last
    completion, when every job completed.  ``decision_s_*`` is the wall time
    of each policy call, ``solver_s_mean`` the solver's own figure.
    ``rescales_per_job`` and ``restart_s_per_job`` divide by every job of
    the run (thrashing, measured).  ``dropped``: jobs admission control
    turned away (they never started; not in ``jct_mean_all_s`` nor the queue
    delays); ``failed``; ``unfinished``: running or queued at the end, so
    ``completed + failed + dropped + unfinished == jobs``.
    """

    jobs: int
    completed: int
    end_s: float
    jct_mean_s: float | None
    jct_median_s: float | None
    jct_p95_s: float | None
    jct_mean_all_s: float | None
    queue_delay_mean_s: float | None
    queue_delay_median_s: float | None
    queue_delay_p95_s: float | None
    utilisation: float
    mean_queue_length: float
    makespan_s: float | None
    starts: int
    rescales: int
    stops: int
    restart_s: float
    decisions: int
    decision_s_mean: float
    decision_s_p95: float
    decision_s_max: float
    solver_s_mean: float
    rescales_per_job: float = 0.0
    restart_s_per_job: float = 0.0
    dropped: int = 0
    failed: int = 0
    unfinished: int = 0

    def to_dict(self) -> dict:
        """Plain dict (for JSON)."""
        return asdict(self)


def _stat(values: Sequence[float], fn) -> float | None:
    return float(fn(np.asarray(values, dtype=float))) if len(values) else None


def _time_average(times: np.ndarray, values: np.ndarray, end_s: float) -> float:
    """Average of a right-continuous step function (0 before the first point) over [0, end]."""
    if end_s <= 0 or len(times) == 0:
        return 0.0
    t = np.clip(np.append(times, end_s), 0.0, end_s)
    return float(np.sum(values * np.diff(t)) / end_s)


def compute_metrics(records, timeline, decisions, cluster_gpus: int, end_s: float) -> Metrics:
    """Compute :class:`Metrics` from a run's records, timeline and decisions.

    Parameters
    ----------
    records
        Per-job :class:`~elasticopt.scheduling.records.JobRecord`.
    timeline
        :class:`~elasticopt.scheduling.records.TimelinePoint` in time order.
    decisions
        The autoscaler's decisions.
    cluster_gpus
        Cluster size.
    end_s
        End of the run (the horizon, or the last event).
    """
    arrived = [r for r in records if r.arrival_s <= end_s and r.status != "dropped"]
    done = [r for r in records if r.status == "completed"]
    n_dropped = sum(1 for r in records if r.status == "dropped")
    n_failed = sum(1 for r in records if r.status == "failed")
    jct = [r.jct_s for r in done]
    jct_all = [(r.completion_s if r.completion_s is not None else end_s) - r.arrival_s for r in arrived]
    qd = [(r.first_start_s if r.first_start_s is not None else end_s) - r.arrival_s for r in arrived]
    times = np.array([p.time_s for p in timeline], dtype=float)
    used = np.array([p.gpus_in_use for p in timeline], dtype=float)
    queue = np.array([p.queued for p in timeline], dtype=float)
    dec_s = [d.decision_s for d in decisions]
    return Metrics(
        jobs=len(records),
        completed=len(done),
        end_s=float(end_s),
        jct_mean_s=_stat(jct, np.mean),
        jct_median_s=_stat(jct, np.median),
        jct_p95_s=_stat(jct, lambda a: np.percentile(a, 95)),
        jct_mean_all_s=_stat(jct_all, np.mean),
        queue_delay_mean_s=_stat(qd, np.mean),
        queue_delay_median_s=_stat(qd, np.median),
        queue_delay_p95_s=_stat(qd, lambda a: np.percentile(a, 95)),
        utilisation=_time_average(times, used, end_s) / cluster_gpus if cluster_gpus else 0.0,
        mean_queue_length=_time_average(times, queue, end_s),
        makespan_s=max(r.completion_s for r in done) if done and len(done) == len(records) else None,
        starts=sum(r.starts for r in records),
        rescales=sum(r.rescales for r in records),
        stops=sum(r.stops for r in records),
        restart_s=float(sum(r.restart_s for r in records)),
        decisions=len(decisions),
        decision_s_mean=float(np.mean(dec_s)) if dec_s else 0.0,
        decision_s_p95=float(np.percentile(dec_s, 95)) if dec_s else 0.0,
        decision_s_max=float(max(dec_s)) if dec_s else 0.0,
        solver_s_mean=float(np.mean([d.solver_s for d in decisions])) if decisions else 0.0,
        rescales_per_job=sum(r.rescales for r in records) / len(records) if records else 0.0,
        restart_s_per_job=float(sum(r.restart_s for r in records)) / len(records) if records else 0.0,
        dropped=n_dropped,
        failed=n_failed,
        unfinished=len(records) - len(done) - n_dropped - n_failed,
    )


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b, None when undefined."""
    if a is None or b is None or b == 0 or not math.isfinite(b):
        return None
    return a / b
