"""Event-driven cluster simulator: a heap of (time, kind, seq, event), deterministic for a seed.

Events are job arrivals (from the workload), completions (predicted by the
:class:`SimulatedExecutor` from each job's rate and re-predicted whenever its
allocation changes; stale predictions are recognised by the job's generation
and skipped), optional periodic ticks and admission deadlines.  At equal times
completions come first, then arrivals, then ticks, then deadlines (a job whose
deadline falls at a completion may still start on the GPUs it frees).
Arrivals at the same instant are submitted together (one decision).  The only
randomness is the optional per-job throughput noise (the true rate differs
from the scheduler's belief by a log-normal factor), drawn from
``numpy.random.default_rng(seed)``.

**Admission control** (``admission_deadline_s`` or a job's own
``JobSpec.start_by_s``, and ``queue_limit``): a job that has not started by its
deadline (after one more decision at it), or that is the newest of
more than ``queue_limit`` never-started jobs after an arrival's decision, is
*dropped*: it leaves the queue unserved (record status ``dropped``, metric
``dropped``).  Every submitted job then ends exactly one of completed, failed,
dropped or unfinished (running or queued at the horizon).
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from elasticopt.errors import ValidationError
from elasticopt.models import Cluster
from elasticopt.scheduling.autoscaler import Autoscaler, Decision
from elasticopt.scheduling.jobspec import JobSpec
from elasticopt.scheduling.hysteresis import Hysteresis
from elasticopt.scheduling.metrics import Metrics, compute_metrics
from elasticopt.scheduling.policies.base import Policy, get_policy
from elasticopt.scheduling.records import JobRecord, TimelinePoint
from elasticopt.scheduling.simulated import ScaledThroughput, Segment, SimulatedExecutor
from elasticopt.scheduling.state import PROGRESS_UNITS

__all__ = ["SimulationConfig", "SimulationResult", "simulate"]

_COMPLETE, _ARRIVAL, _TICK, _DEADLINE = 0, 1, 2, 3


@dataclass(frozen=True)
class SimulationConfig:
    """How to simulate.

    Parameters
    ----------
    gpus, gpus_per_node
        The cluster: one pool of ``gpus`` GPUs on nodes of ``gpus_per_node``.
    cluster
        Node pools per GPU type instead (``gpus`` must be their total GPUs),
        e.g. :func:`~elasticopt.scheduling.clusters.cluster_preset` ``("sia-64")``.
        Either way every job runs on named GPUs, checked GPU by GPU.
    restart_cost_s
        Seconds without progress at every start and rescale (jobs with their
        own ``restart_cost_s`` keep it).
    horizon_s
        Stop at this time (None: run until every job is done).
    tick_s
        Also re-decide every ``tick_s`` seconds (None: only on arrivals and
        completions).
    seed
        Seeds the throughput noise.
    throughput_noise
        Standard deviation of the log of the per-job factor between the true
        rate and the believed one (0 = the belief is exact).
    payback
        The autoscaler's anti-thrashing veto (and the policy's option filter).
    hysteresis
        The anti-thrashing rule (None: :data:`~elasticopt.scheduling.hysteresis.DEFAULT_HYSTERESIS`);
        given to the autoscaler and to policies that accept it.
    progress
        ``"samples"``: a job is done after ``total_samples`` samples (the seed
        paper's assumption: any batch in range is as good); ``"goodput"``:
        after ``total_samples`` *effective* samples, each sample at batch b
        worth E(b) (statistical efficiency).
    node_aware
        A job of a node-aware profile runs at its rate on the nodes it spans
        (packed or spread), and policies that accept ``node_aware`` are given
        it (they then choose packed or spread options).
    admission_deadline_s
        Drop a job that has not started this many seconds after its arrival
        (its ``JobSpec.start_by_s``, unless it has its own; None: wait forever).
        At its deadline a waiting job gets one more decision, in which the
        anti-thrashing rule counts it as waiting without bound, before it is
        dropped.
    queue_limit
        Keep at most this many never-started jobs waiting: after the decision
        at an arrival, the newest ones beyond it are dropped (None: unbounded;
        0: a job that cannot start at once is dropped).
    """

    gpus: int
    gpus_per_node: int = 8
    restart_cost_s: float = 30.0
    horizon_s: float | None = None
    tick_s: float | None = None
    seed: int = 0
    throughput_noise: float = 0.0
    payback: bool = True
    hysteresis: Hysteresis | None = None
    progress: str = "samples"
    cluster: Cluster | None = None
    node_aware: bool = False
    admission_deadline_s: float | None = None
    queue_limit: int | None = None

    def __post_init__(self) -> None:
        if self.progress not in PROGRESS_UNITS:
            raise ValidationError("progress", " or ".join(map(repr, PROGRESS_UNITS)), self.progress)
        if self.horizon_s is not None and not self.horizon_s > 0:
            raise ValidationError("horizon_s", "a number > 0 or None", self.horizon_s)
        if self.tick_s is not None and not self.tick_s > 0:
            raise ValidationError("tick_s", "a number > 0 or None", self.tick_s)
        if self.admission_deadline_s is not None and not (
                isinstance(self.admission_deadline_s, (int, float)) and self.admission_deadline_s >= 0):
            raise ValidationError("admission_deadline_s", "a number of seconds >= 0 or None", self.admission_deadline_s)
        if self.queue_limit is not None and not (
                isinstance(self.queue_limit, int) and not isinstance(self.queue_limit, bool) and self.queue_limit >= 0):
            raise ValidationError("queue_limit", "an integer >= 0 or None", self.queue_limit)
        if isinstance(self.throughput_noise, bool) or not isinstance(self.throughput_noise, (int, float, np.number)) \
                or not 0 <= self.throughput_noise < math.inf:
            raise ValidationError("throughput_noise", "a finite number >= 0 (log-std; 0: exact belief)",
                                  self.throughput_noise)
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise ValidationError("seed", "an integer >= 0", self.seed)
        if self.cluster is not None and self.cluster.gpus != self.gpus:
            raise ValidationError("gpus", f"the cluster's GPUs ({self.cluster.gpus})", self.gpus)

    def the_cluster(self) -> Cluster:
        """The simulated cluster (``cluster``, or one pool of ``gpus`` GPUs)."""
        return self.cluster if self.cluster is not None else Cluster(self.gpus, self.gpus_per_node)


@dataclass(frozen=True)
class SimulationResult:
    """Everything one simulated run produced."""

    policy: str
    config: SimulationConfig
    records: tuple[JobRecord, ...]
    decisions: tuple[Decision, ...]
    timeline: tuple[TimelinePoint, ...]
    end_s: float
    wall_s: float
    metrics: Metrics
    segments: tuple[Segment, ...] = field(default=(), repr=False)


def check_checkpoint_every_s(value: object, path: str = "checkpoint_every_s") -> None:
    """The wall seconds between checkpoints: a finite number >= 0 (0: at every event), else
    :class:`ValidationError` at ``path``."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or not 0 <= value < math.inf:
        raise ValidationError(path, "a finite number of wall seconds >= 0 between checkpoints (0: every event)",
                              value)


def simulate(
    workload: Sequence[JobSpec],
    policy: Policy | str,
    config: SimulationConfig,
    *,
    policy_options: dict | None = None,
    true_throughput: Callable[[JobSpec], object] | None = None,
    progress: Callable[[int, int], None] | None = None,
    keep_segments: bool = False,
    on_decision: Callable[[Decision, Autoscaler], None] | None = None,
    checkpoint: Callable[[dict], None] | None = None,
    checkpoint_every_s: float = 60.0,
    resume: dict | None = None,
) -> SimulationResult:
    """Simulate a workload under one policy.

    Parameters
    ----------
    workload
        The jobs (any order; ``arrival_s`` decides).
    policy
        A policy object, or a name / ``module:Class`` for :func:`get_policy`.
    config
        Cluster and simulation settings.
    policy_options
        Keyword options for :func:`get_policy` when ``policy`` is a name.
    true_throughput
        Overrides the true-rate model per job (default: the belief, times the
        noise factor when ``config.throughput_noise > 0``).
    progress
        Called as ``progress(jobs_finished, jobs_total)`` after each completion and drop.
    keep_segments
        Return every job's (gpus, batch) stretches in the result.
    on_decision
        Called as ``on_decision(decision, autoscaler)`` after every decision
        (checks, live plots).
    checkpoint
        Called as ``checkpoint(state)`` between events, every
        ``checkpoint_every_s`` seconds of wall time: ``state`` is the whole run
        (event heap, executor, autoscaler, policy, counters); pickle it at once
        (:mod:`elasticopt.scheduling.checkpoint`) to resume after a crash.
    resume
        A ``state`` given to ``checkpoint`` by an earlier run of the same
        workload and config: continue from it (the run's result is the same as
        an uninterrupted one's, wall time aside).
    """
    if checkpoint is not None:
        check_checkpoint_every_s(checkpoint_every_s)
    wall0 = time.perf_counter()
    if resume is not None:
        policy = resume["policy"]
    elif isinstance(policy, str):
        opts = {"payback": config.payback, **({"hysteresis": config.hysteresis} if config.hysteresis else {}),
                **({"node_aware": True} if config.node_aware else {})}
        policy = get_policy(policy, **{**opts, **(policy_options or {})})
    ids = [j.id for j in workload]
    if len(set(ids)) != len(ids):
        raise ValidationError("workload", "unique job ids", next(i for i in ids if ids.count(i) > 1))
    if true_throughput is None and config.throughput_noise > 0:
        rng = np.random.default_rng(config.seed)
        factors = dict(zip(ids, np.exp(rng.normal(0.0, config.throughput_noise, len(ids))).tolist()))
        true_throughput = functools.partial(_noisy, factors)  # a partial, not a lambda: checkpoints pickle it
    cluster = config.the_cluster()
    executor = SimulatedExecutor(true_throughput=true_throughput, record_segments=True, progress=config.progress,
                                 cluster=cluster, node_aware=config.node_aware)
    scaler = Autoscaler(
        executor, cluster, policy, restart_cost_s=config.restart_cost_s, payback=config.payback,
        hysteresis=config.hysteresis, progress=config.progress,
    )  # fmt: skip
    heap: list[tuple] = []
    seq = 0
    deadline = config.admission_deadline_s
    for spec in workload:  # seq keeps the workload's order among equal arrival times
        if deadline is not None and spec.start_by_s is None:
            spec = dataclasses.replace(spec, start_by_s=float(spec.arrival_s) + float(deadline))
        heap.append((float(spec.arrival_s), _ARRIVAL, seq, spec))
        seq += 1
        if spec.start_by_s is not None:
            heap.append((max(float(spec.start_by_s), float(spec.arrival_s)), _DEADLINE, seq, spec.id))
            seq += 1
    heapq.heapify(heap)
    if config.tick_s is not None:
        heapq.heappush(heap, (config.tick_s, _TICK, seq, None))
        seq += 1
    horizon = config.horizon_s if config.horizon_s is not None else math.inf
    total = len(workload)
    finished = 0
    arrivals_left = total
    last_t = 0.0
    wall_before = 0.0
    if resume is not None:
        heap, executor, scaler, seq = resume["heap"], resume["executor"], resume["scaler"], resume["seq"]
        finished, arrivals_left, last_t = resume["finished"], resume["arrivals_left"], resume["last_t"]
        wall_before = resume["wall_s"]
    if on_decision is not None:
        scaler.on_decision = lambda d: on_decision(d, scaler)
    saved_at = time.perf_counter()
    while heap:
        if checkpoint is not None and time.perf_counter() - saved_at >= checkpoint_every_s:
            hook, scaler.on_decision = scaler.on_decision, None
            checkpoint({"heap": heap, "executor": executor, "scaler": scaler, "policy": policy, "seq": seq,
                        "finished": finished, "arrivals_left": arrivals_left, "last_t": last_t,
                        "wall_s": wall_before + time.perf_counter() - wall0})
            scaler.on_decision = hook
            saved_at = time.perf_counter()
        t, kind, _, payload = heapq.heappop(heap)
        if t > horizon:
            break
        if kind == _COMPLETE and executor.generation(payload[0]) != payload[1]:
            continue  # stale prediction of an older allocation: not an event, the clock does not move
        if kind == _DEADLINE and not scaler.may_drop(payload):
            continue  # the job started or left before its deadline: not an event either
        executor.set_time(t)
        last_t = t
        if kind == _ARRIVAL:
            batch = [payload]
            while heap and heap[0][0] == t and heap[0][1] == _ARRIVAL:
                batch.append(heapq.heappop(heap)[3])
            arrivals_left -= len(batch)
            scaler.submit_many(batch)
            if config.queue_limit is not None:
                waiting_ids = scaler.never_started()
                if len(waiting_ids) > config.queue_limit:  # the newest arrivals beyond the bound
                    finished += len(scaler.drop(waiting_ids[config.queue_limit:][::-1], t))
                    if progress is not None:
                        progress(finished, total)
        elif kind == _COMPLETE:
            job_id, _gen = payload
            executor.complete(job_id)  # the autoscaler reschedules from its callback
            finished += 1
            if progress is not None:
                progress(finished, total)
        elif kind == _DEADLINE:
            scaler.reschedule("deadline")  # a last decision, in which the job counts as waiting without bound
            for jid in sorted(executor.pop_changed()):
                ct = executor.completion_time(jid)
                if ct is not None:
                    heapq.heappush(heap, (max(ct, t), _COMPLETE, seq, (jid, executor.generation(jid))))
                    seq += 1
            if not scaler.may_drop(payload):
                continue
            scaler.drop([payload], t)
            finished += 1
            if progress is not None:
                progress(finished, total)
            continue
        else:
            if not scaler.active_ids and arrivals_left == 0:
                continue
            scaler.tick()
            heapq.heappush(heap, (t + config.tick_s, _TICK, seq, None))
            seq += 1
        for jid in sorted(executor.pop_changed()):
            ct = executor.completion_time(jid)
            if ct is not None:
                heapq.heappush(heap, (max(ct, t), _COMPLETE, seq, (jid, executor.generation(jid))))
                seq += 1
    end_s = horizon if (math.isfinite(horizon) and scaler.active_ids) else last_t
    if math.isfinite(horizon) and end_s > executor.now_s():
        executor.set_time(end_s)
    records = tuple(scaler.records())
    decisions = tuple(scaler.decisions)
    timeline = tuple(scaler.timeline)
    metrics = compute_metrics(records, timeline, decisions, cluster.gpus, end_s)
    return SimulationResult(
        policy=getattr(policy, "name", type(policy).__name__),
        config=config,
        records=records,
        decisions=decisions,
        timeline=timeline,
        end_s=end_s,
        wall_s=wall_before + time.perf_counter() - wall0,
        metrics=metrics,
        segments=tuple(executor.segments()) if keep_segments else (),
    )


def _noisy(factors: dict, spec: JobSpec) -> ScaledThroughput:
    """The true rate of a job under throughput noise: its belief times its drawn factor."""
    return ScaledThroughput(spec.throughput, factors[spec.id])
