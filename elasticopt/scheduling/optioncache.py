"""Incremental compile: each job's options computed once, the option table assembled by numpy.

A scheduler decides at every event, and an event changes few jobs; yet
compiling the allocation problem from scratch (docs/design.md §2) asks every
job's throughput model for every candidate (k, b) again.  :class:`OptionCache`
keeps, per job id, its feasible options on this cluster (k, b, samples/s,
statistical efficiency) as rows of padded arrays, computed once per job shape
(model, efficiency, limits) and copied into a job's row when the job is first
seen.  A decision then only gathers the active jobs' rows and applies, as
array operations, what changes between events: the anti-thrashing filter
(:class:`~elasticopt.scheduling.hysteresis.Hysteresis`), a fixed batch, the
objective values (each registered objective's own value function, run on
the cached rows), the rescale penalty, the tie-break bonus and the integer
scaling.  The result is the same :class:`~elasticopt.models.OptionTable` that
``compile_problem`` builds for the same problem, entry for entry (a test runs
both on every decision of a simulation).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from elasticopt.errors import DuplicateNameError, ValidationError
from elasticopt.models import Cluster
from elasticopt.models.objectives import Objective, OptionRows, get_objective, objective_names
from elasticopt.models.table import OptionTable, pick_scale, tie_bonus
from elasticopt.scheduling.jobspec import JobSpec
from elasticopt.scheduling.hysteresis import Hysteresis
from elasticopt.scheduling.state import CachedThroughput, JobState, to_model_job

__all__ = ["Columns", "OptionCache", "VECTOR_OBJECTIVES", "register_vector_objective", "vector_values"]


@dataclass(frozen=True, eq=False)
class Columns:
    """What an objective sees of the active jobs: arrays ``[n]`` per job, ``[n, K]`` per option.

    ``t`` samples/s, ``e`` statistical efficiency E(b), ``k`` GPUs (as floats), ``valid``
    the options kept, ``cur`` the current option, ``w`` weights, ``rem``
    remaining work (progress units), ``running``, ``cost`` restart seconds,
    ``good`` progress counted in effective samples, ``b`` the global batch, ``types`` the
    cluster's one GPU type.
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
    b: np.ndarray | None = None
    types: tuple[str, ...] = ("gpu",)


class _CacheJobs:
    """:class:`~elasticopt.models.objectives.JobColumns` of the cached rows (the valid options, flat)."""

    def __init__(self, c: Columns, src: np.ndarray):
        self.n = c.w.size
        self.weight = c.w
        self._c, self._src = c, src

    @property
    def remaining(self) -> np.ndarray:
        return np.where(self._c.rem > 0, self._c.rem, np.nan)

    def efficiency(self, rows: OptionRows) -> np.ndarray:
        return self._c.e.ravel()[self._src]

    def caller_values(self, rows: OptionRows) -> np.ndarray:
        raise ValidationError("objective", "an objective without caller values (the option cache has none)",
                              "caller_values")


def _from_objective(obj: Objective) -> Callable[[Columns], np.ndarray]:
    """The registered objective ``obj`` on :class:`Columns`: its own value function on the valid options, flat."""

    def values(c: Columns) -> np.ndarray:
        src = np.flatnonzero(c.valid)
        job = src // c.valid.shape[1]
        m = src.size
        rows = OptionRows(job, c.k.ravel()[src].astype(np.int64), c.b.ravel()[src].astype(np.int64),
                          c.t.ravel()[src], np.zeros(m, np.int64), np.zeros(m, bool), c.types)
        out = np.full(c.valid.shape, np.nan)
        out.ravel()[src] = obj.values(rows, _CacheJobs(c, src))
        return out

    return values


#: Objectives of policies built on :class:`OptionCache` only (Pollux's p = -1 utility), :class:`Columns`
#: -> values ``[n, K]``.  The registered objectives of ``models/objectives.py`` need no entry here: the
#: cache runs their own value functions (:func:`vector_values`).
VECTOR_OBJECTIVES: dict[str, Callable[[Columns], np.ndarray]] = {}

#: Per registered objective (by identity) its :func:`_from_objective` adapter.
_ADAPTERS: dict[int, tuple[Objective, Callable[[Columns], np.ndarray]]] = {}


