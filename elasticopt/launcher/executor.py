"""The launcher's executor: real training processes driven by the autoscaler.

:class:`LauncherExecutor` implements :class:`~elasticopt.scheduling.executor.Executor`
with one process group per job *generation* (see :mod:`elasticopt.launcher.runner`):

- ``start(job, k, b)`` takes k devices from the pool and starts generation 1
  (or resumes from the job's checkpoint when it was stopped before);
- ``rescale(job, k, b)`` asks the running generation to stop (control file:
  every rank stops at the same step and rank 0 checkpoints), then, once it has
  exited and k devices are free, starts the next generation with the new k
  and b, which resumes from that checkpoint;
- ``stop(job)`` does the same without the restart: the job goes back to the
  queue holding its checkpoint.

Calls never block: the driver calls :meth:`LauncherExecutor.poll` regularly,
which reads the generations' status files, reaps exits, starts pending
generations and makes every listener callback (never from inside
start/rescale/stop).  Everything that must survive the launcher goes to the
:class:`~elasticopt.launcher.journal.Journal` first; :meth:`LauncherExecutor.recover`
finds the jobs of a killed launcher again (:mod:`elasticopt.launcher.recovery`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from elasticopt.launcher.devices import DevicePool
from elasticopt.launcher.journal import Journal
from elasticopt.launcher.observed import ObservedThroughput
from elasticopt.launcher.protocol import (
    GenerationSpec,
    GenerationStatus,
    latest_checkpoint_samples,
    read_status,
    request_stop,
    torn_checkpoint_samples,
)
from elasticopt.launcher.recovery import recover_jobs
from elasticopt.launcher.runner import GenerationProcess
from elasticopt.scheduling.executor import Executor, JobProgress, JobSpec, Phase

__all__ = ["LauncherExecutor", "LaunchedJob"]

log = logging.getLogger(__name__)


@dataclass
class LaunchedJob:
    """The launcher's live state of one job."""

    spec: JobSpec
    phase: Phase = Phase.QUEUED
    gpus: int = 0
    batch: int = 0
    generation: int = 0
    proc: GenerationProcess | None = None
    pending: tuple[int, int] | None = None  # (k, b) of the next generation to start
    stop_mode: str | None = None  # None | "rescale" | "preempt"
    stop_requested_at: float | None = None
    samples_done: float = 0.0
    checkpoint_samples: int = 0
    lost_samples: int = 0
    restarts: int = 0
    rescales: int = 0
    samples_per_s: float | None = None
    reported_rate: float | None = None
    last_status: GenerationStatus | None = None
    message: str = ""
    log_path: str = ""
    downtimes_s: list[float] = field(default_factory=list)
    rescale_requested_at: float | None = None
    terminal_seen_at: float | None = None
    first_start_s: float | None = None
    end_s: float | None = None

    @property
    def job_dir(self) -> Path:
        return Path(self.spec.payload["job_dir"])


