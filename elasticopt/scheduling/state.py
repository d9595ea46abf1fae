"""What a policy sees (:class:`Snapshot`) and what it answers (:class:`Allocation`).

A snapshot is the autoscaler's view of the cluster at one instant: the time,
the cluster and every queued and running job with its spec (profile, batch
range, submitted k and b), remaining samples, current allocation and the time
since its last start or rescale.  A policy returns the target (k, b) of every
job, or None for "holds no GPUs".  Neither type knows whether the cluster is
simulated or real.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from elasticopt.models import Cluster, Job, Running, rules
from elasticopt.scheduling.actions import Option, Placed
from elasticopt.scheduling.executor import Phase
from elasticopt.scheduling.jobspec import JobSpec

__all__ = [
    "JobState",
    "PROGRESS_UNITS",
    "Snapshot",
    "Allocation",
    "option_error",
    "RestrictedThroughput",
    "CachedThroughput",
    "cached",
    "to_model_job",
]

#: How a job's work is counted: samples processed, or effective samples (samples x E(b)).
PROGRESS_UNITS = ("samples", "goodput")


@dataclass(frozen=True)
class JobState:
    """One active (queued or running) job as the scheduler sees it.

    Parameters
    ----------
    spec
        The job as submitted.
    phase
        QUEUED, RESTARTING (paying its restart cost) or RUNNING.
    gpus, batch
        Current allocation (0, 0 while queued).
    samples_done
        Samples processed so far.
    since_rescale_s
        Seconds since the last start or rescale; None if never started.
    restart_cost_s
        The restart cost the autoscaler charges this job at a start or rescale.
    progress
        How the job's work is counted: ``"samples"`` (samples processed) or
        ``"goodput"`` (effective samples: samples times the statistical
        efficiency E(b) of their batch); ``samples_done`` and the job's
        ``total_samples`` are in that unit.
    gpu_type
        The GPU type it runs on (None while queued, or where nobody places jobs).
    placed
        Where its GPUs are, ``(type, ((node, GPU indices), ...))``, where the
        executor places jobs on named GPUs (None otherwise).
    """

    spec: JobSpec
    phase: Phase
    gpus: int
    batch: int
    samples_done: float
    since_rescale_s: float | None
    restart_cost_s: float
    progress: str = "samples"
    gpu_type: str | None = None
    placed: Placed | None = None

    @property
    def id(self) -> str:
        """The job id."""
        return self.spec.id

    @property
    def is_running(self) -> bool:
        """Holds GPUs (running or restarting)."""
        return self.gpus > 0

    @property
    def allocation(self) -> Option | None:
        """Current (k, b), None while queued."""
        return (self.gpus, self.batch) if self.gpus > 0 else None

    @property
    def remaining_samples(self) -> float:
        """Samples still to process (> 0 for an active job)."""
        return max(self.spec.total_samples - self.samples_done, 0.0)

    @property
    def samples_per_s(self) -> float | None:
        """Believed rate at the current allocation (None while queued)."""
        if self.gpus <= 0:
            return None
        return self.spec.throughput.samples_per_s(self.gpus, self.batch)

    def progress_per_s(self, gpus: int, batch: int, gpu_type: str | None = None) -> float | None:
        """Believed progress rate on (gpus, batch) in :attr:`progress` units per second (None if unknown).

        On ``gpu_type`` (default: the type it runs on; the job's one model where it has no types).
        """
        gpu_type = gpu_type or self.gpu_type
        model = self.spec.throughput if gpu_type is None else self.spec.model_for(gpu_type)
        if model is None:
            return None
        t = model.samples_per_s(gpus, batch)
        if t is None or self.progress != "goodput":
            return t
        eff = self.spec.statistical_efficiency
        return t if eff is None else t * float(eff(batch))


@dataclass(frozen=True)
class Snapshot:
    """The cluster at one instant: time, capacity, active jobs in arrival order."""

    time_s: float
    cluster: Cluster
    jobs: tuple[JobState, ...]

    @property
    def queued(self) -> tuple[JobState, ...]:
        """Jobs holding no GPUs, in arrival order."""
        return tuple(j for j in self.jobs if not j.is_running)

    @property
    def running(self) -> tuple[JobState, ...]:
        """Jobs holding GPUs, in arrival order."""
        return tuple(j for j in self.jobs if j.is_running)

    @property
    def gpus_in_use(self) -> int:
        """GPUs held by running and restarting jobs."""
        return sum(j.gpus for j in self.jobs)

    @property
    def free_gpus(self) -> int:
        """GPUs nobody holds."""
        return self.cluster.gpus - self.gpus_in_use

    def job(self, job_id: str) -> JobState:
        """The state of one job (KeyError if not active)."""
        for j in self.jobs:
            if j.id == job_id:
                return j
        raise KeyError(job_id)


@dataclass(frozen=True)
class Allocation:
    """A policy's answer: job id -> (k, b), or None for "holds no GPUs".

    Jobs of the snapshot missing from ``assignments`` hold no GPUs.  For a
    running job that means a preemption (stop), which the autoscaler performs
    as asked.

    Parameters
    ----------
    assignments
        Target allocation per job id.
    solver_s
        Seconds the solver itself reported (0 for policies without one).
    info
        Free-form details (solver name, status, objective) for the records.
    gpu_types
        Per job with GPUs, the GPU type (required on a cluster of several
        types; on one type it is that type).
    packed
        Jobs whose option must sit on the fewest nodes, ceil(k / g).
    nodes
        Optionally, a placement of every job with GPUs, ``job -> (type,
        ((node, GPU indices), ...))``, that fits the nodes (a solver's): the
        autoscaler keeps running jobs on their GPUs where it can, and places
        a pool as given here where keeping them would leave a packed job
        spread (:mod:`elasticopt.scheduling.placing`).
    """

    assignments: Mapping[str, Option | None]
    solver_s: float = 0.0
    info: Mapping[str, Any] = field(default_factory=dict)
    gpu_types: Mapping[str, str] = field(default_factory=dict)
    packed: Mapping[str, bool] = field(default_factory=dict)
    nodes: Mapping[str, Placed] = field(default_factory=dict)

    def get(self, job_id: str) -> Option | None:
        """Target of one job (None = holds no GPUs)."""
        return self.assignments.get(job_id)

    @property
    def gpus(self) -> int:
        """Total GPUs the allocation uses."""
        return sum(v[0] for v in self.assignments.values() if v is not None)


def option_error(
    spec: JobSpec, gpus: int, batch: int, cluster_gpus: int | None = None, gpu_type: str | None = None
) -> str | None:
    """Why (k, b) is not a feasible option for ``spec`` (docs/design.md §2), or None if it is.

    Parameters
    ----------
    spec
        The job.
    gpus, batch
        The option.
    cluster_gpus
        Also reject k above the cluster size (of ``gpu_type``) when given.
    gpu_type
        The GPU type (None: the job's one model).
    """
    why = rules.why_not(spec, gpus, batch, gpu_type, cluster_gpus)  # the rule book: the limits and the type
    if why is not None:
        return why
    model = spec.throughput if gpu_type is None else spec.model_for(gpu_type)
    if model is None:
        return f"the job may not use GPU type {gpu_type!r}"
    t = model.samples_per_s(gpus, batch)
    if t is None or not (math.isfinite(t) and t > 0):
        return f"throughput model {model.name!r} does not know (k={gpus}, b={batch})"
    return None


@dataclass(frozen=True, eq=False)
class RestrictedThroughput:
    """A throughput model offering only the options ``allowed(k, b)`` accepts.

    Policies use it to restrict a job's options (the fixed-batch baseline keeps
    b at its submitted value; the anti-thrashing rule drops grows that would
    not pay back their restart) without touching the problem definition.
    """

    base: Any
    allowed: Callable[[int, int], bool]

    @property
    def name(self) -> str:
        return self.base.name

    def samples_per_s(self, gpus: int, batch: int) -> float | None:
        if not self.allowed(gpus, batch):
            return None
        return self.base.samples_per_s(gpus, batch)

    def candidates(self, gpus_max: int, batch_min: int, batch_max: int) -> list[tuple[int, int]]:
        return [kb for kb in self.base.candidates(gpus_max, batch_min, batch_max) if self.allowed(*kb)]

    def __getattr__(self, attr: str) -> Any:
        """The base model's node-aware parts, restricted alike, where the base has them.

        ``samples_per_s_on_nodes`` (a node-aware profile: its spread and packed rates) and measured
        ``packed`` points: a restricted job keeps the packed options its restriction allows, so a
        running job under the anti-thrashing rule is offered its packed options and keeps its current
        option where that runs packed (before, the wrapper hid both: docs/design.md §4).
        """
        if attr == "samples_per_s_on_nodes":
            on_nodes = getattr(self.base, attr)  # AttributeError where the base is not node-aware
            allowed = self.allowed

            def restricted(gpus: int, batch: int, nodes: int) -> float | None:
                return on_nodes(gpus, batch, nodes) if allowed(gpus, batch) else None

            return restricted
        if attr == "packed":
            points = getattr(self.base, attr)
            return {kb: t for kb, t in points.items() if self.allowed(*kb)} if points else points
        raise AttributeError(attr)


class CachedThroughput:
    """A throughput model that remembers every answer of the model it wraps.

    Fitted profiles evaluate a formula per call (tens of microseconds); a
    scheduler asks the same (k, b) of the same job at every decision.  The
    autoscaler wraps every submitted job's model once (:func:`cached`).
    """

    __slots__ = ("base", "_rates", "_cands")

    def __init__(self, base: Any):
        self.base = base
        self._rates: dict[tuple[int, int], float | None] = {}
        self._cands: dict[tuple[int, int, int], list[tuple[int, int]]] = {}

    @property
    def name(self) -> str:
        return self.base.name

    def samples_per_s(self, gpus: int, batch: int) -> float | None:
        key = (gpus, batch)
        try:
            return self._rates[key]
        except KeyError:
            t = self._rates[key] = self.base.samples_per_s(gpus, batch)
            return t

    def candidates(self, gpus_max: int, batch_min: int, batch_max: int) -> list[tuple[int, int]]:
        key = (gpus_max, batch_min, batch_max)
        try:
            return list(self._cands[key])
        except KeyError:
            c = self._cands[key] = list(self.base.candidates(gpus_max, batch_min, batch_max))
            return list(c)

    def __getattr__(self, attr: str) -> Any:  # batch_min, max_local, rows()... of the base model
        if attr in CachedThroughput.__slots__:
            raise AttributeError(attr)
        return getattr(self.base, attr)


def cached(model: Any) -> Any:
    """``model`` wrapped in a :class:`CachedThroughput` (unchanged if it already is one)."""
    return model if isinstance(model, CachedThroughput) else CachedThroughput(model)


def to_model_job(state: JobState, allowed: Callable[..., bool] | None = None, nodes: bool = False,
                 models: Callable[[Any], Any] | None = None) -> Job:
    """The :class:`elasticopt.models.Job` of an active job (docs/design.md §2).

    Parameters
    ----------
    state
        The job's state in the snapshot.
    allowed
        Optional filter on its options, ``allowed(k, b)``; for a job with a model per GPU type
        (``JobSpec.throughputs``) ``allowed(k, b, gpu_type)``.  Its current option is always kept.
    nodes
        Give a running job's nodes (``Running.nodes``: its current option is packed iff they are
        the fewest), for node-aware problems.
    models
        Optionally, what to give the job instead of each of its throughput models (``models(m)``,
        applied after ``allowed``'s restriction): the incremental compile gives a restricted job a
        shared wrapper per model, and its restriction as a mask (:mod:`elasticopt.scheduling.typedcompile`).
    """
    spec = state.spec
    cur = state.allocation
    if spec.throughputs is None:
        model: object = spec.throughput
        if allowed is not None:
            model = RestrictedThroughput(model, lambda k, b: (k, b) == cur or allowed(k, b))
        if models is not None:
            model = models(model)
    else:
        model = {}
        for t, m in spec.throughputs.items():
            if allowed is not None:
                now = cur if t == state.gpu_type else None
                m = RestrictedThroughput(m, lambda k, b, t=t, now=now: (k, b) == now or allowed(k, b, t))
            model[t] = m if models is None else models(m)  # type: ignore[index]
    running = None
    if state.is_running:
        where = tuple(n for n, _ in state.placed[1]) if (nodes and state.placed) else None
        running = Running(state.gpus, state.batch, state.gpu_type, where, float(state.restart_cost_s))
    remaining = state.remaining_samples
    return Job(
        id=spec.id,
        throughput=model,
        batch_min=spec.batch_min,
        batch_max=spec.batch_max,
        max_local=spec.max_local,
        gpus_min=spec.gpus_min,
        gpus_max=spec.gpus_max,
        running=running,
        remaining_samples=remaining if remaining > 0 else None,
        weight=spec.weight,
        efficiency=spec.statistical_efficiency,
        types=spec.types,
        progress=state.progress,
    )
