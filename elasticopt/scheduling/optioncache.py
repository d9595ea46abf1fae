"""Incremental compile: each job's options computed once, the option table assembled by numpy.

A scheduler decides at every event, and an event changes few jobs; yet
compiling the allocation problem from scratch (docs/design.md §2) asks every
job's throughput model for every candidate (k, b) again.  :class:`OptionCache`
keeps, per job id, its feasible options on this cluster (k, b, samples/s,
statistical efficiency) as rows of padded arrays, computed once when the job is
first seen.  A decision then only gathers the active jobs' rows and applies, as
array operations, what changes between events: the anti-thrashing filter
(:class:`~elasticopt.scheduling.hysteresis.Hysteresis`), a fixed batch, the
objective values, the rescale penalty, the tie-break bonus and the integer
scaling.  The result is the same :class:`~elasticopt.models.OptionTable` that
``compile_problem`` builds for the same problem, entry for entry (a test runs
both on every decision of a simulation).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from elasticopt.errors import ValidationError
from elasticopt.models import Cluster
from elasticopt.models.table import OptionTable, pick_scale, tie_bonus
from elasticopt.scheduling.executor import JobSpec
from elasticopt.scheduling.hysteresis import Hysteresis
from elasticopt.scheduling.state import JobState, to_model_job

__all__ = ["Columns", "OptionCache", "VECTOR_OBJECTIVES", "register_vector_objective"]


@dataclass(frozen=True, eq=False)
class Columns:
    """What an objective sees of the active jobs: arrays ``[n]`` per job, ``[n, K]`` per option.

    ``t`` samples/s, ``e`` statistical efficiency E(b), ``k`` GPUs, ``valid``
    the options kept, ``cur`` the current option, ``w`` weights, ``rem``
    remaining work (progress units), ``running``, ``cost`` restart seconds,
    ``good`` progress counted in effective samples.
    """

    w: np.ndarray
    t: np.ndarray
    e: np.ndarray
    k: np.ndarray
    valid: np.ndarray
    rem: np.ndarray
    cur: np.ndarray
    running: np.ndarray
    cost: np.ndarray
    good: np.ndarray


def _per_gpu_best(rate: np.ndarray, gpus: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Per row the best rate / k over valid entries (1 where a row has none)."""
    per = np.where(valid, rate / np.where(valid, gpus, 1), -np.inf)
    r = per.max(axis=1) if per.shape[1] else np.full(per.shape[0], -np.inf)
    return np.where(np.isfinite(r), r, 1.0)


def _speedup(c: Columns) -> np.ndarray:
    return (c.w[:, None] * c.t) / _per_gpu_best(c.t, c.k, c.valid)[:, None]


def _goodput(c: Columns) -> np.ndarray:
    g = c.t * c.e
    return (c.w[:, None] * g) / _per_gpu_best(g, c.k, c.valid)[:, None]


def _completion(c: Columns) -> np.ndarray:
    rem = np.where(c.rem > 0, c.rem, np.nan)
    return (c.w[:, None] * c.t) / rem[:, None]


#: Objective values as array operations, :class:`Columns` -> values ``[n, K]``; the first four with
#: the same float operations as ``models.table.OBJECTIVE_VALUES`` (so the same integer table).
VECTOR_OBJECTIVES: dict[str, Callable[[Columns], np.ndarray]] = {
    "speedup": _speedup,
    "goodput": _goodput,
    "throughput": lambda c: c.w[:, None] * c.t,
    "completion": _completion,
}


def register_vector_objective(name: str, values: Callable[[Columns], np.ndarray]) -> str:
    """Add a separable objective for policies built on :class:`OptionCache`; returns ``name``."""
    VECTOR_OBJECTIVES[name] = values
    return name


