"""The executor interface: what the autoscaler drives, simulated or real.

The autoscaler (:mod:`elasticopt.scheduling.autoscaler`) never knows whether it
talks to :class:`~elasticopt.scheduling.simulated.SimulatedExecutor` (a virtual
clock advanced from throughput profiles) or to the launcher's executor (real
``torchrun`` processes). Both implement :class:`Executor`.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Protocol

from elasticopt.scheduling.jobspec import JobSpec

__all__ = ["Phase", "JobProgress", "ExecutorListener", "Executor"]


class Phase(enum.Enum):
    """Where a job is in its life."""

    QUEUED = "queued"
    RESTARTING = "restarting"  # started or rescaled, paying its restart cost
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"


@dataclass(frozen=True)
class JobProgress:
    """An executor's account of one job.

    ``gpus``/``batch`` are 0 for a job holding no GPUs.  ``samples_per_s`` is
    the measured (launcher) or modelled (simulator) current rate, None if not
    yet known.
    """

    job_id: str
    phase: Phase
    gpus: int
    batch: int
    samples_done: float
    samples_per_s: float | None
    generation: int = 0
    message: str = ""


class ExecutorListener(Protocol):
    """Callbacks an executor makes to whoever drives it (the autoscaler)."""

    def on_completed(self, job_id: str, time_s: float) -> None:
        """The job processed all its samples."""

    def on_failed(self, job_id: str, time_s: float, reason: str) -> None:
        """The job failed for good (reason names a log file where there is one)."""

    def on_throughput(self, job_id: str, gpus: int, batch: int, samples_per_s: float) -> None:
        """A measured rate for (gpus, batch): lets profiles be learned online."""


class Executor(ABC):
    """Runs jobs on GPUs: the one interface the autoscaler drives.

    ``start``/``rescale`` put the job in :attr:`Phase.RESTARTING` for its
    restart cost, then :attr:`Phase.RUNNING`; ``stop`` returns it to the queue
    keeping its progress (a checkpoint).  Calls for a job that has completed or
    failed are ignored and return False with the reason logged; otherwise True.

    An executor with :attr:`places_gpus` runs each job on exactly the GPUs the
    autoscaler names: ``start`` and ``rescale`` then take ``placement=(GPU type,
    ((node, GPU indices), ...))`` and :meth:`placement` reports where a job runs.
    Others (the launcher's) pick the devices themselves.
    """

    listener: ExecutorListener | None = None
    #: Whether start/rescale take the GPUs to use (``placement=``) from the autoscaler.
    places_gpus: bool = False

    def set_listener(self, listener: ExecutorListener) -> None:
        """Register the object that receives completion/failure/throughput callbacks."""
        self.listener = listener

    @abstractmethod
    def now_s(self) -> float:
        """Current time in seconds (virtual for the simulator, wall for the launcher)."""

    @abstractmethod
    def start(self, job: JobSpec, gpus: int, batch: int) -> bool:
        """Start a queued job on ``gpus`` GPUs at global batch ``batch``."""

    @abstractmethod
    def rescale(self, job_id: str, gpus: int, batch: int) -> bool:
        """Change a running job's GPUs and/or global batch (stop, checkpoint, restart)."""

    @abstractmethod
    def stop(self, job_id: str) -> bool:
        """Preempt a running job back to the queue, keeping its progress."""

    @abstractmethod
    def progress(self, job_id: str) -> JobProgress:
        """The job's current phase, allocation and samples processed."""
