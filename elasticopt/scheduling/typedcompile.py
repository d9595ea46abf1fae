"""Incremental compile: the model's compiler, its per-model blocks kept across a scheduler's decisions.

Compiling a policy's problem from scratch (``compile_problem(policy.build_problem(snapshot))``)
gives every restricted job (a running job under the anti-thrashing rule, every job of the
fixed-batch baseline) a fresh :class:`~elasticopt.scheduling.state.RestrictedThroughput` per
decision: a new model object, so the compiler's per-model option blocks
(:func:`elasticopt.models.options.option_blocks`, cached by model) are computed again for it at
every event, asking the restriction one option at a time.  :class:`TypedCompile` gives a
restricted job instead one *shared* unrestricted wrapper per model (the same options as the
fresh restriction before it drops any: a ``RestrictedThroughput`` that allows every option), so
its blocks are the cached ones, and passes the restriction to the model's compiler as data, a
mask over all options at once (``compile_problem(problem, keep=...)``): the fixed batch, the
current option kept, and the anti-thrashing rule in its array form
(:meth:`~elasticopt.scheduling.hysteresis.Hysteresis.allows_array`).  Everything else (values,
utilities, the current option, layout) is the model compiler's own, so the table is the slow
path's, entry for entry (``tests/test_scheduling_incremental.py`` checks it at every decision of
one-pool, heterogeneous and node-aware simulations).  It is the one compile path of every policy
built on :class:`~elasticopt.scheduling.policies.elastic.ElasticPolicy`, on any cluster.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from elasticopt.models import Cluster, Job, Problem, compile_problem
from elasticopt.models.objectives import OptionRows
from elasticopt.models.reductions import compile_reduced
from elasticopt.models.table import OptionTable
from elasticopt.scheduling.hysteresis import Hysteresis
from elasticopt.scheduling.state import CachedThroughput, JobState, RestrictedThroughput, to_model_job

__all__ = ["TypedCompile"]


def _every(k: int, b: int, gpu_type: str | None = None) -> bool:
    return True


def _base(model: Any) -> Any:
    """The model a :class:`~elasticopt.scheduling.state.CachedThroughput` wraps (the same rates), else ``model``.

    The autoscaler wraps every job's model in its own cache; the compiler's option blocks are cached per
    model object, so jobs of one profile share their blocks only through the model they share.
    """
    return model.base if type(model) is CachedThroughput else model


class TypedCompile:
    """The restricted jobs' shared wrappers, and the problem and option table of a decision (module docstring)."""

    #: Wrappers kept before they are all dropped (a job's wrapper is re-made, once, after that).
    MAX_WRAPPERS = 1 << 14

    def __init__(self) -> None:
        self._wrap: dict[int, tuple[Any, RestrictedThroughput]] = {}
        # job id -> (what to_model_job reads of its state, the model Job): a job whose state did not change
        # since the last decision (a queued job) keeps its Job; only the active jobs' entries are kept
        self._jobs: dict[str, tuple[tuple, Job]] = {}
        self._plain = _PlainRates()
        # job id -> (spec, progress accounting, its progress rate at its submitted (k, b)): the rate floors' base
        self._submitted: dict[str, tuple[Any, str, float | None]] = {}

    def _model_jobs(self, jobs: Sequence[JobState], restricted: list[bool], node_aware: bool,
                    types: tuple[str, ...]) -> tuple[tuple[Job, ...], np.ndarray, np.ndarray]:
        """``to_model_job`` of every job, re-using last decision's Job where only the remaining work changed.

        Also returns what the policy's restriction reads of the jobs (:func:`_keep`), from the same pass:
        ``fixed[j]`` = (restricted, GPUs now (0: queued), batch now, the type index its current option is
        kept on (-1: any type, a job with one model for every type; -2: none), submitted batch), and per
        running job, in job order, ``moving[i]`` = (remaining work, restart cost, seconds since its last
        change (inf: never), progress rate now (0 where unknown)).
        """
        old, new = self._jobs, {}
        wrap = self._wrapper
        out = []
        fixed: list[tuple] = []
        moving: list[tuple] = []
        tindex = {t: i for i, t in enumerate(types)}
        inf = math.inf
        isfinite = math.isfinite
        add_job, add_row, add_moving = out.append, fixed.append, moving.append
        for st, r in zip(jobs, restricted):
            spec = st.spec
            jid = spec.id
            rem = spec.total_samples - st.samples_done  # JobState.remaining_samples, inlined
            if rem < 0.0:
                rem = 0.0
            key = (spec, r, st.gpus, st.batch, st.gpu_type, st.placed if node_aware else None, st.restart_cost_s,
                   st.progress)
            hit = old.get(jid)
            if hit is None or hit[0] != key or not isfinite(rem):  # (an equal spec is the same job)
                job = to_model_job(st, None, nodes=node_aware, models=wrap if r else _base)
                running = st.is_running
                ctype = ((-1 if spec.throughputs is None else tindex.get(st.gpu_type, -2)) if running else -2)
                row = (r, st.gpus, st.batch, ctype, spec.batch_submitted)
                rate_now = (st.progress_per_s(st.gpus, st.batch) or 0.0) if running else 0.0
            else:
                job, row, rate_now = hit[1], hit[2], hit[3]
                left = rem if rem > 0 else None
                if job.remaining_samples != left:
                    # a running job that did not change: the same Job but for its remaining work (a finite
                    # number, checked above; 0 is None, as to_model_job writes it), no need to validate it again
                    fresh = object.__new__(Job)
                    fresh.__dict__.update(job.__dict__)
                    fresh.__dict__["remaining_samples"] = left
                    job = fresh
            new[jid] = (key, job, row, rate_now)
            add_job(job)
            add_row(row)
            if row[3] > -2:
                since = st.since_rescale_s
                add_moving((rem, st.restart_cost_s, inf if since is None else since, rate_now))
        self._jobs = new
        n = len(fixed)
        return (tuple(out), np.array(fixed, dtype=np.int64).reshape(n, 5),
                np.array(moving, dtype=np.float64).reshape(len(moving), 4))

    def _wrapper(self, model: Any) -> RestrictedThroughput:
        model = _base(model)
        hit = self._wrap.get(id(model))
        if hit is None or hit[0] is not model:
            if len(self._wrap) >= self.MAX_WRAPPERS:
                self._wrap.clear()
            hit = self._wrap[id(model)] = (model, RestrictedThroughput(model, _every))
        return hit[1]

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
        node_aware: bool = False,
        reduced: bool = False,
        queue: float = 0.0,
    ) -> OptionTable:
        """The option table of the problem :class:`~elasticopt.scheduling.policies.elastic.ElasticPolicy` builds.

        Parameters
        ----------
        jobs
            Active jobs, in problem order.
        cluster
            The cluster (any number of GPU types).
        objective, rescale_penalty, priority, allow_preemption, node_aware
            As in :class:`~elasticopt.models.Problem`.
        hysteresis
            Drop the changes of running jobs this rule does not allow (None: keep all).
        fixed_batch
            Keep only options at each job's submitted batch (a running job's current option always stays).
        reduced
            Return the reduced table (``compile_reduced``, what ``solve`` builds from the problem) instead.
        queue
            The queue's waiting value (:func:`~elasticopt.scheduling.hysteresis.queue_value`), which shortens
            the rule's shrink cool-down.
        """
        # the rule's rate floors (Hysteresis.floor) act on queued jobs under admission control, and on running
        # ones while the queue's value is unbounded
        queued_too = (hysteresis is not None and hysteresis.start_floor > 0
                      and any(st.spec.start_by_s is not None and not st.is_running for st in jobs))
        floors = queued_too or (hysteresis is not None and hysteresis.due_floor > 0 and math.isinf(queue))
        # the jobs the filter restricts: every job under a fixed batch; under the rule the running ones, and
        # the queued ones too where a start floor acts (a job whose floor is 0 keeps all its options)
        restricted = [fixed_batch or (hysteresis is not None and (queued_too or st.is_running)) for st in jobs]
        model_jobs, fixed, moving = self._model_jobs(jobs, restricted, node_aware, cluster.types)
        floor = self._floors(jobs, hysteresis, queue) if floors else None
        problem = Problem.assembled(cluster=cluster, jobs=model_jobs, objective=objective,
                                    allow_preemption=allow_preemption, rescale_penalty=rescale_penalty,
                                    priority=priority, node_aware=node_aware)
        compile = compile_reduced if reduced else compile_problem
        if not any(restricted):
            return compile(problem)
        return compile(problem, keep=lambda rows: _keep(rows, jobs, fixed, moving, hysteresis, fixed_batch, queue,
                                                        node_aware, self._plain, floor))

    def _floors(self, jobs: Sequence[JobState], rule: Hysteresis, queue: float) -> np.ndarray:
        """Every job's rate floor (:meth:`Hysteresis.floor`), its submitted rate asked once per job."""
        old, new = self._submitted, {}
        out = np.zeros(len(jobs))
        for i, st in enumerate(jobs):
            spec = st.spec
            hit = old.get(spec.id)
            if hit is None or hit[0] is not spec or hit[1] != st.progress:
                hit = (spec, st.progress,
                       st.progress_per_s(spec.submitted_gpus, spec.batch_submitted, spec.submitted_type))
            new[spec.id] = hit
            out[i] = rule.floor(st, queue, hit[2])
        self._submitted = new
        return out


