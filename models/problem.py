"""The allocation problem, defined once (docs/design.md §2): Cluster, Job, Problem.

All three are frozen dataclasses validated on construction; a broken rule
raises :class:`elasticopt.errors.ValidationError` naming the field path, the
rule and the value found.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import MISSING, dataclass, field, fields
from operator import attrgetter
from types import MappingProxyType
from typing import Any

from elasticopt.errors import ValidationError
from elasticopt.models import rules
from elasticopt.models.cluster import DEFAULT_TYPE, Cluster, Pool, check_int
from elasticopt.models.objectives import get_objective, objective_names
from elasticopt.profiles.throughput import ThroughputModel

__all__ = ["Cluster", "Pool", "Running", "Job", "Option", "Problem", "OBJECTIVES", "DEFAULT_TYPE", "PROGRESS_UNITS"]

#: The objectives elasticopt ships (docs/design.md §2); each is an object of the registry in
#: ``models/objectives.py``, which also holds any registered later (``objective_names()``).
OBJECTIVES: tuple[str, ...] = objective_names()



#: Classes whose instances passed the ThroughputModel protocol check (a runtime protocol check is slow).
_MODEL_TYPES: set[type] = set()


def _is_model(m: object) -> bool:
    """``isinstance(m, ThroughputModel)``, remembered per class."""
    if type(m) in _MODEL_TYPES:
        return True
    if isinstance(m, ThroughputModel):
        _MODEL_TYPES.add(type(m))
        return True
    return False


_ID = attrgetter("id")

#: What a job's remaining work may count (``Job.progress``).
PROGRESS_UNITS: tuple[str, ...] = ("samples", "goodput")

@dataclass(frozen=True)
class Running:
    """The current allocation of a running job.

    Parameters
    ----------
    gpus, batch
        Its k GPUs and global batch b.
    gpu_type
        The GPU type it runs on (None: the only type of a one-pool cluster).
    nodes
        Where known, the indices (in its type's pool) of the nodes its GPUs are
        on; it runs packed when they are no more than ceil(k / g).
    restart_cost_s
        Seconds a change of its option costs it (a restart from its checkpoint); 0 by default.
        Read by objectives that discount a change by the work it loses (``pollux``).
    """

    gpus: int
    batch: int
    gpu_type: str | None = None
    nodes: tuple[int, ...] | None = None
    restart_cost_s: float = 0.0

    def __post_init__(self) -> None:
        check_int("running.gpus", self.gpus, 1)
        check_int("running.batch", self.batch, 1)
        if self.gpu_type is not None and (not isinstance(self.gpu_type, str) or not self.gpu_type):
            raise ValidationError("running.gpu_type", "a GPU type name", self.gpu_type)
        if self.nodes is not None:
            nodes = tuple(sorted(set(self.nodes)))
            object.__setattr__(self, "nodes", nodes)
            if not nodes or len(nodes) > self.gpus:
                raise ValidationError("running.nodes", f"1 to {self.gpus} node indices", self.nodes)
            for n in nodes:
                check_int("running.nodes[]", n, 0)
        c = self.restart_cost_s
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not (math.isfinite(c) and c >= 0):
            raise ValidationError("running.restart_cost_s", "a finite number of seconds >= 0", c)


@dataclass(frozen=True)
class Option:
    """One option of a job on a cluster: ``gpus`` GPUs of ``gpu_type`` at global batch ``batch``.

    ``packed`` options must be placed on the fewest nodes, ceil(k / g) (the
    throughput holds only there); other options may be placed on any free GPUs
    of their type.
    """

    gpu_type: str
    gpus: int
    batch: int
    packed: bool
    samples_per_s: float


@dataclass(frozen=True)
class Job:
    """One training job (docs/design.md §2).

    Parameters
    ----------
    id
        Unique, non-empty job id.
    throughput
        Samples/s at (k, b): measured points or a fitted profile; one model for
        every GPU type, or a mapping GPU type -> model (types it lacks are not
        allowed).
    batch_min, batch_max
        Accuracy-neutral global batch range.
    max_local
        Largest per-GPU batch that fits in memory (b / k <= max_local).
    gpus_min, gpus_max
        GPU range; ``gpus_max=None`` means no limit besides the cluster.
    running
        Current allocation of a running job; None for a queued job.
    remaining_samples
        Work still to do (needed by the ``completion`` objective), in the units ``progress`` names.
    weight
        Objective weight w_j (> 0).
    efficiency
        Statistical efficiency E(b) relative to the job's base batch (a
        callable, e.g. :class:`elasticopt.profiles.efficiency.StatisticalEfficiency`),
        used by the ``goodput`` objective; None means E = 1 for every b.
    types
        GPU types the job may run on (None: every type its throughput knows).
    values
        Caller-supplied value of each option for the ``value`` objective:
        ``(gpu_type, k, b) -> v`` (any placement) or ``(gpu_type, k, b, "packed") -> v``;
        with objective ``value`` an option without a value is not offered.
    progress
        What ``remaining_samples`` counts: ``"samples"`` (samples processed; the default) or
        ``"goodput"`` (effective samples, samples x E(b)): the job progresses at T(k, b), or at
        T(k, b) E(b), per second (:meth:`~elasticopt.models.objectives.JobColumns.progress_rate`).
    """

    id: str
    throughput: Any
    batch_min: int
    batch_max: int
    max_local: int
    gpus_min: int = 1
    gpus_max: int | None = None
    running: Running | None = None
    remaining_samples: float | None = None
    weight: float = 1.0
    efficiency: Callable[[int], float] | None = None
    types: tuple[str, ...] | None = None
    values: Mapping[tuple, float] | None = None
    progress: str = "samples"

    def __post_init__(self) -> None:
        where = f"job {self.id!r}"
        if not isinstance(self.id, str) or not self.id:
            raise ValidationError("job.id", "a non-empty string", self.id)
        tp = self.throughput
        per_type = type(tp) is dict or (not _is_model(tp) and isinstance(tp, Mapping))
        models = tp.values() if per_type else (tp,)
        if per_type and not tp:
            raise ValidationError(f"{where}.throughput", "a ThroughputModel per GPU type (at least one)", {})
        for m in models:
            if not _is_model(m):
                raise ValidationError(f"{where}.throughput", "a ThroughputModel", type(m).__name__)
        check_int(f"{where}.batch_min", self.batch_min, 1)
        check_int(f"{where}.batch_max", self.batch_max, 1)
        if self.batch_max < self.batch_min:
            raise ValidationError(f"{where}.batch_max", f"an integer >= batch_min ({self.batch_min})", self.batch_max)
        check_int(f"{where}.max_local", self.max_local, 1)
        check_int(f"{where}.gpus_min", self.gpus_min, 1)
        if self.gpus_max is not None:
            check_int(f"{where}.gpus_max", self.gpus_max, self.gpus_min)
        if self.remaining_samples is not None:
            r = float(self.remaining_samples)
            if not (math.isfinite(r) and r > 0):
                raise ValidationError(f"{where}.remaining_samples", "a finite number > 0", self.remaining_samples)
        w = float(self.weight)
        if not (math.isfinite(w) and w > 0):
            raise ValidationError(f"{where}.weight", "a finite number > 0", self.weight)
        if self.efficiency is not None and not callable(self.efficiency):
            raise ValidationError(f"{where}.efficiency", "a callable E(batch) or None", type(self.efficiency).__name__)
        if self.progress not in PROGRESS_UNITS:
            raise ValidationError(f"{where}.progress", "one of " + ", ".join(PROGRESS_UNITS), self.progress)
        if self.running is not None and not isinstance(self.running, Running):
            raise ValidationError(f"{where}.running", "a Running(gpus, batch) or None", self.running)
        if self.types is not None:
            types = tuple(self.types)
            object.__setattr__(self, "types", types)
            if not types or any(not isinstance(t, str) or not t for t in types) or len(set(types)) != len(types):
                raise ValidationError(f"{where}.types", "distinct GPU type names (at least one)", self.types)
        if self.values is not None:
            clean: dict[tuple, float] = {}
            for key, v in dict(self.values).items():
                ok = isinstance(key, tuple) and len(key) in (3, 4) and isinstance(key[0], str)
                k, b = (key[1], key[2]) if ok else (0, 0)  # integers >= 1, not bools (unrolled: per option)
                ok = (ok and isinstance(k, int) and not isinstance(k, bool) and k >= 1
                      and isinstance(b, int) and not isinstance(b, bool) and b >= 1)
                ok = ok and (len(key) == 3 or key[3] == "packed")
                if not ok:
                    raise ValidationError(f"{where}.values", "keys (gpu_type, k, b) or (gpu_type, k, b, 'packed')", key)
                fv = float(v)
                if not math.isfinite(fv):
                    raise ValidationError(f"{where}.values[{key}]", "a finite number", v)
                clean[tuple(key)] = fv
            object.__setattr__(self, "values", MappingProxyType(clean))

    @classmethod
    def assembled(cls, id: str, throughput: Any, values: dict[tuple, float] | None = None, **fields: Any) -> "Job":
        """A job whose fields are known to be what ``__post_init__`` accepts and leaves them, built without its
        checks (the per-job half of :meth:`Problem.assembled`).

        For the service's caller-values jobs (``elasticopt/service/translate.py``): every field is derived
        from a request the schema and the translation checked (ids, integers >= 1, finite values, batch
        bounds from the options), ``values`` a plain dict of float values by tuple keys.  Equal to the job
        ``Job(...)`` builds from the same fields (``tests/service/test_service_screen.py``).
        """
        self = object.__new__(cls)
        for name, default in _JOB_FIELDS:
            if name not in fields and default is MISSING:
                raise TypeError(f"Job.assembled: the field {name!r} is required")
            object.__setattr__(self, name, fields.pop(name) if name in fields else default)
        if fields:
            raise TypeError(f"Job.assembled: unknown fields {sorted(fields)}")
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "throughput", throughput)
        object.__setattr__(self, "values", None if values is None else MappingProxyType(values))
        return self

    def __hash__(self) -> int:
        tp = tuple(self.throughput.items()) if isinstance(self.throughput, Mapping) else self.throughput
        vals = tuple(self.values.items()) if self.values is not None else None
        return hash((self.id, tp, self.batch_min, self.batch_max, self.max_local, self.gpus_min, self.gpus_max,
                     self.running, self.remaining_samples, self.weight, self.types, vals, self.progress))

    @property
    def is_running(self) -> bool:
        """True for a running job, False for a queued one."""
        return self.running is not None

    def model_for(self, gpu_type: str) -> Any:
        """The throughput model on ``gpu_type``, None where the job may not run on it."""
        if self.types is not None and gpu_type not in self.types:
            return None
        if isinstance(self.throughput, Mapping):
            return self.throughput.get(gpu_type)
        return self.throughput

    def is_feasible(self, gpus: int, batch: int, gpu_type: str | None = None) -> bool:
        """Whether (k, b) is a feasible option for this job (docs/design.md §2), ignoring capacity.

        The rule (:mod:`elasticopt.models.rules`) and a known throughput; ``gpu_type`` None: the
        job's single throughput model (one-type jobs).
        """
        if not rules.allows(self, gpus, batch, gpu_type):
            return False
        model = self._single_model() if gpu_type is None else self.model_for(gpu_type)
        if model is None:
            return False
        t = model.samples_per_s(gpus, batch)
        return t is not None and math.isfinite(t) and t > 0

    def _single_model(self) -> Any:
        if isinstance(self.throughput, Mapping):
            return next(iter(self.throughput.values())) if len(self.throughput) == 1 else None
        return self.throughput

    def options(self, gpus_cap: int | None = None) -> list[tuple[int, int, float]]:
        """Feasible options ``(k, b, samples_per_s)`` of a one-type job, sorted by (k, b).

        Parameters
        ----------
        gpus_cap
            Drop options with more GPUs than this (e.g. the cluster size);
            None keeps every option the job allows.
        """
        model = self._single_model()
        if model is None:
            return []
        return [(k, b, t) for k, b, t in _model_options(self, model, gpus_cap)]

    def typed_options(self, cluster: Cluster, node_aware: bool = False,
                      at: Collection[tuple[str, int, int]] | None = None) -> list[Option]:
        """Every feasible option of the job on ``cluster`` (docs/design.md §2).

        Per GPU type the job may use: its (k, b) with k up to the type's free
        GPUs, at the model's throughput, placeable anywhere; plus packed options
        where the model knows a packed throughput: measured ``packed`` points,
        or (``node_aware``) a node-aware profile, whose unpacked option then
        gets the spread throughput.

        ``at``: only the options at these ``(gpu_type, k, b)`` (packed and not), by the same rules -- the
        options of the full list there (``verify`` prices a chosen option so under an objective whose value
        depends on that option alone, :attr:`~elasticopt.models.objectives.Objective.per_option`).
        """
        out: list[Option] = []
        for t, pool in cluster.pools.items():  # type: ignore[union-attr]
            model = self.model_for(t)
            if model is None:
                continue
            only = None if at is None else {(k, b) for u, k, b in at if u == t}
            if only is not None and not only:
                continue
            cap = pool.gpus
            g = pool.gpus_per_node
            aware = node_aware and hasattr(model, "samples_per_s_on_nodes") and pool.nodes > 1
            for k, b, sps in _model_options(self, model, cap, only):
                if aware and k > 1:
                    spread = model.samples_per_s_on_nodes(k, b, min(k, pool.nodes))
                    packed = model.samples_per_s_on_nodes(k, b, -(-k // g))
                    if spread is not None and spread > 0:
                        out.append(Option(t, k, b, False, float(spread)))
                    if packed is not None and packed > 0 and (spread is None or packed > spread):
                        out.append(Option(t, k, b, True, float(packed)))
                    continue
                out.append(Option(t, k, b, False, sps))
            packed_pts = getattr(model, "packed", None)
            if packed_pts:
                lim = rules.limits(self, cap)
                for (k, b), sps in packed_pts.items():
                    if (only is None or (k, b) in only) and rules.fits(k, b, *lim):
                        out.append(Option(t, k, b, True, float(sps)))
        return sorted(set(out), key=lambda o: (o.gpu_type, o.gpus, o.batch, o.packed))

#: (name, default) of the Job fields :meth:`Job.assembled` takes as keywords (``MISSING``: required).
_JOB_FIELDS = tuple((f.name, f.default) for f in fields(Job) if f.name not in ("id", "throughput", "values"))


def _model_options(job: Job, model: Any, gpus_cap: int | None,
                   only: set[tuple[int, int]] | None = None) -> list[tuple[int, int, float]]:
    """(k, b, samples/s) of the model's candidates that keep to the job's rules (``only``: those of these)."""
    lim = rules.limits(job, gpus_cap)
    out = set()
    for k, b in model.candidates(lim[1], job.batch_min, job.batch_max):
        if (only is None or (k, b) in only) and rules.fits(k, b, *lim):
            t = model.samples_per_s(k, b)
            if t is not None and math.isfinite(t) and t > 0:
                out.add((k, b, float(t)))
    return sorted(out)


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
        The name of a registered objective (``models/objectives.py``):
        ``"speedup"`` (default), ``"throughput"``, ``"completion"``,
        ``"goodput"`` (speedup of T(k, b) * E(b)), ``"value"`` (the caller's
        own value per option, ``Job.values``) or one registered with
        :func:`~elasticopt.models.objectives.register_objective`.
    allow_preemption
        Whether running jobs may be sent back to the queue (idle option).
    rescale_penalty
        λ >= 0 subtracted from every option of a running job other than its
        current (k, b), in objective units.
    priority
        Optional order of job ids that breaks ties (earlier = preferred):
        compiled as an integer bonus too small to change any untied decision.
    node_aware
        Offer node-aware profiles both packed (fewest nodes, packed throughput)
        and anywhere (spread throughput); False keeps one option per (type, k, b)
        at the profile's packed throughput, placeable anywhere (format 1).
    """

    cluster: Cluster
    jobs: tuple[Job, ...]
    objective: str = "speedup"
    allow_preemption: bool = False
    rescale_penalty: float = 0.0
    priority: tuple[str, ...] | None = field(default=None)
    node_aware: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "jobs", tuple(self.jobs))
        if not isinstance(self.cluster, Cluster):
            raise ValidationError("cluster", "a Cluster", type(self.cluster).__name__)
        requires = get_objective(self.objective).requires  # ValidationError naming the registered ones
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
            for fld, what in requires.items():
                if getattr(job, fld) is None:
                    raise ValidationError(f"jobs[{i}].{fld}", what, None)
            types = self.cluster.types
            for t in job.types or ():
                if t not in types:
                    raise ValidationError(f"jobs[{i}].types", "GPU types of the cluster: " + ", ".join(types), t)
            if isinstance(job.throughput, Mapping):
                for t in job.throughput:
                    if t not in types:
                        raise ValidationError(f"jobs[{i}].throughput", "GPU types of the cluster: " + ", ".join(types), t)
            run = job.running
            if run is not None:
                if run.gpu_type is None and len(types) > 1:
                    raise ValidationError(f"jobs[{i}].running.gpu_type", "the GPU type it runs on (the cluster has several)", None)
                rt = self.running_type(job)
                if rt not in types:
                    raise ValidationError(f"jobs[{i}].running.gpu_type", "a GPU type of the cluster: " + ", ".join(types), rt)
                if run.nodes is not None and max(run.nodes) >= self.cluster.pools[rt].nodes:  # type: ignore[index]
                    raise ValidationError(
                        f"jobs[{i}].running.nodes", f"node indices below {self.cluster.pools[rt].nodes}", run.nodes  # type: ignore[index]
                    )
        if self.priority is not None:
            prio = tuple(self.priority)
            object.__setattr__(self, "priority", prio)
            if len(set(prio)) != len(prio):
                raise ValidationError("priority", "each job id at most once", prio)
            for jid in prio:
                if jid not in seen:
                    raise ValidationError("priority", "ids of jobs in the problem", jid)

    @classmethod
    def assembled(cls, cluster: Cluster, jobs: tuple[Job, ...], objective: str = "speedup",
                  allow_preemption: bool = False, rescale_penalty: float = 0.0,
                  priority: tuple[str, ...] | None = None, node_aware: bool = False) -> "Problem":
        """A problem whose jobs are known to fit it, built without the per-job checks of ``__post_init__``.

        For a scheduler that builds every job itself at every decision (``to_model_job`` from a
        snapshot: valid jobs, distinct ids, the cluster's types, running jobs on its nodes), where
        checking each job again per decision costs more than the rest of the problem.  The
        problem-level checks (cluster, objective, penalty) still run.  A test compiles both
        constructions at every decision of simulations and compares the tables
        (``tests/test_scheduling_incremental.py``).
        """
        if not isinstance(cluster, Cluster):
            raise ValidationError("cluster", "a Cluster", type(cluster).__name__)
        get_objective(objective)
        pen = float(rescale_penalty)
        if not (math.isfinite(pen) and pen >= 0):
            raise ValidationError("rescale_penalty", "a finite number >= 0", rescale_penalty)
        self = object.__new__(cls)
        for name, value in (("cluster", cluster), ("jobs", tuple(jobs)), ("objective", objective),
                            ("allow_preemption", allow_preemption), ("rescale_penalty", rescale_penalty),
                            ("priority", None if priority is None else tuple(priority)), ("node_aware", node_aware)):
            object.__setattr__(self, name, value)
        return self

    @property
    def job_ids(self) -> tuple[str, ...]:
        """The job ids in problem order."""
        return tuple(map(_ID, self.jobs))

    def job(self, job_id: str) -> Job:
        """The job with this id (KeyError if absent)."""
        for j in self.jobs:
            if j.id == job_id:
                return j
        raise KeyError(job_id)

    def running_type(self, job: Job) -> str | None:
        """The GPU type a running job runs on (None for a queued job)."""
        if job.running is None:
            return None
        return job.running.gpu_type if job.running.gpu_type is not None else self.cluster.types[0]

    def idle_allowed(self, job: Job) -> bool:
        """Whether ``job`` may be left with 0 GPUs."""
        return job.running is None or self.allow_preemption
