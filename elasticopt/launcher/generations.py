"""The launcher's executor: real training generations driven by the autoscaler, whatever runs them.

:class:`GenerationExecutor` implements :class:`~elasticopt.scheduling.executor.Executor`
with one worker group per job *generation*; a backend starts them
(:class:`GenerationBackend`: new ``torchrun`` processes in
:mod:`elasticopt.launcher.torchrun`, warm Ray actors in
:mod:`elasticopt.launcher.ray_backend`):

- ``start(job, k, b)`` queues generation 1 (or the job's next one, resuming
  from its checkpoint when it was stopped before);
- ``rescale(job, k, b)`` asks the running generation to stop (control file:
  every rank stops at the same step and rank 0 checkpoints), then, once it has
  exited and k devices are free, starts the next generation with the new k
  and b, which resumes from that checkpoint;
- ``stop(job)`` does the same without the restart: the job goes back to the
  queue holding its checkpoint.

Calls never block: the driver calls :meth:`GenerationExecutor.poll`
regularly, which reads the generations' status files, reaps exits, starts
pending generations and makes every listener callback (never from inside
start/rescale/stop).  A backend (:mod:`elasticopt.launcher.backend`) starts the
generations; where a job is between generations is the state machine
of :mod:`elasticopt.launcher.launch_state`.  Everything that must survive the
launcher goes to the :class:`~elasticopt.launcher.journal.Journal` first;
:meth:`GenerationExecutor.recover` finds the jobs of a killed launcher again.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from elasticopt.launcher.backend import GenerationBackend
from elasticopt.launcher.devices import DevicePool
from elasticopt.launcher.launch_state import LaunchState, LaunchedJob, StopMode
from elasticopt.launcher.journal import Journal
from elasticopt.launcher.observed import ObservedThroughput
from elasticopt.launcher.protocol import (
    GenerationSpec,
    GenerationStatus,
    RunState,
    latest_checkpoint_samples,
    read_spec,
    read_status,
    request_stop,
    torn_checkpoint_samples,
)
from elasticopt.launcher.recovery import JournalEnd, RecoveredJob, recovered_jobs
from elasticopt.scheduling.executor import Executor, JobProgress, Phase
from elasticopt.scheduling.jobspec import JobSpec

__all__ = ["GenerationExecutor"]

log = logging.getLogger(__name__)


class GenerationExecutor(Executor):
    """Runs each job as successive generations started by ``backend``.

    Parameters
    ----------
    out_dir
        Run directory: ``journal.jsonl`` and ``jobs/<id>/`` live here.
    pool
        The devices to hand out.
    backend
        What starts a generation (:class:`~elasticopt.launcher.backend.GenerationBackend`).
    stop_timeout_s
        A generation asked to stop that has not exited after this long is
        killed (its progress since the last checkpoint is lost and counted).
    max_restarts
        Crashes after progress that are retried from the last checkpoint;
        one more fails the job.  A crash before the first step fails it at once.
    exit_grace_s
        Once rank 0 reported its final state (stopped or completed, after its
        last checkpoint), the generation gets this long to exit by itself
        before it is killed (torchrun's own shutdown takes seconds).
    checkpoint_every_s
        Default periodic checkpoint interval passed to the job (payload key
        ``checkpoint_every_s`` overrides).
    clock
        Wall clock (unix seconds), injectable for tests.
    """

    def __init__(
        self,
        out_dir: str | os.PathLike[str],
        pool: DevicePool,
        backend: GenerationBackend,
        *,
        stop_timeout_s: float = 120.0,
        max_restarts: int = 3,
        checkpoint_every_s: float = 30.0,
        exit_grace_s: float = 0.2,
        clock: Callable[[], float] = time.time,
    ):
        self.out_dir = Path(out_dir)
        self.pool = pool
        self.backend = backend
        self.stop_timeout_s = stop_timeout_s
        self.max_restarts = max_restarts
        self.checkpoint_every_s = checkpoint_every_s
        self.exit_grace_s = exit_grace_s
        self.clock = clock
        self.journal = Journal(self.out_dir / "journal.jsonl")
        self.jobs: dict[str, LaunchedJob] = {}
        self._launch_queue: list[str] = []
        self._events: list[tuple[str, tuple]] = []

    # ------------------------------------------------------------------ helpers
    def now_s(self) -> float:
        """Seconds since the run began (the journal's origin, kept across restarts)."""
        return self.clock() - self.journal.t0

    def _register(self, spec: JobSpec) -> LaunchedJob:
        payload = dict(spec.payload)
        payload.setdefault("job_dir", str(self.out_dir / "jobs" / spec.id))
        model = spec.throughput if isinstance(spec.throughput, ObservedThroughput) else ObservedThroughput(spec.throughput)
        for (k, b), t in self.journal.state.job(spec.id).throughput.items():
            if (k, b) not in model.observed:
                model.observe(k, b, t)
        job = LaunchedJob(dataclasses.replace(spec, payload=payload, throughput=model))
        self.jobs[spec.id] = job
        return job

    def job_spec(self, job_id: str) -> JobSpec:
        """The spec the launcher runs (its throughput model learns online)."""
        return self.jobs[job_id].spec

    def _ignored(self, job_id: str, action: str) -> bool:
        job = self.jobs.get(job_id)
        if job is None:
            log.warning("%s(%s) ignored: unknown job", action, job_id)
            return True
        if job.finished:
            log.info("%s(%s) ignored: the job has %s", action, job_id, job.state.value)
            return True
        return False

    def _emit(self, name: str, *args: object) -> None:
        self._events.append((name, args))

    def _queue_launch(self, job: LaunchedJob, gpus: int, batch: int) -> None:
        job.pending = (gpus, batch)
        if job.spec.id not in self._launch_queue:
            self._launch_queue.append(job.spec.id)

    def _fail(self, job: LaunchedJob, reason: str) -> None:
        job.move(LaunchState.FAILED)
        job.message = reason
        job.pending = None
        job.gpus = job.batch = 0
        job.account.end_s = self.now_s()
        self.pool.release(job.spec.id)
        self.journal.append({"event": "failed", "job_id": job.spec.id, "reason": reason})
        log.error("job %s failed: %s", job.spec.id, reason)
        self._emit("on_failed", job.spec.id, self.now_s(), reason)

    # --------------------------------------------------------------- interface
    def start(self, job: JobSpec, gpus: int, batch: int) -> bool:
        state = self.jobs.get(job.id)
        if state is None:
            state = self._register(job)
        elif self._ignored(job.id, "start"):
            return False
        if state.state is not LaunchState.QUEUED:
            return self.rescale(job.id, gpus, batch)
        script = state.spec.payload.get("script")
        if not script or not Path(script).is_file():
            self._fail(state, f"job script not found: {script!r}")
            return True
        state.gpus, state.batch = gpus, batch
        state.move(LaunchState.PENDING)
        state.stop_mode = None
        self._queue_launch(state, gpus, batch)
        return True

    def rescale(self, job_id: str, gpus: int, batch: int) -> bool:
        if self._ignored(job_id, "rescale"):
            return False
        job = self.jobs[job_id]
        running = job.state in (LaunchState.STARTING, LaunchState.RUNNING)
        if running and (job.gpus, job.batch) == (gpus, batch):
            return True
        if running:
            job.account.rescales += 1
        job.gpus, job.batch = gpus, batch
        self._queue_launch(job, gpus, batch)
        if job.live:
            self._request_stop(job, StopMode.RESCALE)
        else:
            job.move(LaunchState.PENDING)
        return True

    def stop(self, job_id: str) -> bool:
        if self._ignored(job_id, "stop"):
            return False
        job = self.jobs[job_id]
        job.pending = None
        if job_id in self._launch_queue:
            self._launch_queue.remove(job_id)
        job.gpus = job.batch = 0
        if job.live:
            self._request_stop(job, StopMode.PREEMPT)
        elif job.state is LaunchState.PENDING:
            job.move(LaunchState.QUEUED)
        return True

    def progress(self, job_id: str) -> JobProgress:
        job = self.jobs.get(job_id)
        if job is None:  # submitted, never started
            return JobProgress(job_id, Phase.QUEUED, 0, 0, 0.0, None)
        a = job.account
        return JobProgress(job_id, job.phase, job.gpus, job.batch, a.samples_done, a.samples_per_s,
                           job.generation, job.message)  # fmt: skip

    def _request_stop(self, job: LaunchedJob, mode: StopMode) -> None:
        assert job.handle is not None
        job.move(LaunchState.STOPPING)
        job.stop_mode = mode
        if job.stop_requested_at is None:
            job.stop_requested_at = self.clock()
            if mode is StopMode.RESCALE:  # the downtime of this rescale counts from here
                job.rescale_requested_at = job.stop_requested_at
            request_stop(job.handle.spec.gen_dir, job.stop_requested_at)
            self.journal.append({
                "event": "stop_requested", "job_id": job.spec.id,
                "generation": job.generation, "reason": mode.value,
            })  # fmt: skip

    # -------------------------------------------------------------------- loop
    def poll(self) -> None:
        """Advance every job: read statuses, reap exits, start pending generations, call back."""
        for job in list(self.jobs.values()):
            if job.handle is not None:
                self._watch(job)
        for job_id in list(self._launch_queue):
            job = self.jobs[job_id]
            if job.pending is None:
                self._launch_queue.remove(job_id)
            elif job.handle is None and self._launch(job):
                self._launch_queue.remove(job_id)
        events, self._events = self._events, []
        for name, args in events:
            if self.listener is not None:
                getattr(self.listener, name)(*args)

    def _read_status(self, job: LaunchedJob) -> GenerationStatus | None:
        status = read_status(job.handle.spec.gen_dir)
        return status if status is not None and status.generation == job.generation else None

    def _watch(self, job: LaunchedJob) -> None:
        handle = job.handle
        status = self._read_status(job)
        if status is not None:
            self._account_status(job, status)
        rc = handle.poll()
        if rc is None and status is not None and status.state.final:
            # rank 0 wrote its last checkpoint: the rest (torchrun's own shutdown takes
            # seconds) only delays the next generation, so it is cut short
            if job.terminal_seen_at is None:
                job.terminal_seen_at = self.clock()
            elif self.clock() - job.terminal_seen_at >= self.exit_grace_s:
                handle.kill()
                rc = handle.wait(5.0)
                if rc is None:
                    return
        if rc is None:
            if job.stop_requested_at is not None and self.clock() - job.stop_requested_at > self.stop_timeout_s:
                log.warning("job %s generation %d did not stop in %.0f s: killing it",
                            job.spec.id, job.generation, self.stop_timeout_s)
                handle.kill()
                handle.wait(5.0)
            return
        self._on_exit(job, rc)

    def _account_status(self, job: LaunchedJob, status: GenerationStatus) -> None:
        a = job.account
        a.samples_done = max(a.samples_done, float(status.samples_done))
        if status.checkpoint_samples is not None:
            a.checkpoint_samples = max(a.checkpoint_samples, int(status.checkpoint_samples))
        if status.first_step_at is not None and job.state is LaunchState.STARTING:
            job.move(LaunchState.RUNNING)
            if job.rescale_requested_at is not None:
                down = status.first_step_at - job.rescale_requested_at
                job.rescale_requested_at = None
                a.downtimes_s.append(down)
                self.journal.append({"event": "rescale_downtime", "job_id": job.spec.id,
                                     "generation": job.generation, "downtime_s": down})  # fmt: skip
        if status.samples_per_s:
            a.samples_per_s = status.samples_per_s
            self._report_rate(job, job.handle.spec, status.samples_per_s)

    def _report_rate(self, job: LaunchedJob, spec: GenerationSpec, rate: float) -> None:
        last = job.account.reported_rate
        if last is not None and abs(rate - last) <= 0.05 * last:
            return
        job.account.reported_rate = rate
        model = job.spec.throughput
        if isinstance(model, ObservedThroughput):
            model.observe(spec.gpus, spec.batch, rate)
        self.journal.append({
            "event": "throughput", "job_id": job.spec.id, "gpus": spec.gpus,
            "batch": spec.batch, "samples_per_s": rate,
        })  # fmt: skip
        self._emit("on_throughput", job.spec.id, spec.gpus, spec.batch, rate)

    def _on_exit(self, job: LaunchedJob, rc: int) -> None:
        handle, a = job.handle, job.account
        status = self._read_status(job)
        ckpt = latest_checkpoint_samples(job.job_dir)
        reported = max(float(status.samples_done) if status else 0.0, float(ckpt))
        state = status.state if status else None
        if rc == 0 and not (state and state.final) and reported >= job.spec.total_samples:
            state = RunState.COMPLETED  # a script that finished without its final status
        # a final status is written after the last checkpoint: the exit code no longer matters
        clean = state is not None and state.final
        reached = max(a.samples_done, float(torn_checkpoint_samples(job.job_dir)))
        lost = 0 if clean else int(max(0.0, reached - ckpt))
        if clean:
            reason = state.value
        elif job.stop_requested_at is not None:
            reason = "stop-killed"
        else:  # "unplaced": ended before the job ran, by the cluster (a node left), not by the job
            reason = "unplaced" if getattr(handle, "infrastructure_failure", False) else "crashed"
        job.handle = None
        job.terminal_seen_at = None
        handle.kill()  # no straggler of this generation may keep its devices
        self.pool.release(job.spec.id)
        a.checkpoint_samples = ckpt
        a.samples_done = reported if clean else float(ckpt)
        a.lost_samples += lost
        self.journal.append({
            "event": "generation_end", "job_id": job.spec.id, "generation": job.generation,
            "rc": rc, "reason": reason, "samples_done": a.samples_done,
            "checkpoint_samples": ckpt, "lost_samples": lost,
        })  # fmt: skip
        stop_mode, job.stop_mode, job.stop_requested_at = job.stop_mode, None, None
        if state is RunState.COMPLETED:
            job.move(LaunchState.COMPLETED)
            job.pending = None
            job.gpus = job.batch = 0
            a.end_s = self.now_s()
            self.journal.append({"event": "completed", "job_id": job.spec.id, "samples_done": a.samples_done})
            self._emit("on_completed", job.spec.id, self.now_s())
            return
        if reason == "crashed":
            if status is None or status.first_step_at is None:
                self._fail(job, f"generation {job.generation} exited with code {rc} before its first step; "
                                f"log: {handle.log_path}")  # fmt: skip
                return
            a.restarts += 1
            if a.restarts > self.max_restarts:
                self._fail(job, f"crashed {a.restarts} times; last exit code {rc}; log: {handle.log_path}")
                return
            log.warning("job %s generation %d crashed (code %s): restarting from %d samples, %d lost; log: %s",
                        job.spec.id, job.generation, rc, ckpt, lost, handle.log_path)
        elif reason == "unplaced":
            log.warning("job %s generation %d could not start (%s): placing it again",
                        job.spec.id, job.generation, handle.log_path)
        if job.pending is None and stop_mode is not StopMode.PREEMPT and job.gpus > 0:
            self._queue_launch(job, job.gpus, job.batch)  # restart where it was (crash, or a stop nobody asked for)
        if job.pending is not None:
            job.move(LaunchState.PENDING)
        else:
            job.move(LaunchState.QUEUED)
            a.samples_per_s = None

    def _generation_spec(self, job: LaunchedJob, k: int, b: int, devices: list[int]) -> GenerationSpec:
        return GenerationSpec(
            job_id=job.spec.id, generation=job.generation, gpus=k, batch=b,
            max_local=job.spec.max_local, total_samples=int(job.spec.total_samples),
            job_dir=str(job.job_dir), devices=tuple(devices), device_kind=self.pool.kind,
            backend="nccl" if self.pool.kind == "cuda" else "gloo",
            checkpoint_every_s=float(job.spec.payload.get("checkpoint_every_s", self.checkpoint_every_s)),
        )  # fmt: skip

    def _launch(self, job: LaunchedJob) -> bool:
        assert job.pending is not None
        k, b = job.pending
        devices = self.pool.acquire(job.spec.id, k)
        if devices is None:
            return False
        job.generation += 1
        spec = self._generation_spec(job, k, b, devices)
        try:
            handle = self.backend.spawn(spec, job.spec.payload)
        except OSError as exc:
            self._fail(job, f"could not start generation {job.generation}: {exc}")
            return True
        if job.account.first_start_s is None:
            job.account.first_start_s = self.now_s()
        job.handle = handle
        job.pending = None
        job.move(LaunchState.STARTING)
        job.log_path = str(handle.log_path)
        job.account.samples_per_s = None
        job.account.reported_rate = None
        self.journal.append({
            "event": "generation_start", "job_id": job.spec.id, "generation": job.generation,
            "gpus": k, "batch": b, "devices": devices, "backend": self.backend.name,
            **handle.journal_fields(), "log": str(handle.log_path),
        })  # fmt: skip
        return True

    # ---------------------------------------------------------------- recovery
    def recover(self, specs: Mapping[str, JobSpec]) -> dict[str, JobProgress]:
        """Find the jobs of an earlier launcher of this run directory again.

        Completed and failed jobs are restored as such; an open generation is
        adopted when the backend can (:meth:`~elasticopt.launcher.backend.GenerationBackend.adopt`), else
        it is closed in the journal (progress since its last checkpoint
        counted as lost) and the job waits in the queue at that checkpoint.

        Parameters
        ----------
        specs
            The run's jobs by id (jobs the journal does not know are ignored).

        Returns
        -------
        dict
            The progress of every job the journal knew.
        """
        found = recovered_jobs(self.journal.state, specs, lambda j: self.out_dir / "jobs" / j)
        for rec in found:
            self._restore(self.jobs.get(rec.job_id) or self._register(specs[rec.job_id]), rec)
        return {rec.job_id: self.progress(rec.job_id) for rec in found}

    def _restore(self, job: LaunchedJob, rec: RecoveredJob) -> None:
        a = job.account
        job.generation = rec.generation
        a.lost_samples, a.restarts, a.rescales = rec.lost_samples, rec.restarts, rec.rescales
        a.first_start_s = rec.first_start_s
        a.checkpoint_samples, a.samples_done = rec.checkpoint_samples, rec.samples_done
        if rec.outcome is JournalEnd.COMPLETED:
            job.move(LaunchState.COMPLETED)
            a.end_s = rec.end_s
        elif rec.outcome is JournalEnd.FAILED:
            job.move(LaunchState.FAILED)
            job.message = rec.failed_reason
        elif rec.outcome is JournalEnd.OPEN:
            ev = rec.open_event or {}
            spec = read_spec(job.job_dir / f"gen-{rec.generation:04d}" / "spec.json")
            handle = self.backend.adopt(spec, ev)
            if handle is None:
                self._close_orphan(job, spec)
                return
            job.handle = handle
            job.gpus, job.batch = rec.gpus, rec.batch
            job.move(LaunchState.RUNNING)
            job.log_path = str(handle.log_path)
            if not self.pool.claim(job.spec.id, list(ev.get("devices", []))):
                log.warning("job %s: devices %s are not all in this pool", job.spec.id, ev.get("devices"))
            self._watch(job)  # an exit while we were away is handled here

    def _close_orphan(self, job: LaunchedJob, spec: GenerationSpec) -> None:
        """The open generation died with the launcher: count what it did past its checkpoint as lost."""
        status = read_status(spec.gen_dir)
        reached = max(float(status.samples_done) if status and status.generation == spec.generation else 0.0,
                      float(torn_checkpoint_samples(job.job_dir)))  # fmt: skip
        ckpt = job.account.checkpoint_samples
        lost = int(max(0.0, reached - ckpt))
        job.account.lost_samples += lost
        job.account.samples_done = float(ckpt)
        self.journal.append({
            "event": "generation_end", "job_id": job.spec.id, "generation": spec.generation, "rc": -1,
            "reason": "orphaned", "samples_done": float(ckpt), "checkpoint_samples": ckpt, "lost_samples": lost,
        })  # fmt: skip
        log.warning("job %s: generation %d died with the earlier launcher; queued at sample %d, %d lost",
                    job.spec.id, spec.generation, ckpt, lost)

    def shutdown(self, timeout_s: float = 60.0, kill: bool = False) -> None:
        """Stop every running generation (checkpointing) and wait; ``kill`` skips the checkpoint."""
        for job in self.jobs.values():
            if job.handle is not None:
                if kill:
                    job.handle.kill()
                else:
                    self.stop(job.spec.id)
        deadline = time.monotonic() + timeout_s
        while any(j.handle is not None for j in self.jobs.values()) and time.monotonic() < deadline:
            self.poll()
            time.sleep(0.05)
        for job in self.jobs.values():
            if job.handle is not None:
                job.handle.kill()
                job.handle.wait(5.0)
        self.poll()
        self.backend.close()