class _PlainRates:
    """Per running job, its options' rates as its model states them (not node-aware), kept across decisions.

    A node-aware table carries each multi-GPU option's spread or packed rate; the anti-thrashing rule
    reads the job's model rate (``JobState.progress_per_s``, as the compiled path's filter does).  A job's
    options come in the same order at every decision while its model, limits and the pools stay, so
    its rates are asked once and re-used while its (type, k, b) columns are unchanged.
    """

    def __init__(self) -> None:
        self._memo: dict[str, tuple[Any, bytes, np.ndarray]] = {}  # job id -> (spec, its (type, k, b) codes, rates)

    def rates(self, rows: OptionRows, jobs: Sequence[JobState], run: list[int], rate: np.ndarray) -> np.ndarray:
        """``rate`` (the running jobs' options, in ``rows`` order) with every multi-GPU option's model rate."""
        out = rate.copy()
        bounds = np.searchsorted(rows.job, np.repeat(np.asarray(run, np.int64), 2),
                                 side="left").reshape(-1, 2)
        bounds[:, 1] = np.searchsorted(rows.job, run, side="right")
        # one int64 per option: (type, k, b), so a job's options compare as one byte string
        code = (rows.gpu_type.astype(np.int64) << 52) | (rows.gpus.astype(np.int64) << 32) | rows.batch
        memo, new = self._memo, {}
        pos = 0
        for i, (lo, hi) in zip(run, bounds.tolist()):
            spec = jobs[i].spec
            key = code[lo:hi].tobytes()
            hit = memo.get(spec.id)
            if hit is None or hit[0] is not spec or hit[1] != key:
                types = rows.types
                vals = np.array([np.nan if kk < 2 else _rate(spec, types[ty], kk, bb) for ty, kk, bb in
                                 zip(rows.gpu_type[lo:hi].tolist(), rows.gpus[lo:hi].tolist(),
                                     rows.batch[lo:hi].tolist())], dtype=np.float64)
                hit = (spec, key, vals)
            new[spec.id] = hit
            m = hi - lo
            seg = out[pos:pos + m]
            multi = rows.gpus[lo:hi] > 1  # one GPU: the row's rate is the model's
            seg[multi] = hit[2][multi]
            pos += m
        self._memo = new
        return out


