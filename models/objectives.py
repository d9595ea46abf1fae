"""The separable objectives (docs/design.md §2): one object per objective, in one registry.

An objective is an :class:`Objective`: its name, the job fields it needs
(``requires``), its documentation and one array value function over all
options of all jobs at once, ``values(rows, jobs) -> v`` per option (nan: the
objective does not offer that option).  Every path reads the registry: the
compile (:func:`values_of`), the independent checks (``verify``, brute force,
through :func:`job_values`), the scheduler's incremental table
(``scheduling/typedcompile.py``, the compiler itself), the instance loaders, the service and the
command line.  A new objective is one :func:`register_objective` call
(docs/guides/own-objective.md).

The value function sees the options as :class:`OptionRows` and the jobs as
:class:`JobColumns` (weights, remaining work, statistical efficiency, caller
values), so that the same function serves a :class:`~elasticopt.models.Problem`
and the scheduler's cached rows alike.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from operator import attrgetter
from types import MappingProxyType
from typing import Any, Protocol

import numpy as np

from elasticopt.errors import DuplicateNameError, ValidationError

__all__ = ["Objective", "OptionRows", "JobColumns", "ModelJobs", "register_objective", "get_objective",
           "objective_names", "per_gpu_best", "job_values", "jobs_values", "current_key", "values_of", "JOB_FIELDS",
           "pollux_objective"]

_WEIGHT = attrgetter("weight")

#: The job fields an objective may require (``Objective.requires``), as instance files name them.
JOB_FIELDS: tuple[str, ...] = ("remaining_samples", "values", "efficiency")


@dataclass(frozen=True)
class OptionRows:
    """Options of several jobs, flattened: option i belongs to job ``job[i]``.

    Attributes
    ----------
    job
        ``job[i]``: index (into the jobs passed alongside) of the job of option i.
    gpus, batch, samples_per_s
        k, b and T(k, b) of option i.
    gpu_type
        ``gpu_type[i]``: index into ``types`` of option i's GPU type.
    packed
        ``packed[i]``: option i sits on the fewest nodes.
    types
        GPU type names.
    current
        ``current[i]``: option i is its (running) job's current option; the compiler fills it in
        before the objective's value function is called (None elsewhere).
    """

    job: np.ndarray
    gpus: np.ndarray
    batch: np.ndarray
    samples_per_s: np.ndarray
    gpu_type: np.ndarray
    packed: np.ndarray
    types: tuple[str, ...]
    current: np.ndarray | None = None

    @classmethod
    def of(cls, problem: Any, opts: Sequence) -> "OptionRows":
        """The options of one job: ``Option`` objects (``Job.typed_options``) or ``(k, b, samples_per_s)`` tuples."""
        types = problem.cluster.types
        if opts and hasattr(opts[0], "gpu_type"):
            tindex = {t: i for i, t in enumerate(types)}
            k = [o.gpus for o in opts]
            b = [o.batch for o in opts]
            t = [o.samples_per_s for o in opts]
            ty = [tindex[o.gpu_type] for o in opts]
            p = [o.packed for o in opts]
        else:
            k = [o[0] for o in opts]
            b = [o[1] for o in opts]
            t = [o[2] for o in opts]
            ty = [0] * len(opts)
            p = [False] * len(opts)
        m = len(opts)
        return cls(np.zeros(m, dtype=np.int64), np.asarray(k, dtype=np.int64), np.asarray(b, dtype=np.int64),
                   np.asarray(t, dtype=np.float64), np.asarray(ty, dtype=np.int64), np.asarray(p, dtype=bool), types)


class JobColumns(Protocol):
    """What an objective sees of the jobs (``n`` of them), per job or per option of :class:`OptionRows`."""

    @property
    def n(self) -> int:
        """Number of jobs."""
        ...

    @property
    def weight(self) -> np.ndarray:
        """``[n]``: the weight w_j."""
        ...

    @property
    def remaining(self) -> np.ndarray:
        """``[n]``: the remaining work (samples, or the scheduler's progress units); nan where unknown."""
        ...

    def efficiency(self, rows: OptionRows) -> np.ndarray:
        """Per option the job's statistical efficiency E(b) (1 where the job has none)."""
        ...

    def caller_values(self, rows: OptionRows) -> np.ndarray:
        """Per option the caller's value of it (``Job.values``; nan where none)."""
        ...

    @property
    def running(self) -> np.ndarray:
        """``[n]``: the job is running."""
        ...

    @property
    def restart_cost_s(self) -> np.ndarray:
        """``[n]``: seconds a change of a running job's option costs it (``Running.restart_cost_s``; 0 queued)."""
        ...

    def progress_rate(self, rows: OptionRows) -> np.ndarray:
        """Per option the job's progress per second there: T(k, b), times E(b) where it counts goodput."""
        ...


class ModelJobs:
    """:class:`JobColumns` of a sequence of :class:`~elasticopt.models.Job` (read on first use)."""

    def __init__(self, jobs: Sequence[Any]):
        self.jobs = jobs
        self.n = len(jobs)

    @cached_property
    def weight(self) -> np.ndarray:
        return np.fromiter(map(_WEIGHT, self.jobs), dtype=np.float64, count=self.n)

    @cached_property
    def remaining(self) -> np.ndarray:
        return np.fromiter((j.remaining_samples or np.nan for j in self.jobs), dtype=np.float64, count=self.n)

    def efficiency(self, rows: OptionRows) -> np.ndarray:
        e = np.ones(rows.job.size)
        jobs = self.jobs
        has = np.fromiter((j.efficiency is not None for j in jobs), dtype=bool, count=self.n)
        for i in np.flatnonzero(has[rows.job]).tolist():
            e[i] = float(jobs[int(rows.job[i])].efficiency(int(rows.batch[i])))
        return e

    @cached_property
    def running(self) -> np.ndarray:
        return np.fromiter((j.running is not None for j in self.jobs), dtype=bool, count=self.n)

    @cached_property
    def restart_cost_s(self) -> np.ndarray:
        return np.fromiter((0.0 if j.running is None else j.running.restart_cost_s for j in self.jobs),
                           dtype=np.float64, count=self.n)

    def progress_rate(self, rows: OptionRows) -> np.ndarray:
        good = np.fromiter((j.progress == "goodput" for j in self.jobs), dtype=bool, count=self.n)
        if not good.any():
            return rows.samples_per_s
        return np.where(good[rows.job], rows.samples_per_s * self.efficiency(rows), rows.samples_per_s)

    def caller_values(self, rows: OptionRows) -> np.ndarray:
        # per job its values as sorted codes (kept per values object), then one binary search per option in
        # numba: 16,000 options of 1,000 jobs ~4.2 -> ~0.6 ms; a hypothesis test holds it to the dict look-up
        # per option, _caller_values_by_row, which answers wherever a key or an option is outside the codes
        if rows.job.size == 0:
            return np.full(0, np.nan)
        if len(rows.types) > _T_MAX or int(rows.gpus.max()) >= _K_MAX or int(rows.batch.max()) >= _B_MAX \
                or int(rows.gpus.min()) < 0 or int(rows.batch.min()) < 0:
            return _caller_values_by_row(self.jobs, rows)
        tindex = {t: i for i, t in enumerate(rows.types)}
        per_job = [_value_codes(j.values, rows.types, tindex) for j in self.jobs]
        if any(c is None for c in per_job):
            return _caller_values_by_row(self.jobs, rows)
        from elasticopt.models.kernels import segment_lookup  # numba: imported on first use

        sizes = np.fromiter((c[0].size for c in per_job), dtype=np.int64, count=len(per_job))  # type: ignore[index]
        end = np.cumsum(sizes)
        codes = np.concatenate([c[0] for c in per_job]) if per_job else np.zeros(0, dtype=np.int64)  # type: ignore[index]
        vals = np.concatenate([c[1] for c in per_job]) if per_job else np.zeros(0)  # type: ignore[index]
        row_code = _encode(rows.gpu_type, rows.gpus, rows.batch, rows.packed)
        return segment_lookup(rows.job, row_code, end - sizes, end, codes, vals)


def _caller_values_by_row(jobs: Sequence[Any], rows: OptionRows) -> np.ndarray:
    """:meth:`ModelJobs.caller_values` option by option, a dict look-up each (the reference)."""
    out = np.full(rows.job.size, np.nan)
    types = rows.types
    for i, (j, t, k, b, p) in enumerate(zip(rows.job.tolist(), rows.gpu_type.tolist(), rows.gpus.tolist(),
                                            rows.batch.tolist(), rows.packed.tolist())):
        vals = jobs[j].values
        if vals:
            v = vals.get((types[t], k, b, "packed") if p else (types[t], k, b))
            if v is not None:
                out[i] = v
    return out


#: Bounds of an option's code ((type, k, b, packed) in one int64): 2**6 types, k < 2**20, b < 2**36.
_T_MAX, _K_MAX, _B_MAX = 1 << 6, 1 << 20, 1 << 36


def _encode(t: Any, k: Any, b: Any, packed: Any) -> Any:
    """(type index, k, b, packed) -> one int64 code, ordered as the tuples (arrays or ints within the bounds)."""
    return (((t * _K_MAX + k) * _B_MAX) + b) * 2 + packed


#: Per ``Job.values`` object and type names: (the object, its keys' codes ascending, their values as floats), or
#: None for a key outside the codes (then the reference answers).  Each entry holds its object, so that its id
#: cannot be another's while it lives; cleared when full.
_CODES: dict[tuple[int, tuple[str, ...]], tuple[Any, Any]] = {}
_CODES_MAX = 16384
_EMPTY_CODES = (np.zeros(0, dtype=np.int64), np.zeros(0))


def _value_codes(values: Mapping[tuple, float] | None, types: tuple[str, ...],
                 tindex: Mapping[str, int]) -> tuple[np.ndarray, np.ndarray] | None:
    """A job's values as (codes ascending, floats); keys of types not in ``types`` dropped (no option of them
    is asked for); None where a key is not (type, int k, int b[, "packed"]) within the codes' bounds."""
    if not values:
        return _EMPTY_CODES
    if type(values) is not MappingProxyType:  # (Job keeps a read-only view: any other mapping is not kept)
        return _codes_of(values, tindex)
    key = (id(values), types)
    hit = _CODES.get(key)
    if hit is not None and hit[0] is values:
        return hit[1]
    out = _codes_of(values, tindex)
    if len(_CODES) >= _CODES_MAX:
        _CODES.clear()
    _CODES[key] = (values, out)
    return out


def _codes_of(values: Mapping[tuple, float], tindex: Mapping[str, int]) -> tuple[np.ndarray, np.ndarray] | None:
    pairs: list[tuple[int, float]] | None = []
    for kk, v in values.items():
        if type(kk) is not tuple or len(kk) not in (3, 4) or (len(kk) == 4 and kk[3] != "packed"):
            pairs = None
            break
        t, k, b = kk[0], kk[1], kk[2]
        if type(k) is not int or type(b) is not int or not (0 <= k < _K_MAX and 0 <= b < _B_MAX):
            pairs = None
            break
        if type(t) is not str:
            pairs = None
            break
        ti = tindex.get(t)
        if ti is not None:
            pairs.append((_encode(ti, k, b, len(kk) == 4), float(v)))  # type: ignore[union-attr]
    if pairs is None:
        return None
    pairs.sort()
    return np.array([c for c, _ in pairs], dtype=np.int64), np.array([v for _, v in pairs], dtype=np.float64)


def per_gpu_best(rows: OptionRows, rate: np.ndarray, n: int) -> np.ndarray:
    """``[n]``: per job the best ``rate / k`` over its options (0 for a job without options)."""
    from elasticopt.models.kernels import group_max  # numba: imported on first use

    return group_max(rows.job, rate / rows.gpus, n)


@dataclass(frozen=True, eq=False)
class Objective:
    """One separable objective (docs/design.md §2): per option a value v, summed over jobs and maximised.

    Parameters
    ----------
    name
        The name problems, instance files, requests and ``--objective`` use.
    values
        ``values(rows, jobs) -> v``: one float per option of ``rows``
        (:class:`OptionRows`), from what :class:`JobColumns` ``jobs`` offers;
        nan: the option is not offered.  Array operations over all options at
        once; the weight w_j is the objective's to apply.
    doc
        One line: the formula, for ``--help``, the service's description and the docs.
    requires
        Job fields every job must have for this objective (of :data:`JOB_FIELDS`),
        each with what it must be, e.g. ``{"remaining_samples": "a number (...)"}``.
    per_option
        True when an option's value depends on that option and its job's fields
        alone, not on the job's other options (``throughput``, ``completion``,
        ``value``; not ``speedup``, which divides by the job's best rate over all
        its options): ``verify`` then prices only the chosen option of each job.
        False (the default) is always safe; a test checks the built-in ones
        (``tests/test_verify_per_option.py``).
    """

    name: str
    values: Callable[[OptionRows, JobColumns], np.ndarray]
    doc: str
    requires: Mapping[str, str] = field(default_factory=dict)
    per_option: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.:+-]*", self.name):
            raise ValidationError("objective.name", "a non-empty name of letters, digits, '_.:+-'", self.name)
        if not callable(self.values):
            raise ValidationError("objective.values", "a function (rows, jobs) -> values", type(self.values).__name__)
        if not isinstance(self.per_option, bool):
            raise ValidationError("objective.per_option", "true or false", self.per_option)
        req = dict(self.requires)
        for key, what in req.items():
            if key not in JOB_FIELDS:
                raise ValidationError("objective.requires", "job fields among " + ", ".join(JOB_FIELDS), key)
            if not isinstance(what, str) or not what:
                raise ValidationError(f"objective.requires[{key!r}]", "what the field must be, in words", what)
        object.__setattr__(self, "requires", MappingProxyType(req))