class OptionCache:
    """Per-job option rows for one cluster size, and table assembly from them (module docstring)."""

    def __init__(self) -> None:
        self._capacity: int | None = None
        self._row: dict[str, int] = {}
        self._spec: dict[str, JobSpec] = {}
        self._n = 0
        self._alloc(64, 8)

    def _alloc(self, rows: int, width: int) -> None:
        old = None if self._n == 0 else (self._k, self._b, self._t, self._e, self._valid)
        # [row, o]: option o of the job stored in that row, sorted by (k, b); valid marks real entries
        self._k = np.zeros((rows, width), np.int64)
        self._b = np.zeros((rows, width), np.int64)
        self._t = np.zeros((rows, width), np.float64)
        self._e = np.ones((rows, width), np.float64)
        self._valid = np.zeros((rows, width), bool)
        if old is not None:
            n, w = self._n, old[0].shape[1]
            for new, prev in zip((self._k, self._b, self._t, self._e, self._valid), old):
                new[:n, :w] = prev[:n]

    def _add(self, state: JobState, capacity: int) -> int:
        spec = state.spec
        opts = to_model_job(state).options(gpus_cap=capacity)
        rows, width = self._k.shape
        if self._n == rows or len(opts) > width:
            self._alloc(max(rows, 2 * self._n + 1), max(width, len(opts)))
        r = self._n
        self._n += 1
        self._valid[r] = False
        m = len(opts)
        if m:
            eff = spec.statistical_efficiency
            self._k[r, :m] = [k for k, _, _ in opts]
            self._b[r, :m] = [b for _, b, _ in opts]
            self._t[r, :m] = [t for _, _, t in opts]
            self._e[r, :m] = [1.0 if eff is None else float(eff(b)) for _, b, _ in opts]
            self._valid[r, :m] = True
        self._row[spec.id] = r
        self._spec[spec.id] = spec
        return r

    def forget(self, job_ids: Sequence[str]) -> None:
        """Drop jobs that will not come back (their rows are reused only after :meth:`clear`)."""
        for jid in job_ids:
            self._row.pop(jid, None)
            self._spec.pop(jid, None)

    def clear(self) -> None:
        """Forget every job."""
        self._row.clear()
        self._spec.clear()
        self._n = 0

    def table(
        self,
        jobs: Sequence[JobState],
        cluster: Cluster,
        *,
        objective: str,
        hysteresis: Hysteresis | None,
        fixed_batch: bool = False,
        rescale_penalty: float = 0.0,
        priority: tuple[str, ...] | None = None,
        allow_preemption: bool = False,
    ) -> OptionTable:
        """The option table of the problem a policy builds from ``jobs`` (docs/design.md §2).

        Parameters
        ----------
        jobs
            Active jobs, in problem order.
        cluster
            A one-pool cluster (G GPUs of one type; several types: compile the problem instead).
        objective
            A key of :data:`VECTOR_OBJECTIVES`.
        hysteresis
            Drop the changes of running jobs this rule does not allow (None: keep all).
        fixed_batch
            Keep only options at each job's submitted batch (its current option always stays).
        rescale_penalty, priority, allow_preemption
            As in :class:`~elasticopt.models.Problem`.
        """
        if len(cluster.types) != 1:
            raise ValidationError("cluster", "one GPU type (the option cache is for one-pool clusters)",
                                  cluster.types)
        capacity = int(cluster.gpus)
        if capacity != self._capacity:
            self.clear()
            self._capacity = capacity
        n = len(jobs)
        row_of, spec_of = self._row, self._spec
        per_job = []
        for st in jobs:
            spec = st.spec
            r = row_of.get(spec.id)
            if r is None or spec_of[spec.id] is not spec:
                r = self._add(st, capacity)
            since = st.since_rescale_s
            per_job.append((r, st.gpus, st.batch, st.spec.total_samples - st.samples_done, st.restart_cost_s,
                            spec.weight, spec.submitted_batch or spec.batch_min, st.progress == "goodput",
                            np.inf if since is None else since))
        # per job j: option row, current k and b (0 = queued), remaining work, restart cost, weight,
        # submitted batch, progress in effective samples?, seconds since its last start / rescale
        cols_j = list(zip(*per_job)) if per_job else [()] * 9
        rows = np.array(cols_j[0], np.int64)
        kn = np.array(cols_j[1], np.int64)
        bn = np.array(cols_j[2], np.int64)
        rem = np.maximum(np.array(cols_j[3], np.float64), 0.0)
        w = np.array(cols_j[5], np.float64)
        bsub = np.array(cols_j[6], np.int64)
        good = np.array(cols_j[7], bool)
        since = np.array(cols_j[8], np.float64)
        running = kn > 0
        cost = np.where(running, np.array(cols_j[4], np.float64), 0.0)
        K, B, T, E = self._k[rows], self._b[rows], self._t[rows], self._e[rows]
        valid = self._valid[rows]
        cur = running[:, None] & (K == kn[:, None]) & (B == bn[:, None]) & valid
        rate_all = np.where(good[:, None], T * E, T)
        rnow = np.where(cur, rate_all, 0.0).max(axis=1) if K.shape[1] else np.zeros(n)
        for j in np.flatnonzero(running & ~cur.any(axis=1)):  # current option not among the cached ones
            rnow[j] = jobs[j].progress_per_s(jobs[j].gpus, jobs[j].batch) or 0.0
        keep = np.ones_like(valid)
        if fixed_batch:
            keep &= B == bsub[:, None]
        if hysteresis is not None:
            keep &= self._hysteresis_mask(hysteresis, K, rate_all, kn, rem, cost, rnow, running, since)
        valid = valid & (cur | keep)
        cols = Columns(w=w, t=T, e=E, k=K, valid=valid, rem=rem, cur=cur, running=running, cost=cost, good=good)
        value = VECTOR_OBJECTIVES[objective](cols)
        lam = float(rescale_penalty)
        if lam:
            value = np.where(running[:, None] & ~cur, value - lam, value)
        # left-align every row's valid options, as compile_problem lists them
        order = np.argsort(~valid, axis=1, kind="stable")
        width = int(valid.sum(axis=1).max()) if n else 0
        order = order[:, :width]

        def take(a):
            return np.take_along_axis(a, order, axis=1)

        valid = take(valid)
        gpus = np.where(valid, take(K), 0)
        batch = np.where(valid, take(B), 0)
        value = np.where(valid, take(value), 0.0)
        sps = np.where(valid, take(T), 0.0)
        curr = take(cur) & valid
        current = np.where(curr.any(axis=1), curr.argmax(axis=1), -1).astype(np.int64)
        idle = ~running | bool(allow_preemption)
        ids = tuple(st.id for st in jobs)
        tie_scale, bonus = tie_bonus(priority)
        total = float(np.abs(value).max(axis=1).sum()) if width else 0.0
        scale = pick_scale(total, n, tie_scale)
        utility = np.rint(value * scale).astype(np.int64) * tie_scale
        if bonus:
            utility = utility + np.array([bonus.get(i, 0) for i in ids], dtype=np.int64)[:, None]
        utility = np.where(valid, utility, 0)
        return OptionTable(
            job_ids=ids,
            capacity=capacity,
            scale=int(scale),
            tie_scale=int(tie_scale),
            gpus=gpus,
            batch=batch,
            utility=utility,
            value=value,
            samples_per_s=sps,
            valid=valid,
            idle_allowed=idle,
            current_option=current,
            running_ids=tuple(i for i, r in zip(ids, running) if r),
            stats={"n_jobs": n, "n_options": int(valid.sum()), "width": width, "capacity": capacity,
                   "capacities": (capacity,)},
            gpu_type=np.zeros_like(gpus),
            packed=np.zeros_like(valid),
            types=cluster.types,
            capacities=np.array([capacity], dtype=np.int64),
            pools=tuple(cluster.pools[t] for t in cluster.types),
        )

    @staticmethod
    def _hysteresis_mask(rule, K, rate, kn, rem, cost, rnow, running, since) -> np.ndarray:
        """``rule.allows`` for every option, as an array (same float operations)."""
        r0 = rnow[:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            gain_ok = ~((r0 > 0) & (rate < (1.0 + rule.min_gain) * r0))
            saved = rem[:, None] / r0 - rem[:, None] / rate
            pay_ok = (r0 <= 0) | (saved > rule.payback_factor * cost[:, None])
        allowed = gain_ok & pay_ok & (rate > 0)
        cool = ~(since < rule.min_interval_restarts * cost)
        return ~running[:, None] | (cool[:, None] & ((K < kn[:, None]) | allowed))
