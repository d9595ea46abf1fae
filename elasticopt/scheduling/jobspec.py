"""A submitted training job, as schedulers, the simulator and the launcher know it (docs/design.md §4)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from elasticopt.profiles.throughput import ThroughputModel

__all__ = ["JobSpec"]


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