def _v_speedup(rows: OptionRows, jobs: JobColumns) -> np.ndarray:
    best = per_gpu_best(rows, rows.samples_per_s, jobs.n)  # R_j: the job's best per-GPU rate
    return jobs.weight[rows.job] * rows.samples_per_s / best[rows.job]


def _v_goodput(rows: OptionRows, jobs: JobColumns) -> np.ndarray:
    g = rows.samples_per_s * jobs.efficiency(rows)
    best = per_gpu_best(rows, g, jobs.n)  # the job's best goodput per GPU
    return jobs.weight[rows.job] * g / best[rows.job]


def _v_throughput(rows: OptionRows, jobs: JobColumns) -> np.ndarray:
    return jobs.weight[rows.job] * rows.samples_per_s


def _v_completion(rows: OptionRows, jobs: JobColumns) -> np.ndarray:
    return jobs.weight[rows.job] * rows.samples_per_s / jobs.remaining[rows.job]


def _v_value(rows: OptionRows, jobs: JobColumns) -> np.ndarray:
    return jobs.weight[rows.job] * jobs.caller_values(rows)


def pollux_objective(idle_speedup: float = 0.01, name: str | None = None) -> "Objective":
    """Pollux's p = -1 fitness (Qiao et al., OSDI'21) as a separable objective, waiting jobs at ``idle_speedup``.

    Pollux maximises ``(sum_j w_j S_j^p)^(1/p)`` with p = -1, i.e. minimises ``sum_j w_j / S_j``, S_j the
    job's goodput speedup ``T(k, b) E(b) / R_j`` (R_j its best goodput per GPU).  An option's value is
    ``w_j (1 / idle_speedup - 1 / (S_j d))``, so a waiting job counts as ``idle_speedup`` and admitting
    one outweighs any growth.  ``d`` discounts a running job's change by the restart it costs: its
    speedup averaged over the rest of the job including the restart, ``left / (restart_cost_s + left)``,
    ``left`` its remaining work over its progress rate there (``JobColumns.progress_rate``); d = 1 for
    the current option, a queued job, and where the remaining work is unknown.

    Parameters
    ----------
    idle_speedup
        The speedup a waiting job counts as, in (0, 1).
    name
        The registry name (default ``"pollux"`` for 0.01, else ``"pollux:<idle_speedup>"``).
    """
    idle = float(idle_speedup)
    if not (0 < idle < 1):
        raise ValidationError("pollux.idle_speedup", "a number in (0, 1)", idle_speedup)

    def values(rows: OptionRows, jobs: JobColumns) -> np.ndarray:
        j = rows.job
        g = rows.samples_per_s * jobs.efficiency(rows)
        best = per_gpu_best(rows, g, jobs.n)
        best = np.where(np.isfinite(best) & (best > 0), best, 1.0)
        speed = g / best[j]
        cur = np.zeros(j.size, bool) if rows.current is None else rows.current
        with np.errstate(divide="ignore", invalid="ignore"):
            left_s = jobs.remaining[j] / jobs.progress_rate(rows)
            cost = jobs.restart_cost_s[j]
            discount = left_s / (cost + left_s)
        change = jobs.running[j] & ~cur & (cost > 0) & np.isfinite(left_s) & (left_s > 0)
        discount = np.where(change, discount, 1.0)
        return jobs.weight[j] * (1.0 / idle - 1.0 / (speed * discount))

    label = name or ("pollux" if idle == 0.01 else f"pollux:{idle!r}")
    return Objective(label, values, f"Pollux's p = -1 fitness: w * (1/{idle:g} - 1 / (goodput speedup x "
                                    "restart discount)); a waiting job counts as speedup " f"{idle:g}")


