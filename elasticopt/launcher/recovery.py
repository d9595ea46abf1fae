"""What the journal of a killed launcher says about its jobs (docs/design.md §5).

Everything that must survive the launcher is in its
:class:`~elasticopt.launcher.journal.Journal`.  A new launcher on the same run
directory folds it (:func:`recovered_jobs`) into one :class:`RecoveredJob` per
job, which the executor applies
(:meth:`GenerationExecutor.recover <elasticopt.launcher.generations.GenerationExecutor.recover>`):
completed and failed jobs are restored as such, a generation still open is
handed to the backend to adopt (a ``torchrun`` process group keeps training;
Ray actors died with their driver), and the others wait in the queue at their
last checkpoint.  :func:`job_history` turns the journal's account of a job
into the :class:`~elasticopt.scheduling.adoption.JobHistory` the new
autoscaler adopts it with.  Pure functions of the journal and the checkpoint
files: nothing here drives an executor.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elasticopt.launcher.journal import JournalState
from elasticopt.launcher.protocol import latest_checkpoint_samples
from elasticopt.scheduling.adoption import JobHistory

__all__ = ["JournalEnd", "RecoveredJob", "recovered_jobs", "job_history", "open_since_s"]


class JournalEnd(enum.Enum):
    """Where the journal left a job."""

    COMPLETED = "completed"
    FAILED = "failed"
    OPEN = "open"  # a generation started and never ended in the journal
    QUEUED = "queued"  # between generations, at its last checkpoint


@dataclass(frozen=True)
class RecoveredJob:
    """One job as the journal and its checkpoint files leave it."""

    job_id: str
    outcome: JournalEnd
    generation: int
    gpus: int
    batch: int
    samples_done: float
    checkpoint_samples: int
    lost_samples: int
    restarts: int
    rescales: int
    first_start_s: float | None
    end_s: float | None = None  # seconds from the run's origin (completed jobs)
    failed_reason: str = ""
    open_event: dict[str, Any] | None = None  # the ``generation_start`` event of the open generation


def recovered_jobs(state: JournalState, job_ids: Iterable[str], job_dir: Callable[[str], Path]) -> list[RecoveredJob]:
    """Fold the journal into one :class:`RecoveredJob` per started job among ``job_ids``.

    Parameters
    ----------
    state
        The folded journal of the earlier launcher.
    job_ids
        The run's jobs (jobs the journal does not know, or never started, are left out).
    job_dir
        Job id -> its directory (where the checkpoints are).
    """
    out = []
    for job_id in job_ids:
        rec = state.jobs.get(job_id)
        if rec is None or rec.generation == 0 and rec.completed_at is None and rec.failed_reason is None:
            continue
        ckpt = latest_checkpoint_samples(job_dir(job_id))
        if rec.completed_at is not None:
            outcome = JournalEnd.COMPLETED
        elif rec.failed_reason is not None:
            outcome = JournalEnd.FAILED
        elif rec.open_generation is not None:
            outcome = JournalEnd.OPEN
        else:
            outcome = JournalEnd.QUEUED
        t0 = state.t0 or 0.0
        out.append(RecoveredJob(
            job_id=job_id, outcome=outcome, generation=rec.generation, gpus=rec.gpus, batch=rec.batch,
            samples_done=max(rec.samples_done, float(ckpt)), checkpoint_samples=ckpt,
            lost_samples=rec.lost_samples, restarts=rec.restarts, rescales=rec.rescales,
            first_start_s=rec.first_start_s,
            end_s=rec.completed_at - t0 if rec.completed_at is not None else None,
            failed_reason=rec.failed_reason or "", open_event=rec.open_generation,
        ))  # fmt: skip
    return out


def job_history(state: JournalState, job_id: str) -> JobHistory:
    """What the journal knows of ``job_id``'s past, for :meth:`Autoscaler.adopt`.

    Times are seconds from the run's origin (``state.t0``).  ``gpu_s`` counts
    the generations that ended (gpus x lifetime); a generation still open is
    left to the autoscaler, which accrues it from its ``started_at``
    (:func:`open_since_s`).

    Parameters
    ----------
    state
        The folded journal.
    job_id
        The job.
    """
    rec = state.jobs.get(job_id)
    if rec is None or rec.generation == 0:
        return JobHistory()
    return JobHistory(
        first_start_s=rec.first_start_s,
        gpu_s=rec.gpu_s,
        starts=rec.starts,
        rescales=rec.rescales,
        stops=rec.stops,
        last_alloc=(rec.gpus, rec.batch),
    )


def open_since_s(state: JournalState, job_id: str) -> float | None:
    """When ``job_id``'s open generation started (seconds from the origin), None if none is open."""
    rec = state.jobs.get(job_id)
    if rec is None or rec.open_generation is None or state.t0 is None:
        return None
    return float(rec.open_generation.get("started_at", state.t0)) - state.t0
