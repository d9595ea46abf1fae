"""Per-job book-keeping of the autoscaler, and what an earlier driver knew of a job.

:class:`JobTrack` is the autoscaler's mutable account of one submitted job
(status, current and last allocation, starts, rescales, restart time,
GPU-seconds).  :class:`JobHistory` is what a previous driver (a restarted
launcher) reports of a job it ran; :func:`track_from_history` turns it into a
track.  Neither module here imports the autoscaler: the autoscaler owns the
tracks, :mod:`elasticopt.scheduling.adoption` builds them for adopted jobs.
"""

from __future__ import annotations

from dataclasses import dataclass

from elasticopt.scheduling.actions import Option
from elasticopt.scheduling.jobspec import JobSpec

__all__ = ["JobHistory", "JobTrack", "track_from_history"]



@dataclass(frozen=True)
class JobHistory:
    """What happened to a job before the autoscaler took it over.

    Parameters
    ----------
    first_start_s
        When it first got GPUs (None: never, or unknown).
    gpu_s
        GPU-seconds it held before (for a running job: before its current
        allocation began).
    starts, rescales, stops
        Starts from the queue, rescales and preemptions so far; the restart
        cost charged is ``(starts + rescales) * restart_cost_s``.
    last_alloc
        Its last (gpus, batch), for a job holding none now (a finished job's
        final allocation).
    """

    first_start_s: float | None = None
    gpu_s: float = 0.0
    starts: int = 0
    rescales: int = 0
    stops: int = 0
    last_alloc: Option | None = None


@dataclass
class JobTrack:
    """The autoscaler's running account of one job (mutable; owned by the autoscaler)."""

    spec: JobSpec
    status: str = "queued"
    first_start_s: float | None = None
    completion_s: float | None = None
    alloc: Option | None = None
    last_alloc: Option | None = None
    alloc_since_s: float = 0.0
    last_change_s: float | None = None
    starts: int = 0
    rescales: int = 0
    stops: int = 0
    restart_s: float = 0.0
    gpu_s: float = 0.0
    samples_done: float = 0.0
    dropped_s: float | None = None

    def set_alloc(self, alloc: Option | None, now_s: float) -> None:
        """Close the current allocation's GPU-seconds at ``now_s`` and hold ``alloc`` from then on."""
        if self.alloc is not None:
            self.gpu_s += self.alloc[0] * (now_s - self.alloc_since_s)
        self.alloc = alloc
        if alloc is not None:
            self.last_alloc = alloc
        self.alloc_since_s = now_s
        self.status = "queued" if alloc is None else "running"

    def gpu_s_at(self, now_s: float) -> float:
        """GPU-seconds held up to ``now_s``."""
        return self.gpu_s + (self.alloc[0] * (now_s - self.alloc_since_s) if self.alloc else 0.0)


def track_from_history(spec: JobSpec, history: JobHistory, status: str, since_s: float) -> JobTrack:
    """A track that counts ``history`` as if this autoscaler had made it happen."""
    return JobTrack(
        spec=spec, status=status, first_start_s=history.first_start_s, last_alloc=history.last_alloc,
        alloc_since_s=since_s, starts=history.starts, rescales=history.rescales, stops=history.stops,
        restart_s=float(spec.restart_cost_s or 0.0) * (history.starts + history.rescales),
        gpu_s=float(history.gpu_s),
    )  # fmt: skip