_REGISTRY: dict[str, Objective] = {}


def register_objective(objective: Objective, *, replace: bool = False) -> Objective:
    """Make ``objective`` known by its name to problems, instance files, the service and the CLI.

    Parameters
    ----------
    objective
        The :class:`Objective`.
    replace
        Replace another objective registered under the same name (the same
        object again is a no-op).

    Returns
    -------
    Objective
        ``objective``.

    Raises
    ------
    DuplicateNameError
        If the name is taken by another objective and ``replace`` is False.
    """
    if not isinstance(objective, Objective):
        raise ValidationError("objective", "an Objective(name, values, doc, requires)", type(objective).__name__)
    old = _REGISTRY.get(objective.name)
    if old is not None and old is not objective and not replace:
        raise DuplicateNameError("objective", objective.name, old)
    _REGISTRY[objective.name] = objective
    return objective


def objective_names() -> tuple[str, ...]:
    """The registered objectives' names, in registration order (the built-in ones first)."""
    return tuple(_REGISTRY)


def get_objective(name: str) -> Objective:
    """The objective registered as ``name``.

    Raises
    ------
    ValidationError
        At ``objective``, listing the registered names.
    """
    obj = _REGISTRY.get(name) if isinstance(name, str) else None
    if obj is None:
        raise ValidationError("objective", "one of " + ", ".join(objective_names()), name,
                              hint="a registered objective (elasticopt.models.objectives.register_objective)")
    return obj