def vector_values(name: str) -> Callable[[Columns], np.ndarray] | None:
    """The values ``Columns -> [n, K]`` of objective ``name`` on the cache (None: the cache cannot compute them).

    A policy objective of :data:`VECTOR_OBJECTIVES`, else a registered objective that needs no caller values.
    """
    f = VECTOR_OBJECTIVES.get(name)
    if f is not None:
        return f
    if name not in objective_names():
        return None
    obj = get_objective(name)
    if "values" in obj.requires:
        return None
    hit = _ADAPTERS.get(id(obj))
    if hit is None or hit[0] is not obj:
        hit = _ADAPTERS[id(obj)] = (obj, _from_objective(obj))
    return hit[1]


@dataclass(frozen=True, eq=False)
class _Shape:
    """The options of every job with one throughput model, efficiency and limits.

    ``fields[f, o]``: field f (k, b, samples/s, E, samples/s * E) of option o, options sorted by (k, b);
    ``col_of``: (k, b) -> o.  The model and efficiency are kept so that their ids in the key stay theirs.
    """

    model: object
    efficiency: object
    fields: np.ndarray
    col_of: dict[tuple[int, int], int]


def register_vector_objective(name: str, values: Callable[[Columns], np.ndarray], *, replace: bool = False) -> str:
    """Add a separable objective for policies built on :class:`OptionCache`; returns ``name``.

    Raises :class:`~elasticopt.errors.DuplicateNameError` if ``name`` is taken by
    other values and ``replace`` is False (the same function again is a no-op).
    """
    old = VECTOR_OBJECTIVES.get(name) or (get_objective(name) if name in objective_names() else None)
    if old is not None and old is not values and not replace:
        raise DuplicateNameError("vector objective", name, old)
    VECTOR_OBJECTIVES[name] = values
    return name


#: Fields of the cached option rows (``OptionCache._f[field, row, o]``).
_K, _B, _T, _E, _TE = range(5)


