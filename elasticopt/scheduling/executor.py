"""The executor interface: what the autoscaler drives, simulated or real.

The autoscaler (:mod:`elasticopt.scheduling.autoscaler`) never knows whether it
talks to :class:`~elasticopt.scheduling.simulated.SimulatedExecutor` (a virtual
clock advanced from throughput profiles) or to the launcher's executor (real
``torchrun`` processes). Both implement :class:`Executor`.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from elasticopt.models.throughput import ThroughputModel

__all__ = ["JobSpec", "Phase", "JobProgress", "ExecutorListener", "Executor"]


@dataclass(frozen=True)
class JobSpec:
    """A training job as submitted to the cluster.

    Parameters
    ----------
    id
        Unique job id.
    throughput
        What the scheduler believes of the job's samples/s at (k, b).
    batch_min, batch_max
        Accuracy-neutral global batch range.
    max_local
        Largest per-GPU batch that fits in GPU memory.
    gpus_min, gpus_max
        GPU range; ``gpus_max=None`` means no limit besides the cluster.
    submitted_gpus, submitted_batch
        What the user asked for: the ``static`` policy runs exactly this and
        the ``fixed-batch`` baseline keeps ``submitted_batch``.
    total_samples
        Samples to process until the job is done.
    arrival_s
        Submission time (seconds from the start of the run).
    weight
        Objective weight w_j.
    restart_cost_s
        Seconds without progress at every start and rescale; None = the
        autoscaler's default.
    payload
        Executor-specific data (the launcher's script path and arguments).
    efficiency
        Statistical efficiency E(b) (callable); None = the one fitted to the
        named profile (:func:`elasticopt.profiles.efficiency.get_efficiency`),
        if any, else E = 1.  Read it through :attr:`statistical_efficiency`.
    throughputs
        Heterogeneous clusters: per GPU type the job's throughput model (the
        types it lacks it may not use); None = ``throughput`` on every type.
        ``throughput`` stays the job's model for what knows no types (its
        profile name, efficiency, the sizes of a workload file): give it the
        model of :attr:`submitted_type`.
    types
        GPU types the job may use (None: every type it has a model for).
    submitted_type
        The GPU type the user asked for (what the type-blind ``static`` and
        ``tiresias`` policies run it on); None = the first type of the cluster
        the job may use.
    start_by_s
        Admission deadline: the latest time (seconds from the start of the
        run) the job may start; one that has not started by then is dropped
        (the simulator's admission control), and at it the anti-thrashing rule
        counts it as waiting without bound (``hysteresis.queue_value``).  None:
        it may wait forever.
    """

    id: str
    throughput: ThroughputModel
    batch_min: int
    batch_max: int
    max_local: int
    total_samples: float
    submitted_gpus: int = 1
    submitted_batch: int | None = None
    gpus_min: int = 1
    gpus_max: int | None = None
    arrival_s: float = 0.0
    weight: float = 1.0
    restart_cost_s: float | None = None
    payload: Mapping[str, Any] = field(default_factory=dict)
    efficiency: Callable[[int], float] | None = None
    throughputs: Mapping[str, ThroughputModel] | None = None
    types: tuple[str, ...] | None = None
    submitted_type: str | None = None
    start_by_s: float | None = None

    def model_for(self, gpu_type: str) -> ThroughputModel | None:
        """The throughput model on ``gpu_type``; None where the job may not use that type."""
        if self.types is not None and gpu_type not in self.types:
            return None
        if self.throughputs is None:
            return self.throughput
        return self.throughputs.get(gpu_type)

    def type_on(self, cluster_types: tuple[str, ...]) -> str | None:
        """The type the job was submitted for on a cluster of these types (None: it may use none)."""
        if self.submitted_type is not None:
            return self.submitted_type if self.model_for(self.submitted_type) is not None else None
        return next((t for t in cluster_types if self.model_for(t) is not None), None)

    @property
    def statistical_efficiency(self) -> Callable[[int], float] | None:
        """E(b) of this job: its own, else its named profile's fitted one, else None (E = 1)."""
        if self.efficiency is not None:
            return self.efficiency
        from elasticopt.profiles.efficiency import get_efficiency  # data file read once, on first use

        return get_efficiency(getattr(self.throughput, "name", ""))

    @property
    def batch_submitted(self) -> int:
        """The submitted global batch (``batch_min`` where none was given)."""
        return self.submitted_batch if self.submitted_batch is not None else self.batch_min


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