for _obj in (
    Objective("speedup", _v_speedup, "w * T(k, b) / R, R the job's best T / k: throughput in effective GPUs"),
    Objective("throughput", _v_throughput, "w * T(k, b): raw samples/s", per_option=True),
    Objective("completion", _v_completion, "w * T(k, b) / remaining_samples: favours jobs close to done",
              {"remaining_samples": "a number (objective 'completion' divides by it)"}, per_option=True),
    Objective("goodput", _v_goodput, "speedup of T(k, b) * E(b), E the job's statistical efficiency"),
    Objective("value", _v_value, "w * the caller's value of the option (Job.values); others are not offered",
              {"values": "caller values (objective 'value' uses them)"}, per_option=True),
    pollux_objective(),
):
    register_objective(_obj)
del _obj


def current_key(problem: Any, job: Any) -> tuple[str, int, int, bool] | None:
    """(type, k, b, packed) of a running job's current option; packed iff its known nodes are the fewest.

    Where the job's options have no packed one at (type, k, b) (a node-aware profile lists a packed
    option only where packing is faster than spreading, e.g. not where k GPUs cannot be spread over
    more nodes than ceil(k / g)), its current option is the unpacked one at (type, k, b): the
    compiler (``kernels.current_mask``) and :func:`job_values` match it so.
    """
    run = job.running
    if run is None:
        return None
    t = problem.running_type(job)
    packed = False
    if run.nodes is not None:
        g = problem.cluster.pools[t].gpus_per_node  # type: ignore[index]
        packed = len(run.nodes) <= -(-run.gpus // g)
    return (t, run.gpus, run.batch, packed)  # type: ignore[return-value]


def values_of(problem: Any, jobs: Sequence[Any], rows: OptionRows, current: np.ndarray) -> np.ndarray:
    """v of every option, the rescale penalty subtracted from a running job's other options.

    ``current[i]`` True iff option i is its job's current option.
    """
    rows = OptionRows(rows.job, rows.gpus, rows.batch, rows.samples_per_s, rows.gpu_type, rows.packed, rows.types,
                      current)
    vals = get_objective(problem.objective).values(rows, ModelJobs(jobs))
    lam = float(problem.rescale_penalty)
    if lam:
        running = np.fromiter((j.running is not None for j in jobs), dtype=bool, count=len(jobs))
        vals = np.where(running[rows.job] & ~current, vals - lam, vals)
    return vals


def job_values(problem: Any, job: Any, opts: list) -> list[float]:
    """Objective value v of each option of ``job`` (docs/design.md §2), penalty included.

    Parameters
    ----------
    problem
        The problem (objective and rescale penalty).
    job
        The job.
    opts
        Its options: ``Option`` (``job.typed_options``) or ``(k, b,
        samples_per_s)`` tuples as from ``job.options(G)`` (one-type jobs).
        An option the objective does not offer (``value`` without a caller
        value) gets nan.
    """
    return jobs_values(problem, [job], [opts])[0]


def _current_flags(problem: Any, job: Any, opts: Sequence) -> list[bool]:
    """Per option of ``job``: whether it is the job's current option (the rule of :func:`current_key`)."""
    if job.running is None:
        return [False] * len(opts)
    if hasattr(opts[0], "gpu_type"):
        key = current_key(problem, job)
        cur = [(o.gpu_type, o.gpus, o.batch, o.packed) == key for o in opts]
        if not any(cur) and key is not None and key[3]:  # no packed option there: the unpacked one
            cur = [(o.gpu_type, o.gpus, o.batch, o.packed) == key[:3] + (False,) for o in opts]
        return cur
    return [(o[0], o[1]) == (job.running.gpus, job.running.batch) for o in opts]


def jobs_values(problem: Any, jobs: Sequence[Any], opts: Sequence[Sequence]) -> list[list[float]]:
    """:func:`job_values` of several jobs at once (``opts[i]``: the options of ``jobs[i]``, all of one kind),
    by one objective call over all their options: the same values, one array pass instead of one per job."""
    kept = [i for i, o in enumerate(opts) if o]
    out: list[list[float]] = [[] for _ in opts]
    if not kept:
        return out
    flat = [o for i in kept for o in opts[i]]
    rows = OptionRows.of(problem, flat)
    rows = OptionRows(np.repeat(np.arange(len(kept), dtype=np.int64), [len(opts[i]) for i in kept]), rows.gpus,
                      rows.batch, rows.samples_per_s, rows.gpu_type, rows.packed, rows.types)
    cur = np.fromiter((c for i in kept for c in _current_flags(problem, jobs[i], opts[i])), dtype=bool,
                      count=len(flat))
    vals = values_of(problem, [jobs[i] for i in kept], rows, cur).tolist()
    at = 0
    for i in kept:
        out[i] = vals[at:at + len(opts[i])]
        at += len(opts[i])
    return out