def _rate(spec: Any, gpu_type: str, gpus: int, batch: int) -> float:
    model = spec.throughput if spec.throughputs is None else spec.model_for(gpu_type)
    t = model.samples_per_s(gpus, batch)
    return np.nan if t is None else float(t)


def _keep(rows: OptionRows, jobs: Sequence[JobState], a: np.ndarray, per: np.ndarray, rule: Hysteresis | None,
          fixed_batch: bool, queue: float = 0.0, node_aware: bool = False,
          plain: _PlainRates | None = None, floor: np.ndarray | None = None) -> np.ndarray:
    """The options the policy's filter keeps (``ElasticPolicy.option_filter``, as ``to_model_job`` applies it).

    ``a[j]`` = (restricted, GPUs now, batch now, type index of the current option (-1 any, -2 none),
    submitted batch) and ``per[i]`` = (remaining work, restart cost, seconds since its last change,
    progress rate now) of the i-th running job (:meth:`TypedCompile._model_jobs`); ``floor[j]``: job j's
    rate floor (:meth:`Hysteresis.floor`; None: none).
    """
    n = len(jobs)
    out = np.ones(rows.job.size, bool)
    sel = np.flatnonzero(a[rows.job, 0])  # the options of restricted jobs: only they can be dropped
    if not sel.size:
        return out
    j = rows.job[sel]
    k, b = rows.gpus[sel], rows.batch[sel]
    ctype = a[j, 3]
    running = ctype > -2
    cur = running & (k == a[j, 1]) & (b == a[j, 2]) & ((ctype == -1) | (rows.gpu_type[sel] == ctype))
    ok = np.ones(sel.size, bool)
    if fixed_batch:
        ok &= b == a[j, 4]
    run = np.flatnonzero(a[:, 3] > -2)  # the running jobs
    # the jobs whose options the rule reads: the running ones, and the restricted ones with a rate floor
    read = run if floor is None else np.flatnonzero((a[:, 3] > -2) | ((floor > 0) & a[:, 0].astype(bool)))
    if rule is not None and read.size:
        pos = np.full(n, -1, np.int64)
        pos[read] = np.arange(read.size)
        at = np.flatnonzero(pos[j] >= 0)  # the options of those jobs, in rows order
        jr = pos[j[at]]
        # the rule's progress rate of each option: samples/s of the job's (unrestricted) model on its type, which
        # the wrapped rows carry (a node-aware table's multi-GPU options carry their spread or packed rate
        # instead: _PlainRates), times E(b) under goodput accounting
        rate = rows.samples_per_s[sel[at]]
        if plain is not None and (node_aware or rows.packed.any()):
            rate = plain.rates(rows, jobs, read.tolist(), rate)
        for i in read.tolist():
            st = jobs[i]
            if st.progress == "goodput" and st.spec.statistical_efficiency is not None:
                eff = st.spec.statistical_efficiency
                for o in np.flatnonzero(jr == pos[i]).tolist():
                    rate[o] = rate[o] * float(eff(int(b[at[o]])))
        if run.size:
            on = running[at]  # the options of running jobs among them
            ar = at[on]
            rpos = np.full(n, -1, np.int64)
            rpos[run] = np.arange(run.size)
            jrr = rpos[j[ar]]
            allowed = rule.allows_array(k[ar][:, None].astype(np.float64), rate[on][:, None],
                                        a[run, 1][jrr].astype(np.float64), per[jrr, 0], per[jrr, 1], per[jrr, 3],
                                        np.ones(ar.size, bool), per[jrr, 2], queue)[:, 0]
            ok[ar] &= allowed
        if floor is not None:
            low = floor[j[at]]
            ok[at] &= (rate >= low) | (low <= 0)
    out[sel] = cur | ok
    return out
