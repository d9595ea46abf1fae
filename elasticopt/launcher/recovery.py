"""Finding the jobs of a killed launcher again (docs/design.md §5).

Everything that must survive the launcher is in its
:class:`~elasticopt.launcher.journal.Journal`.  A new launcher on the same run
directory calls :meth:`LauncherExecutor.recover
<elasticopt.launcher.executor.LauncherExecutor.recover>` (:func:`recover_jobs`)
to rebuild its executor state: completed and failed jobs are restored as such,
a generation still alive is adopted (watched through its pid and status file,
it keeps training), and a job whose generation died with the launcher is
queued again at its last checkpoint.  :func:`job_history` turns the journal's
account of a job into the :class:`~elasticopt.scheduling.adoption.JobHistory`
the new autoscaler adopts it with.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from elasticopt.launcher.journal import JournalState
from elasticopt.launcher.protocol import generation_dir, latest_checkpoint_samples, read_spec
from elasticopt.launcher.runner import GenerationProcess
from elasticopt.scheduling.adoption import JobHistory
from elasticopt.scheduling.executor import JobProgress, JobSpec, Phase

if TYPE_CHECKING:
    from elasticopt.launcher.executor import LauncherExecutor

__all__ = ["recover_jobs", "job_history", "open_since_s"]

log = logging.getLogger(__name__)


def recover_jobs(executor: LauncherExecutor, specs: Mapping[str, JobSpec]) -> dict[str, JobProgress]:
    """Rebuild ``executor``'s jobs from its journal (see :meth:`LauncherExecutor.recover`).

    Parameters
    ----------
    executor
        A fresh executor on the run directory of the earlier launcher.
    specs
        The run's jobs by id (jobs the journal does not know are ignored).

    Returns
    -------
    dict
        The progress of every job the journal knew.
    """
    out: dict[str, JobProgress] = {}
    for job_id, rec in executor.journal.state.jobs.items():
        if job_id not in specs or rec.generation == 0 and rec.completed_at is None and rec.failed_reason is None:
            continue
        job = executor.jobs.get(job_id) or executor._register(specs[job_id])
        job.generation = rec.generation
        job.lost_samples = rec.lost_samples
        job.restarts = rec.restarts
        job.rescales = rec.rescales
        job.first_start_s = rec.first_start_s
        ckpt = latest_checkpoint_samples(job.job_dir)
        job.checkpoint_samples = ckpt
        job.samples_done = max(rec.samples_done, float(ckpt))
        if rec.completed_at is not None:
            job.phase = Phase.COMPLETED
            job.end_s = rec.completed_at - executor.journal.t0
        elif rec.failed_reason is not None:
            job.phase = Phase.FAILED
            job.message = rec.failed_reason
        elif rec.open_generation is not None:
            ev = rec.open_generation
            spec = read_spec(generation_dir(job.job_dir, rec.generation) / "spec.json")
            proc = GenerationProcess.adopt(spec, int(ev["pid"]), ev.get("start_ticks"), float(ev["started_at"]))
            job.proc = proc
            job.gpus, job.batch = rec.gpus, rec.batch
            job.phase = Phase.RUNNING
            job.log_path = str(proc.log_path)
            if not executor.pool.claim(job_id, list(ev.get("devices", []))):
                log.warning("job %s: devices %s are not all in this pool", job_id, ev.get("devices"))
            executor._watch(job)  # an exit while we were away is handled here
        out[job_id] = executor.progress(job_id)
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