class LauncherExecutor(Executor):
    """Runs each job as real processes on this machine's devices.

    Parameters
    ----------
    out_dir
        Run directory: ``journal.jsonl`` and ``jobs/<id>/`` live here.
    pool
        The devices to hand out (:meth:`DevicePool.detect`).
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

    Notes
    -----
    Job payload keys: ``script`` (path, required), ``args`` (list of str),
    ``mode`` (``"torchrun"`` default or ``"python"``), ``env`` (dict),
    ``cwd``, ``checkpoint_every_s``.
    """

    def __init__(
        self,
        out_dir: str | os.PathLike[str],
        pool: DevicePool,
        *,
        stop_timeout_s: float = 120.0,
        max_restarts: int = 3,
        checkpoint_every_s: float = 30.0,
        exit_grace_s: float = 0.2,
        clock: Callable[[], float] = time.time,
    ):
        self.out_dir = Path(out_dir)
        self.pool = pool
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

    def _job_dir(self, job_id: str) -> Path:
        return self.out_dir / "jobs" / job_id

    def _register(self, spec: JobSpec) -> LaunchedJob:
        payload = dict(spec.payload)
        payload.setdefault("job_dir", str(self._job_dir(spec.id)))
        model = spec.throughput if isinstance(spec.throughput, ObservedThroughput) else ObservedThroughput(spec.throughput)
        for (k, b), t in self.journal.state.job(spec.id).throughput.items():
            if (k, b) not in model.observed:
                model.observe(k, b, t)
        spec = dataclasses.replace(spec, payload=payload, throughput=model)
        job = LaunchedJob(spec)
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
        if job.phase in (Phase.COMPLETED, Phase.FAILED):
            log.info("%s(%s) ignored: the job has %s", action, job_id, job.phase.value)
            return True
        return False

    def _emit(self, name: str, *args: object) -> None:
        self._events.append((name, args))

    def _fail(self, job: LaunchedJob, reason: str) -> None:
        job.phase = Phase.FAILED
        job.message = reason
        job.pending = None
        job.gpus = job.batch = 0
        job.end_s = self.now_s()
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
        if state.proc is not None or state.pending is not None:
            return self.rescale(job.id, gpus, batch)
        script = state.spec.payload.get("script")
        if not script or not Path(script).is_file():
            self._fail(state, f"job script not found: {script!r}")
            return True
        state.pending = (gpus, batch)
        state.gpus, state.batch = gpus, batch
        state.phase = Phase.RESTARTING
        state.stop_mode = None
        self._launch_queue.append(job.id)
        return True

    def rescale(self, job_id: str, gpus: int, batch: int) -> bool:
        if self._ignored(job_id, "rescale"):
            return False
        job = self.jobs[job_id]
        running_same = job.proc is not None and job.stop_mode is None and (job.gpus, job.batch) == (gpus, batch)
        if running_same:
            return True
        if job.proc is not None and job.stop_mode is None:
            job.rescales += 1
            job.rescale_requested_at = self.clock()
        job.gpus, job.batch = gpus, batch
        job.phase = Phase.RESTARTING
        job.pending = (gpus, batch)
        if job.proc is not None:
            self._request_stop(job, "rescale")
        if job_id not in self._launch_queue:
            self._launch_queue.append(job_id)
        return True

    def stop(self, job_id: str) -> bool:
        if self._ignored(job_id, "stop"):
            return False
        job = self.jobs[job_id]
        job.pending = None
        if job_id in self._launch_queue:
            self._launch_queue.remove(job_id)
        job.gpus = job.batch = 0
        job.phase = Phase.QUEUED
        if job.proc is not None:
            self._request_stop(job, "preempt")
        return True

    def progress(self, job_id: str) -> JobProgress:
        job = self.jobs.get(job_id)
        if job is None:  # submitted, never started
            return JobProgress(job_id, Phase.QUEUED, 0, 0, 0.0, None)
        return JobProgress(
            job_id, job.phase, job.gpus, job.batch, job.samples_done, job.samples_per_s,
            job.generation, job.message,
        )  # fmt: skip

    def _request_stop(self, job: LaunchedJob, mode: str) -> None:
        assert job.proc is not None
        job.stop_mode = mode
        if job.stop_requested_at is None:
            job.stop_requested_at = self.clock()
            request_stop(job.proc.gen_dir, job.stop_requested_at)
            self.journal.append({
                "event": "stop_requested", "job_id": job.spec.id,
                "generation": job.generation, "reason": mode,
            })  # fmt: skip

    # -------------------------------------------------------------------- loop
    def poll(self) -> None:
        """Advance every job: read statuses, reap exits, start pending generations, call back."""
        for job in list(self.jobs.values()):
            if job.proc is not None:
                self._watch(job)
        for job_id in list(self._launch_queue):
            job = self.jobs[job_id]
            if job.proc is None and job.pending is not None and self._launch(job):
                self._launch_queue.remove(job_id)
            elif job.pending is None:
                self._launch_queue.remove(job_id)
        events, self._events = self._events, []
        for name, args in events:
            if self.listener is not None:
                getattr(self.listener, name)(*args)

    def _watch(self, job: LaunchedJob) -> None:
        proc = job.proc
        assert proc is not None
        status = read_status(proc.gen_dir)
        if status is not None and status.generation == job.generation:
            job.last_status = status
            job.samples_done = max(job.samples_done, float(status.samples_done))
            if status.checkpoint_samples is not None:
                job.checkpoint_samples = max(job.checkpoint_samples, int(status.checkpoint_samples))
            if status.first_step_at is not None and job.phase is Phase.RESTARTING and job.stop_mode is None:
                job.phase = Phase.RUNNING
                if job.rescale_requested_at is not None:
                    down = status.first_step_at - job.rescale_requested_at
                    job.rescale_requested_at = None
                    job.downtimes_s.append(down)
                    self.journal.append({"event": "rescale_downtime", "job_id": job.spec.id,
                                         "generation": job.generation, "downtime_s": down})
            if status.samples_per_s:
                job.samples_per_s = status.samples_per_s
                self._report_rate(job, proc.spec, status.samples_per_s)
        rc = proc.poll()
        if rc is None and status is not None and status.generation == job.generation and status.state in (
            "stopped", "completed",
        ):
            # rank 0 wrote its last checkpoint: the rest (torchrun's own shutdown takes
            # seconds) only delays the next generation, so it is cut short
            if job.terminal_seen_at is None:
                job.terminal_seen_at = self.clock()
            elif self.clock() - job.terminal_seen_at >= self.exit_grace_s:
                proc.kill(signal.SIGKILL)
                rc = proc.wait(5.0)
                if rc is None:
                    return
        if rc is None:
            if job.stop_requested_at is not None and self.clock() - job.stop_requested_at > self.stop_timeout_s:
                log.warning("job %s generation %d did not stop in %.0f s: killing it",
                            job.spec.id, job.generation, self.stop_timeout_s)
                proc.kill(signal.SIGKILL)
                proc.wait(5.0)
            return
        self._on_exit(job, rc)

    def _report_rate(self, job: LaunchedJob, spec: GenerationSpec, rate: float) -> None:
        last = job.reported_rate
        if last is not None and abs(rate - last) <= 0.05 * last:
            return
        job.reported_rate = rate
        model = job.spec.throughput
        if isinstance(model, ObservedThroughput):
            model.observe(spec.gpus, spec.batch, rate)
        self.journal.append({
            "event": "throughput", "job_id": job.spec.id, "gpus": spec.gpus,
            "batch": spec.batch, "samples_per_s": rate,
        })  # fmt: skip
        self._emit("on_throughput", job.spec.id, spec.gpus, spec.batch, rate)

    def _on_exit(self, job: LaunchedJob, rc: int) -> None:
        proc = job.proc
        assert proc is not None
        status = read_status(proc.gen_dir)
        if status is not None and status.generation != job.generation:
            status = None
        ckpt = latest_checkpoint_samples(job.job_dir)
        reported = max(float(status.samples_done) if status else 0.0, float(ckpt))
        state = status.state if status else "none"
        if rc == 0 and state not in ("completed", "stopped") and reported >= job.spec.total_samples:
            state = "completed"  # a script that finished without its final status
        # a terminal status is written after the last checkpoint: the exit code no longer matters
        clean = state in ("completed", "stopped")
        reached = max(job.samples_done, float(torn_checkpoint_samples(job.job_dir)))
        lost = 0 if clean else int(max(0.0, reached - ckpt))
        reason = state if clean else ("stop-killed" if job.stop_requested_at is not None else "crashed")
        job.proc = None
        job.terminal_seen_at = None
        proc.kill(signal.SIGKILL)  # no straggler of this generation may keep its devices
        self.pool.release(job.spec.id)
        job.checkpoint_samples = ckpt
        job.samples_done = reported if clean else float(ckpt)
        job.lost_samples += lost
        self.journal.append({
            "event": "generation_end", "job_id": job.spec.id, "generation": job.generation,
            "rc": rc, "reason": reason, "samples_done": job.samples_done,
            "checkpoint_samples": ckpt, "lost_samples": lost,
        })  # fmt: skip
        stop_mode, job.stop_mode, job.stop_requested_at = job.stop_mode, None, None
        if clean and state == "completed":
            job.phase = Phase.COMPLETED
            job.pending = None
            job.gpus = job.batch = 0
            job.end_s = self.now_s()
            self.journal.append({"event": "completed", "job_id": job.spec.id, "samples_done": job.samples_done})
            self._emit("on_completed", job.spec.id, self.now_s())
            return
        if reason == "crashed":
            made_progress = status is not None and status.first_step_at is not None
            if not made_progress:
                self._fail(job, f"generation {job.generation} exited with code {rc} before its first step; log: {proc.log_path}")
                return
            job.restarts += 1
            if job.restarts > self.max_restarts:
                self._fail(job, f"crashed {job.restarts} times; last exit code {rc}; log: {proc.log_path}")
                return
            log.warning("job %s generation %d crashed (code %s): restarting from %d samples, %d lost; log: %s",
                        job.spec.id, job.generation, rc, ckpt, lost, proc.log_path)
        if job.pending is None and stop_mode != "preempt" and job.gpus > 0:
            job.pending = (job.gpus, job.batch)  # restart where it was (crash, or a stop nobody asked for)
            job.phase = Phase.RESTARTING
            if job.spec.id not in self._launch_queue:
                self._launch_queue.append(job.spec.id)
        if job.pending is None:
            job.phase = Phase.QUEUED
            job.samples_per_s = None

    def _launch(self, job: LaunchedJob) -> bool:
        assert job.pending is not None
        k, b = job.pending
        devices = self.pool.acquire(job.spec.id, k)
        if devices is None:
            return False
        payload = job.spec.payload
        job.generation += 1
        spec = GenerationSpec(
            job_id=job.spec.id, generation=job.generation, gpus=k, batch=b,
            max_local=job.spec.max_local, total_samples=int(job.spec.total_samples),
            job_dir=str(job.job_dir), devices=tuple(devices), device_kind=self.pool.kind,
            backend="nccl" if self.pool.kind == "cuda" else "gloo",
            checkpoint_every_s=float(payload.get("checkpoint_every_s", self.checkpoint_every_s)),
        )  # fmt: skip
        cores = self.pool.cpu_cores_for(devices) if self.pool.kind == "cpu" else None
        try:
            proc = GenerationProcess.spawn(
                spec, str(payload["script"]), [str(a) for a in payload.get("args", [])],
                mode=str(payload.get("mode", "torchrun")), cpu_cores=cores,
                extra_env={str(k_): str(v) for k_, v in dict(payload.get("env", {})).items()},
                cwd=payload.get("cwd"),
            )  # fmt: skip
        except OSError as exc:
            self._fail(job, f"could not start generation {job.generation}: {exc}")
            return True
        if job.first_start_s is None:
            job.first_start_s = self.now_s()
        job.proc = proc
        job.pending = None
        job.phase = Phase.RESTARTING
        job.log_path = str(proc.log_path)
        job.samples_per_s = None
        job.reported_rate = None
        job.last_status = None
        self.journal.append({
            "event": "generation_start", "job_id": job.spec.id, "generation": job.generation,
            "gpus": k, "batch": b, "devices": devices, "pid": proc.pid,
            "start_ticks": proc.start_ticks, "started_at": proc.started_at, "log": str(proc.log_path),
        })  # fmt: skip
        return True

    # ---------------------------------------------------------------- recovery
    def recover(self, specs: Mapping[str, JobSpec]) -> dict[str, JobProgress]:
        """Find the jobs of an earlier launcher of this run directory again.

        See :func:`~elasticopt.launcher.recovery.recover_jobs`: ``specs`` are
        the run's jobs by id; returns the progress of every job the journal knew.
        """
        return recover_jobs(self, specs)

    def shutdown(self, timeout_s: float = 60.0, kill: bool = False) -> None:
        """Stop every running generation (checkpointing) and wait; ``kill`` skips the checkpoint."""
        for job in self.jobs.values():
            if job.proc is not None:
                if kill:
                    job.proc.kill()
                else:
                    self.stop(job.spec.id)
        deadline = time.monotonic() + timeout_s
        while any(j.proc is not None for j in self.jobs.values()) and time.monotonic() < deadline:
            self.poll()
            time.sleep(0.05)
        for job in self.jobs.values():
            if job.proc is not None:
                job.proc.kill()
                job.proc.wait(5.0)
        self.poll()
