"""Taking over jobs an earlier driver already ran (a restarted launcher).

A launcher killed and restarted finds its jobs again on the executor
(:meth:`elasticopt.launcher.generations.GenerationExecutor.recover`): some still
running on a known (gpus, batch), some queued at a checkpoint, some finished.
The new autoscaler must not start them again, yet its decisions and records
must count them as if it had run them from the beginning.  The functions here
check what the executor reports and build the job's
:class:`~elasticopt.scheduling.tracking.JobTrack`; the autoscaler's
``adopt`` / ``adopt_finished`` register it.  This module does not import the
autoscaler.
"""

from __future__ import annotations

from elasticopt.errors import ValidationError
from elasticopt.scheduling.executor import Executor, Phase
from elasticopt.scheduling.jobspec import JobSpec
from elasticopt.scheduling.tracking import JobHistory, JobTrack, track_from_history

__all__ = ["JobHistory", "adopted_track", "finished_track"]


def adopted_track(
    executor: Executor, spec: JobSpec, gpus: int, batch: int, since_s: float | None, history: JobHistory
) -> JobTrack:
    """The track of a job the executor already has (running on (gpus, batch), or queued at ``0, 0``).

    Parameters
    ----------
    executor
        Must report the job holding exactly (gpus, batch), not finished.
    spec
        The job (already prepared by the autoscaler).
    gpus, batch
        Its current allocation; ``0, 0`` for a job queued at a checkpoint.
    since_s
        When that allocation began (GPU-seconds accrue from it); None = now.
    history
        What happened before; ``first_start_s`` defaults to ``since_s`` and
        ``starts`` to at least 1 for a running job.

    Raises
    ------
    ValidationError
        A finished job, an allocation the executor does not report, or
        ``since_s`` in the future.
    """
    now = executor.now_s()
    since = now if since_s is None else float(since_s)
    p = executor.progress(spec.id)
    where = f"adopt({spec.id!r})"
    if p.phase in (Phase.COMPLETED, Phase.FAILED):
        raise ValidationError(where, "a job that has not finished", p.phase.value, hint="use adopt_finished")
    if (p.gpus, p.batch) != (gpus, batch):
        raise ValidationError(where, f"the executor's allocation {(p.gpus, p.batch)}", (gpus, batch))
    if since > now:
        raise ValidationError(f"{where}.since_s", f"a time <= now ({now})", since)
    running = gpus > 0
    tr = track_from_history(spec, history, "running" if running else "queued", since)
    if running:
        tr.alloc = tr.last_alloc = (gpus, batch)
        tr.last_change_s = since
        if tr.first_start_s is None:
            tr.first_start_s = since
        if tr.starts == 0:
            tr.starts = 1
            tr.restart_s += float(spec.restart_cost_s or 0.0)
    return tr


def check_finished(spec: JobSpec, status: str, completion_s: float | None) -> None:
    """Raise ValidationError unless (status, completion_s) describe a finished job."""
    where = f"adopt_finished({spec.id!r})"
    if status not in ("completed", "failed"):
        raise ValidationError(f"{where}.status", "'completed' or 'failed'", status)
    if status == "completed" and completion_s is None:
        raise ValidationError(f"{where}.completion_s", "a time for a completed job", None)


def finished_track(
    spec: JobSpec,
    status: str,
    completion_s: float | None,
    samples_done: float | None,
    history: JobHistory,
    now_s: float,
) -> JobTrack:
    """The track of a job that completed or failed before this autoscaler (records only)."""
    check_finished(spec, status, completion_s)
    tr = track_from_history(spec, history, status, now_s)
    tr.completion_s = float(completion_s) if status == "completed" else None  # type: ignore[arg-type]
    if samples_done is None:
        samples_done = spec.total_samples if status == "completed" else 0.0
    tr.samples_done = float(samples_done)
    return tr
