"""The allocation problem, defined once (docs/design.md §2): Cluster, Job, Problem.

All three are frozen dataclasses validated on construction; a broken rule
raises :class:`elasticopt.errors.ValidationError` naming the field path, the
rule and the value found.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from elasticopt.errors import ValidationError
from elasticopt.models.throughput import ThroughputModel

__all__ = ["Cluster", "Running", "Job", "Problem", "OBJECTIVES"]

#: The separable objectives of docs/design.md §2 (values: ``elasticopt.models.table.OBJECTIVE_VALUES``).
OBJECTIVES: tuple[str, ...] = ("speedup", "throughput", "completion", "goodput")


def _check_int(path: str, value: object, lo: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise ValidationError(path, f"an integer >= {lo}", value)


@dataclass(frozen=True)
class Cluster:
    """G identical GPUs in nodes of ``gpus_per_node`` GPUs.

    Parameters
    ----------
    gpus
        Total GPUs G (>= 0).
    gpus_per_node
        GPUs per node g (>= 1).
    """

    gpus: int
    gpus_per_node: int = 8

    def __post_init__(self) -> None:
        _check_int("cluster.gpus", self.gpus, 0)
        _check_int("cluster.gpus_per_node", self.gpus_per_node, 1)


@dataclass(frozen=True)
class Running:
    """The current allocation of a running job: ``gpus`` GPUs at global batch ``batch``."""

    gpus: int
    batch: int

    def __post_init__(self) -> None:
        _check_int("running.gpus", self.gpus, 1)
        _check_int("running.batch", self.batch, 1)


@dataclass(frozen=True)
class Job:
    """One training job (docs/design.md §2).

    Parameters
    ----------
    id
        Unique, non-empty job id.
    throughput
        Samples/s at (k, b): measured points or a fitted profile.
    batch_min, batch_max
        Accuracy-neutral global batch range.
    max_local
        Largest per-GPU batch that fits in memory (b / k <= max_local).
    gpus_min, gpus_max
        GPU range; ``gpus_max=None`` means no limit besides the cluster.
    running
        Current (k, b) of a running job; None for a queued job.
    remaining_samples
        Samples still to process (needed by the ``completion`` objective).
    weight
        Objective weight w_j (> 0).
    efficiency
        Statistical efficiency E(b) relative to the job's base batch (a
        callable, e.g. :class:`elasticopt.profiles.efficiency.StatisticalEfficiency`),
        used by the ``goodput`` objective; None means E = 1 for every b.
    """

    id: str
    throughput: ThroughputModel
    batch_min: int
    batch_max: int
    max_local: int
    gpus_min: int = 1
    gpus_max: int | None = None
    running: Running | None = None
    remaining_samples: float | None = None
    weight: float = 1.0
    efficiency: Callable[[int], float] | None = None

    def __post_init__(self) -> None:
        where = f"job {self.id!r}"
        if not isinstance(self.id, str) or not self.id:
            raise ValidationError("job.id", "a non-empty string", self.id)
        if not isinstance(self.throughput, ThroughputModel):
            raise ValidationError(f"{where}.throughput", "a ThroughputModel", type(self.throughput).__name__)
        _check_int(f"{where}.batch_min", self.batch_min, 1)
        _check_int(f"{where}.batch_max", self.batch_max, 1)
        if self.batch_max < self.batch_min:
            raise ValidationError(f"{where}.batch_max", f"an integer >= batch_min ({self.batch_min})", self.batch_max)
        _check_int(f"{where}.max_local", self.max_local, 1)
        _check_int(f"{where}.gpus_min", self.gpus_min, 1)
        if self.gpus_max is not None:
            _check_int(f"{where}.gpus_max", self.gpus_max, self.gpus_min)
        if self.remaining_samples is not None:
            r = float(self.remaining_samples)
            if not (math.isfinite(r) and r > 0):
                raise ValidationError(f"{where}.remaining_samples", "a finite number > 0", self.remaining_samples)
        w = float(self.weight)
        if not (math.isfinite(w) and w > 0):
            raise ValidationError(f"{where}.weight", "a finite number > 0", self.weight)
        if self.efficiency is not None and not callable(self.efficiency):
            raise ValidationError(f"{where}.efficiency", "a callable E(batch) or None", type(self.efficiency).__name__)
        if self.running is not None and not isinstance(self.running, Running):
            raise ValidationError(f"{where}.running", "a Running(gpus, batch) or None", self.running)

    @property
    def is_running(self) -> bool:
        """True for a running job, False for a queued one."""
        return self.running is not None

    def is_feasible(self, gpus: int, batch: int) -> bool:
        """Whether (k, b) is a feasible option for this job (docs/design.md §2), ignoring capacity."""
        if gpus < self.gpus_min or (self.gpus_max is not None and gpus > self.gpus_max):
            return False
        if not (self.batch_min <= batch <= self.batch_max):
            return False
        if batch % gpus != 0 or batch // gpus > self.max_local:
            return False
        t = self.throughput.samples_per_s(gpus, batch)
        return t is not None and math.isfinite(t) and t > 0

    def options(self, gpus_cap: int | None = None) -> list[tuple[int, int, float]]:
        """Feasible options ``(k, b, samples_per_s)``, sorted by (k, b).

        Parameters
        ----------
        gpus_cap
            Drop options with more GPUs than this (e.g. the cluster size);
            None keeps every option the job allows.
        """
        k_hi = self.gpus_max if self.gpus_max is not None else (1 << 30)
        if gpus_cap is not None:
            k_hi = min(k_hi, gpus_cap)
        out = []
        for k, b in self.throughput.candidates(k_hi, self.batch_min, self.batch_max):
            if k <= k_hi and self.is_feasible(k, b):
                out.append((k, b, float(self.throughput.samples_per_s(k, b))))  # type: ignore[arg-type]
        return sorted(set(out))


@dataclass(frozen=True)
class Problem:
    """One allocation problem: pick (k, b) or idle for every job (docs/design.md §2).

    Parameters
    ----------
    cluster
        The GPUs available.
    jobs
        The jobs, queued and running; ids must be unique.
    objective
        ``"speedup"`` (default), ``"throughput"``, ``"completion"`` or
        ``"goodput"`` (speedup of T(k, b) * E(b)).
    allow_preemption
        Whether running jobs may be sent back to the queue (idle option).
    rescale_penalty
        λ >= 0 subtracted from every option of a running job other than its
        current (k, b), in objective units.
    priority
        Optional order of job ids that breaks ties (earlier = preferred):
        compiled as an integer bonus too small to change any untied decision.
    """

    cluster: Cluster
    jobs: tuple[Job, ...]
    objective: str = "speedup"
    allow_preemption: bool = False
    rescale_penalty: float = 0.0
    priority: tuple[str, ...] | None = field(default=None)

    def __post_init__(self) -> None:
        object.__setattr__(self, "jobs", tuple(self.jobs))
        if not isinstance(self.cluster, Cluster):
            raise ValidationError("cluster", "a Cluster", type(self.cluster).__name__)
        if self.objective not in OBJECTIVES:
            raise ValidationError("objective", f"one of {', '.join(OBJECTIVES)}", self.objective)
        pen = float(self.rescale_penalty)
        if not (math.isfinite(pen) and pen >= 0):
            raise ValidationError("rescale_penalty", "a finite number >= 0", self.rescale_penalty)
        seen: dict[str, int] = {}
        for i, job in enumerate(self.jobs):
            if not isinstance(job, Job):
                raise ValidationError(f"jobs[{i}]", "a Job", type(job).__name__)
            if job.id in seen:
                raise ValidationError(f"jobs[{i}].id", f"a unique id (jobs[{seen[job.id]}] has it too)", job.id)
            seen[job.id] = i
            if self.objective == "completion" and job.remaining_samples is None:
                raise ValidationError(
                    f"jobs[{i}].remaining_samples", "a number (objective 'completion' divides by it)", None
                )
        if self.priority is not None:
            prio = tuple(self.priority)
            object.__setattr__(self, "priority", prio)
            if len(set(prio)) != len(prio):
                raise ValidationError("priority", "each job id at most once", prio)
            for jid in prio:
                if jid not in seen:
                    raise ValidationError("priority", "ids of jobs in the problem", jid)

    @property
    def job_ids(self) -> tuple[str, ...]:
        """The job ids in problem order."""
        return tuple(j.id for j in self.jobs)

    def job(self, job_id: str) -> Job:
        """The job with this id (KeyError if absent)."""
        for j in self.jobs:
            if j.id == job_id:
                return j
        raise KeyError(job_id)

    def idle_allowed(self, job: Job) -> bool:
        """Whether ``job`` may be left with 0 GPUs."""
        return job.running is None or self.allow_preemption