class OptionCache:
    """Per-job option rows for one cluster size, and table assembly from them (module docstring).

    Jobs with the same throughput model, efficiency and limits share one
    computed row (the model is asked once per distinct job shape, not once
    per job), as ``compile_problem`` shares blocks across jobs.  A decision
    reads, per active job, a handful of scalars in one Python pass (its row,
    current option, remaining work, restart cost, time since its last change)
    and does everything else as a fixed number of array operations over all
    active jobs at once.
    """

    def __init__(self) -> None:
        self._capacity: int | None = None
        self._row: dict[str, int] = {}
        self._spec: dict[str, JobSpec] = {}
        # (id(model), id(efficiency), limits) -> _Shape: the options of every job of that shape
        self._shapes: dict[tuple, _Shape] = {}
        self._col_of: list[dict[tuple[int, int], int]] = []  # per row: (k, b) -> its option column
        self._n = 0
        self._alloc(64, 8)

    def _alloc(self, rows: int, width: int) -> None:
        n = self._n
        old = None if n == 0 else (self._f, self._valid, self._w, self._bsub)
        # [field, row, o]: k, b, samples/s, E(b), samples/s * E(b) of option o of the job stored in that row,
        # options sorted by (k, b); valid[row, o] marks real entries (k = b = T = 0, E = 1 elsewhere)
        self._f = np.zeros((5, rows, width), np.float64)
        self._f[_E] = 1.0
        self._valid = np.zeros((rows, width), bool)
        # [row]: the job's weight and submitted batch
        self._w = np.ones(rows, np.float64)
        self._bsub = np.zeros(rows, np.float64)
        self._cols = np.arange(width)
        if old is not None:
            w = old[0].shape[2]
            self._f[:, :n, :w] = old[0][:, :n]
            self._valid[:n, :w] = old[1][:n]
            self._w[:n], self._bsub[:n] = old[2][:n], old[3][:n]

    def _shape(self, state: JobState, capacity: int) -> _Shape:
        """The options of the job's shape (model, efficiency, limits), computed on first use."""
        spec = state.spec
        model = spec.throughput
        base = model.base if isinstance(model, CachedThroughput) else model
        eff = spec.statistical_efficiency
        key = (id(base), id(eff), spec.batch_min, spec.batch_max, spec.max_local, spec.gpus_min, spec.gpus_max)
        hit = self._shapes.get(key)
        if hit is not None and hit.model is base and hit.efficiency is eff:
            return hit
        opts = to_model_job(state).options(gpus_cap=capacity)
        f = np.zeros((5, len(opts)), np.float64)
        f[_K] = [o[0] for o in opts]
        f[_B] = [o[1] for o in opts]
        f[_T] = [o[2] for o in opts]
        f[_E] = [1.0 if eff is None else float(eff(o[1])) for o in opts]
        f[_TE] = f[_T] * f[_E]
        col_of = {(o[0], o[1]): i for i, o in enumerate(opts)}
        shape = self._shapes[key] = _Shape(base, eff, f, col_of)
        return shape

    def _add(self, state: JobState, capacity: int) -> int:
        spec = state.spec
        shape = self._shape(state, capacity)
        m = shape.fields.shape[1]
        _, rows, width = self._f.shape
        if self._n == rows or m > width:
            self._alloc(max(rows, 2 * self._n + 1), max(width, m))
        r = self._n
        self._n += 1
        self._f[:, r] = 0.0
        self._f[_E, r] = 1.0
        self._f[:, r, :m] = shape.fields
        self._valid[r] = False
        self._valid[r, :m] = True
        self._w[r] = spec.weight
        self._bsub[r] = spec.batch_submitted
        if r == len(self._col_of):
            self._col_of.append(shape.col_of)
        else:
            self._col_of[r] = shape.col_of
        self._row[spec.id] = r
        self._spec[spec.id] = spec
        return r

    def forget(self, job_ids: Sequence[str]) -> None:
        """Drop jobs that will not come back (their rows are reused only after :meth:`clear`)."""
        for jid in job_ids:
            self._row.pop(jid, None)
            self._spec.pop(jid, None)

    def clear(self) -> None:
        """Forget every job and every job shape."""
        self._row.clear()
        self._spec.clear()
        self._shapes.clear()
        self._n = 0

    def _job_columns(self, jobs: Sequence[JobState], capacity: int) -> tuple[list[str], np.ndarray]:
        """Ids and per job ``[row, k, current column, remaining, restart cost, since, goodput?]`` (floats).

        The current column is -1 for a queued job and for a running job whose current (k, b) is not
        among its cached options.
        """
        row_of, spec_of, col_of = self._row, self._spec, self._col_of
        ids: list[str] = []
        vals: list[float] = []
        add_id, ext = ids.append, vals.extend
        inf = np.inf
        for st in jobs:
            spec = st.spec
            jid = spec.id
            r = row_of.get(jid)
            if r is None or spec_of[jid] is not spec:
                r = self._add(st, capacity)
            k = st.gpus
            since = st.since_rescale_s
            add_id(jid)
            ext((r, k, col_of[r].get((k, st.batch), -1) if k > 0 else -1, spec.total_samples - st.samples_done,
                 st.restart_cost_s, inf if since is None else since, st.progress == "goodput"))
        return ids, np.array(vals, np.float64).reshape(len(ids), 7)

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
        nodes: bool = True,
        queue: float = 0.0,
    ) -> OptionTable:
        """The option table of the problem a policy builds from ``jobs`` (docs/design.md §2).

        Parameters
        ----------
        jobs
            Active jobs, in problem order.
        cluster
            A one-pool cluster (G GPUs of one type; several types: compile the problem instead).
        objective
            A registered objective (``models/objectives.py``) without caller values, or a
            key of :data:`VECTOR_OBJECTIVES` (:func:`vector_values`).
        hysteresis
            Drop the changes of running jobs this rule does not allow (None: keep all).
        fixed_batch
            Keep only options at each job's submitted batch (its current option always stays).
        rescale_penalty, priority, allow_preemption
            As in :class:`~elasticopt.models.Problem`.
        nodes
            Give the table the cluster's pool (``pools``), as ``compile_problem`` does, so that a
            solution is placed on its nodes; False leaves ``pools`` None: the totals only.  One pool
            without packed options needs no placement to be feasible (docs/design.md §2), so a caller
            that places the jobs itself (the autoscaler keeps running jobs on their GPUs) skips it.
        queue
            The queue's waiting value (:func:`~elasticopt.scheduling.hysteresis.queue_value`), which
            shortens the cool-down of shrinks under ``hysteresis``.
        """
        if len(cluster.types) != 1:
            raise ValidationError("cluster", "one GPU type (the option cache is for one-pool clusters)",
                                  cluster.types)
        capacity = int(cluster.gpus)
        if capacity != self._capacity:
            self.clear()
            self._capacity = capacity
        n = len(jobs)
        ids, a = self._job_columns(jobs, capacity)
        # per job j: its cache row, current k (0 = queued) and option column (-1 = none), remaining work,
        # restart cost, seconds since its last start / rescale, progress counted in effective samples
        rows = a[:, 0].astype(np.intp)
        kn = a[:, 1]
        col = a[:, 2].astype(np.intp)
        rem = np.maximum(a[:, 3], 0.0)
        running = kn > 0
        cost = np.where(running, a[:, 4], 0.0)
        since = a[:, 5]
        good = a[:, 6] > 0
        # [field, j, o]: the fields of option o of job j as cached; [j, o]: one field
        F = self._f[:, rows]
        K, T, E = F[_K], F[_T], F[_E]
        valid = self._valid[rows]
        has_cur = col >= 0
        cur = col[:, None] == self._cols  # [j, o]: o is job j's current option
        n_good = int(np.count_nonzero(good))
        rate_all = F[_TE] if n_good == n else T if n_good == 0 else np.where(good[:, None], F[_TE], T)
        ar = np.arange(n)
        rnow = np.where(has_cur, rate_all[ar, col], 0.0)
        for j in np.flatnonzero(running & ~has_cur).tolist():  # current option not among the cached ones
            rnow[j] = jobs[j].progress_per_s(jobs[j].gpus, jobs[j].batch) or 0.0
        keep = valid
        if fixed_batch:
            keep = keep & (F[_B] == self._bsub[rows][:, None])
        if hysteresis is not None:
            keep = keep & hysteresis.allows_array(K, rate_all, kn, rem, cost, rnow, running, since, queue)
        valid = keep | cur
        cols = Columns(w=self._w[rows], t=T, e=E, k=K, valid=valid, rem=rem, cur=cur, running=running, cost=cost,
                       good=good, b=F[_B], types=cluster.types)
        f = vector_values(objective)
        if f is None:
            raise ValidationError("objective", "a registered objective without caller values, or a policy "
                                  "objective (register_vector_objective)", objective)
        value = f(cols)
        lam = float(rescale_penalty)
        if lam:  # every option of a running job but its current one loses lam
            keep_cur = value[ar, col]
            value = value - np.where(running, lam, 0.0)[:, None]
            value[ar[has_cur], col[has_cur]] = keep_cur[has_cur]
        # left-align every row's valid options, as compile_problem lists them: the i-th valid entry (row-major),
        # flat index src[i] of an [n, W] array, moves to flat index dst[i] of an [n, width] one
        W = valid.shape[1]
        src = np.flatnonzero(valid)
        r = src // W
        counts = valid.sum(axis=1)
        width = int(counts.max()) if n else 0
        first = np.cumsum(counts) - counts  # [j]: entries of the rows before j
        dst = r * width + (np.arange(src.size) - first[r])
        kbt = np.zeros((3, n * width))  # [field, j * width + o']: k, b, samples/s of job j's o'-th valid option
        kbt[:, dst] = F[:_E].reshape(_E, n * W)[:, src]
        kbt = kbt.reshape(3, n, width)
        val = np.zeros(n * width)
        val[dst] = value.ravel()[src]
        val = val.reshape(n, width)
        valid_out = np.zeros(n * width, bool)
        valid_out[dst] = True
        valid_out = valid_out.reshape(n, width)
        current = np.full(n, -1, np.int64)
        at_cur = np.flatnonzero(cur.ravel()[src])  # entries that are their job's current option
        current[r[at_cur]] = dst[at_cur] - r[at_cur] * width
        tie_scale, bonus = tie_bonus(priority)
        total = float(np.abs(val).max(axis=1).sum()) if width else 0.0
        scale = pick_scale(total, n, tie_scale)
        utility = np.rint(val * scale).astype(np.int64) * tie_scale
        if bonus:
            utility += np.array([bonus.get(i, 0) for i in ids], dtype=np.int64)[:, None]
        utility[~valid_out] = 0
        job_ids = tuple(ids)
        return OptionTable(
            job_ids=job_ids,
            capacity=capacity,
            scale=int(scale),
            tie_scale=int(tie_scale),
            gpus=kbt[_K].astype(np.int64),
            batch=kbt[_B].astype(np.int64),
            utility=utility,
            value=val,
            samples_per_s=kbt[_T],
            valid=valid_out,
            idle_allowed=~running | bool(allow_preemption),
            current_option=current,
            running_ids=tuple(i for i, run in zip(job_ids, running.tolist()) if run),
            stats={"n_jobs": n, "n_options": int(src.size), "width": width, "capacity": capacity,
                   "capacities": (capacity,)},
            gpu_type=np.zeros((n, width), np.int64),
            packed=np.zeros((n, width), bool),
            types=cluster.types,
            capacities=np.array([capacity], dtype=np.int64),
            pools=tuple(cluster.pools[t] for t in cluster.types) if nodes else None,
        )

