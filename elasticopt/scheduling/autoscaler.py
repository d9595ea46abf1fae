"""The autoscaler: events -> policy -> actions -> executor (docs/design.md §4).

It reacts to job arrivals (:meth:`Autoscaler.submit`), completions and
failures (executor callbacks) and optional periodic ticks
(:meth:`Autoscaler.tick`).  At each, it takes a :class:`Snapshot`, asks the
policy for a target, checks it (capacity, feasibility), vetoes rescales that
would not pay back their restart cost, orders the changes so GPUs are
released before they are taken (:func:`plan_actions`) and applies them to the
executor.  It cannot tell a simulated executor from a real one.  Jobs an
earlier driver already ran (a restarted launcher) are taken over with
:meth:`Autoscaler.adopt` and :meth:`Autoscaler.adopt_finished`
(checked and built by :mod:`elasticopt.scheduling.adoption`, which does not
import this module).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from elasticopt.errors import ValidationError
from elasticopt.models import Cluster
from elasticopt.scheduling.actions import Action, Option, Placed, plan_actions
from elasticopt.scheduling.adoption import adopted_track, check_finished, finished_track
from elasticopt.scheduling.checks import check_allocation, target_types
from elasticopt.scheduling.executor import Executor, Phase
from elasticopt.scheduling.jobspec import JobSpec
from elasticopt.scheduling.hysteresis import DEFAULT_HYSTERESIS, Hysteresis
from elasticopt.scheduling.policies.base import Policy
from elasticopt.scheduling.placing import order_for_gpus, place_targets
from elasticopt.scheduling.records import JobRecord, TimelinePoint
from elasticopt.scheduling.state import PROGRESS_UNITS, Allocation, JobState, Snapshot, cached
from elasticopt.scheduling.tracking import JobHistory, JobTrack

__all__ = ["Autoscaler", "Decision", "JobHistory", "check_allocation"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Decision:
    """One scheduling round.

    ``decision_s`` is the wall time of ``policy.allocate`` (problem build +
    solve); ``solver_s`` what the solver itself reported.  ``vetoed`` lists
    the jobs whose planned rescale was cancelled by the payback rule.
    """

    time_s: float
    reason: str
    queued: int
    running: int
    decision_s: float
    solver_s: float
    actions: tuple[Action, ...]
    vetoed: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()


class Autoscaler:
    """Drives an :class:`Executor` with a :class:`Policy`.

    Parameters
    ----------
    executor
        Simulated or real; the autoscaler registers itself as its listener.
    cluster
        The GPUs it may hand out.
    policy
        Any object with ``allocate(snapshot) -> Allocation``.
    restart_cost_s
        Default seconds without progress charged at every start and rescale
        (a job's own ``JobSpec.restart_cost_s`` wins); passed to the executor
        in the job spec.
    payback
        Veto any change of a running job that the hysteresis rule does not
        allow (:class:`~elasticopt.scheduling.hysteresis.Hysteresis`).
    payback_margin
        Deprecated spelling of ``hysteresis.payback_factor`` (used when
        ``hysteresis`` is None).
    hysteresis
        The anti-thrashing rule (default
        :data:`~elasticopt.scheduling.hysteresis.DEFAULT_HYSTERESIS`).
    progress
        ``"samples"`` (default) or ``"goodput"``: the unit of the executor's
        ``samples_done`` and of the jobs' ``total_samples`` (effective
        samples, :class:`~elasticopt.scheduling.state.JobState`); snapshots
        carry it so rates and the rule use the same unit.
    on_decision
        Optional callback after every decision.
    """

    def __init__(
        self,
        executor: Executor,
        cluster: Cluster,
        policy: Policy,
        *,
        restart_cost_s: float = 30.0,
        payback: bool = True,
        payback_margin: float | None = None,
        hysteresis: Hysteresis | None = None,
        progress: str = "samples",
        on_decision: Callable[[Decision], None] | None = None,
    ):
        if restart_cost_s < 0:
            raise ValidationError("restart_cost_s", "a number >= 0", restart_cost_s)
        if progress not in PROGRESS_UNITS:
            raise ValidationError("progress", " or ".join(map(repr, PROGRESS_UNITS)), progress)
        self.progress = progress
        self.executor = executor
        self.cluster = cluster
        self.policy = policy
        self.restart_cost_s = float(restart_cost_s)
        self.payback = payback
        if hysteresis is None:
            hysteresis = DEFAULT_HYSTERESIS
            if payback_margin is not None:
                hysteresis = dataclasses.replace(hysteresis, payback_factor=float(payback_margin))
        self.hysteresis = hysteresis
        self.on_decision = on_decision
        self.decisions: list[Decision] = []
        self.timeline: list[TimelinePoint] = []
        self.measured: dict[str, dict[Option, float]] = {}
        self._tracks: dict[str, JobTrack] = {}
        self._active: dict[str, None] = {}  # insertion (arrival) order
        self._lock = threading.RLock()
        self._busy = False
        self._again: str | None = None
        executor.set_listener(self)

    # ---- events -------------------------------------------------------
    def submit(self, spec: JobSpec, *, reschedule: bool = True) -> Decision | None:
        """A job arrives; reschedule unless ``reschedule=False`` (batching arrivals)."""
        with self._lock:
            spec = self._prepare(spec)
            self._tracks[spec.id] = JobTrack(spec=spec, alloc_since_s=self.executor.now_s())
            self._active[spec.id] = None
            return self.reschedule("arrival") if reschedule else None

    def _prepare(self, spec: JobSpec) -> JobSpec:
        if spec.id in self._tracks:
            raise ValidationError(f"job {spec.id!r}", "a job id not submitted before", spec.id)
        return dataclasses.replace(
            spec,
            throughput=cached(spec.throughput),
            throughputs=None if spec.throughputs is None else {t: cached(m) for t, m in spec.throughputs.items()},
            restart_cost_s=self.restart_cost_s if spec.restart_cost_s is None else spec.restart_cost_s,
        )

    def submit_many(self, specs: Iterable[JobSpec]) -> Decision | None:
        """Several jobs arrive at once: one decision for all of them."""
        with self._lock:
            for spec in specs:
                self.submit(spec, reschedule=False)
            return self.reschedule("arrival")

    def tick(self) -> Decision | None:
        """A periodic re-decision."""
        return self.reschedule("tick")

    def on_completed(self, job_id: str, time_s: float) -> None:
        """Executor callback: the job processed all its samples."""
        self._finish(job_id, time_s, "completed")

    def on_failed(self, job_id: str, time_s: float, reason: str) -> None:
        """Executor callback: the job failed for good."""
        log.warning("job %s failed at %.1fs: %s", job_id, time_s, reason)
        self._finish(job_id, time_s, "failed")

    def on_throughput(self, job_id: str, gpus: int, batch: int, samples_per_s: float) -> None:
        """Executor callback: a measured rate, kept in :attr:`measured`."""
        with self._lock:
            self.measured.setdefault(job_id, {})[(gpus, batch)] = samples_per_s

    def drop(self, job_ids: Iterable[str], time_s: float | None = None) -> list[str]:
        """Drop queued jobs that never started: they leave the system unserved (status ``dropped``).

        Admission control (an admission deadline, a bounded queue: the simulator's
        ``SimulationConfig.admission_deadline_s`` and ``queue_limit``).  A dropped job held no GPUs, so
        nothing is re-decided.  Returns the ids dropped, in the order given.

        Raises
        ------
        ValidationError
            A job id that is not active, or a job that holds GPUs or has run before.
        """
        with self._lock:
            now = self.executor.now_s() if time_s is None else float(time_s)
            out = []
            for jid in job_ids:
                tr = self._tracks.get(jid)
                if tr is None or jid not in self._active:
                    raise ValidationError(f"drop: job {jid!r}", "an active (queued) job id", jid)
                if tr.alloc is not None or tr.first_start_s is not None:
                    raise ValidationError(f"drop: job {jid!r}", "a queued job that never started",
                                          f"a job that started at t={tr.first_start_s}")
                tr.status = "dropped"
                tr.dropped_s = now
                tr.samples_done = 0.0
                del self._active[jid]
                out.append(jid)
            return out

    def may_drop(self, job_id: str) -> bool:
        """Whether ``job_id`` is active and has never held GPUs (:meth:`drop` accepts it)."""
        with self._lock:
            tr = self._tracks.get(job_id)
            return tr is not None and job_id in self._active and tr.alloc is None and tr.first_start_s is None

    def never_started(self) -> list[str]:
        """Ids of the active jobs that have never held GPUs, in arrival order (those :meth:`drop` accepts)."""
        with self._lock:
            return [j for j in self._active if self._tracks[j].alloc is None and self._tracks[j].first_start_s is None]

    def _finish(self, job_id: str, time_s: float, status: str) -> None:
        with self._lock:
            tr = self._tracks.get(job_id)
            if tr is None or job_id not in self._active:
                return
            self._set_alloc(tr, None, time_s)
            tr.status = status
            tr.completion_s = time_s if status == "completed" else None
            tr.samples_done = tr.spec.total_samples if status == "completed" else self._done(job_id)
            del self._active[job_id]
            self.reschedule(status)

    # ---- state --------------------------------------------------------
    def _done(self, job_id: str) -> float:
        return float(self.executor.progress(job_id).samples_done)

    def snapshot(self) -> Snapshot:
        """The active jobs as the executor reports them, in arrival order."""
        with self._lock:
            now = self.executor.now_s()
            states = []
            places = self.executor.places_gpus
            for jid in self._active:
                tr = self._tracks[jid]
                p = self.executor.progress(jid)
                phase = p.phase if p.gpus > 0 else Phase.QUEUED
                placed = self.executor.placement(jid) if places and p.gpus > 0 else None  # type: ignore[attr-defined]
                states.append(
                    JobState(
                        spec=tr.spec,
                        phase=phase,
                        gpus=p.gpus,
                        batch=p.batch,
                        samples_done=float(p.samples_done),
                        since_rescale_s=None if tr.last_change_s is None else now - tr.last_change_s,
                        restart_cost_s=float(tr.spec.restart_cost_s or 0.0),
                        progress=self.progress,
                        gpu_type=None if placed is None else placed[0],
                        placed=placed,
                    )
                )
            return Snapshot(time_s=now, cluster=self.cluster, jobs=tuple(states))

    @property
    def active_ids(self) -> tuple[str, ...]:
        """Ids of the jobs not yet completed or failed, in arrival order."""
        return tuple(self._active)

    @property
    def gpus_in_use(self) -> int:
        """GPUs the autoscaler has handed out."""
        return sum(self._tracks[j].alloc[0] for j in self._active if self._tracks[j].alloc)

    def _set_alloc(self, tr: JobTrack, alloc: Option | None, now: float) -> None:
        tr.set_alloc(alloc, now)

    # ---- the decision -------------------------------------------------
    def reschedule(self, reason: str = "manual") -> Decision | None:
        """Ask the policy, check its target, apply the changes; returns the last decision."""
        with self._lock:
            if self._busy:  # an executor callback during our own actions: decide again after
                self._again = reason
                return None
            self._busy = True
            try:
                decision = self._decide(reason)
                while self._again is not None:
                    again, self._again = self._again, None
                    decision = self._decide(again)
            finally:
                self._busy = False
            return decision

    def _decide(self, reason: str) -> Decision:
        snap = self.snapshot()
        now = snap.time_s
        t0 = time.perf_counter()
        alloc = self.policy.allocate(snap) if snap.jobs else Allocation({})
        decision_s = time.perf_counter() - t0
        name = getattr(self.policy, "name", "policy")
        check_allocation(snap, alloc, name)
        current = {j.id: j.allocation for j in snap.jobs}
        target = {j.id: alloc.get(j.id) for j in snap.jobs}
        types = target_types(snap, alloc, name)
        vetoed = self._veto(snap, target, types) if self.payback else []
        order = {jid: i for i, jid in enumerate(self._active)}
        if self.executor.places_gpus:
            actions = self._placed_actions(snap, alloc, target, types, order)
        else:
            actions = plan_actions(current, target, order)
        failed = []
        for act in actions:
            if not self._apply(act, now):
                failed.append(act.job_id)
        d = Decision(
            time_s=now,
            reason=reason,
            queued=sum(1 for j in self._active if self._tracks[j].alloc is None),
            running=sum(1 for j in self._active if self._tracks[j].alloc is not None),
            decision_s=decision_s,
            solver_s=float(alloc.solver_s),
            actions=tuple(actions),
            vetoed=tuple(vetoed),
            failed=tuple(failed),
        )
        self.decisions.append(d)
        self.timeline.append(TimelinePoint(now, self.gpus_in_use, d.running, d.queued))
        if self.on_decision is not None:
            self.on_decision(d)
        return d

    def _veto(self, snap: Snapshot, target: dict[str, Option | None], types: dict[str, str]) -> list[str]:
        vetoed = []
        for st in snap.running:
            tgt = target.get(st.id)
            if tgt is None or tgt[0] < st.gpus:
                continue  # stops and shrinks release GPUs the target may count on: never vetoed
            if not self.hysteresis.allows(st, tgt[0], tgt[1], types.get(st.id)):
                target[st.id] = st.allocation
                if st.gpu_type is not None:
                    types[st.id] = st.gpu_type
                vetoed.append(st.id)
        return vetoed

    def _placed_actions(self, snap: Snapshot, alloc: Allocation, target: dict[str, Option | None],
                        types: dict[str, str], order: dict[str, int]) -> list[Action]:
        """Actions that put every job on named GPUs (:mod:`~elasticopt.scheduling.placing`)."""
        held: dict[str, Placed] = {j.id: j.placed for j in snap.jobs if j.placed is not None}
        wants = {jid: (types[jid], kb[0], bool(alloc.packed.get(jid, False)))
                 for jid, kb in target.items() if kb is not None}
        placed = place_targets(self.cluster, wants, held, alloc.nodes)
        now = {j.id: (j.gpus, j.batch, j.placed) if j.placed is not None else None for j in snap.jobs}
        then = {jid: None if kb is None else (kb[0], kb[1], placed[jid]) for jid, kb in target.items()}
        return order_for_gpus(plan_actions(now, then, order), held)

    def _apply(self, act: Action, now: float) -> bool:
        tr = self._tracks[act.job_id]
        cost = float(tr.spec.restart_cost_s or 0.0)
        where = {} if act.placement is None else {"placement": act.placement}
        if act.kind == "start":
            ok = self.executor.start(tr.spec, act.gpus, act.batch, **where)
            if ok:
                tr.starts += 1
                tr.restart_s += cost
                if tr.first_start_s is None:
                    tr.first_start_s = now
        elif act.kind == "rescale":
            ok = self.executor.rescale(act.job_id, act.gpus, act.batch, **where)
            if ok:
                tr.rescales += 1
                tr.restart_s += cost
        else:
            ok = self.executor.stop(act.job_id)
            if ok:
                tr.stops += 1
        if ok:
            self._set_alloc(tr, None if act.kind == "stop" else (act.gpus, act.batch), now)
            tr.last_change_s = now
        else:
            log.warning("executor refused %s of job %s", act.kind, act.job_id)
        return ok

    # ---- results ------------------------------------------------------
    def records(self) -> list[JobRecord]:
        """One record per submitted job, in submission order (GPU-seconds up to now)."""
        with self._lock:
            now = self.executor.now_s()
            out = []
            for jid, tr in self._tracks.items():
                active = jid in self._active
                gpu_s = tr.gpu_s_at(now)
                done = self._done(jid) if active else tr.samples_done
                spec = tr.spec
                out.append(
                    JobRecord(
                        job_id=jid,
                        profile=spec.throughput.name,
                        status=tr.status,
                        arrival_s=spec.arrival_s,
                        first_start_s=tr.first_start_s,
                        completion_s=tr.completion_s,
                        total_samples=float(spec.total_samples),
                        samples_done=float(done),
                        submitted_gpus=spec.submitted_gpus,
                        submitted_batch=spec.batch_submitted,
                        final_gpus=tr.last_alloc[0] if tr.last_alloc else 0,
                        final_batch=tr.last_alloc[1] if tr.last_alloc else 0,
                        starts=tr.starts,
                        rescales=tr.rescales,
                        stops=tr.stops,
                        restart_s=tr.restart_s,
                        gpu_s=gpu_s,
                        dropped_s=tr.dropped_s,
                    )
                )
            return out

    # ---- taking over jobs of an earlier driver ------------------------
    def adopt(
        self,
        spec: JobSpec,
        gpus: int,
        batch: int,
        *,
        since_s: float | None = None,
        history: JobHistory = JobHistory(),
        reschedule: bool = False,
    ) -> Decision | None:
        """Take over a job the executor already has, without starting it.

        The job becomes active as if this autoscaler had started it: it
        counts in snapshots, decisions, :attr:`gpus_in_use` and records, and a
        later decision may rescale or stop it.  Its progress and phase are the
        executor's, which must report it holding exactly (gpus, batch).

        Parameters
        ----------
        spec
            The job (a new id for this autoscaler).
        gpus, batch
            Its current allocation; ``0, 0`` for a job queued at a checkpoint.
        since_s
            When that allocation began (GPU-seconds accrue from it); default now.
        history
            What happened before; ``first_start_s`` defaults to ``since_s`` and
            ``starts`` to at least 1 for a running job.
        reschedule
            Decide at once (default False: adopt every job, then decide).

        Raises
        ------
        ValidationError
            Known id, an allocation the executor does not report, a finished
            job, or ``since_s`` in the future.
        """
        with self._lock:
            spec = self._prepare(spec)
            self._tracks[spec.id] = adopted_track(self.executor, spec, gpus, batch, since_s, history)
            self._active[spec.id] = None
            return self.reschedule("adopt") if reschedule else None

    def adopt_finished(
        self,
        spec: JobSpec,
        status: str = "completed",
        *,
        completion_s: float | None = None,
        samples_done: float | None = None,
        history: JobHistory = JobHistory(),
    ) -> None:
        """Record a job that completed or failed before this autoscaler (records only, never active).

        Parameters
        ----------
        spec
            The job (a new id for this autoscaler).
        status
            ``"completed"`` or ``"failed"``.
        completion_s
            When it completed (required for a completed job, ignored otherwise).
        samples_done
            Samples processed; default all of them for a completed job, 0 otherwise.
        history
            What happened to it; ``last_alloc`` is reported as its final allocation.
        """
        check_finished(spec, status, completion_s)
        with self._lock:
            spec = self._prepare(spec)
            self._tracks[spec.id] = finished_track(
                spec, status, completion_s, samples_done, history, self.executor.now_s()
            )
