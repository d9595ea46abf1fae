"""The canonical option table: the problem compiled to integers (docs/design.md §2).

Every backend optimises exactly ``sum_j utility[j, choice_j]`` subject to, for
every GPU type t, ``sum_j gpus[j, choice_j] [gpu_type[j, choice_j] == t] <=
capacities[t]``, and to placement: the jobs on packed options fit on the nodes
of their type, each on the fewest nodes (docs/design.md §2).  ``choice_j`` is
one valid option of job j, or idle (worth 0, using 0 GPUs) where
``idle_allowed[j]``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from elasticopt.errors import ValidationError
from elasticopt.models.problem import Job, Option, Pool, Problem
from elasticopt.models.throughput import MeasuredThroughput

__all__ = [
    "OptionTable", "OPTION_ARRAYS", "OBJECTIVE_VALUES", "compile_problem", "job_values", "pick_scale",
    "DEFAULT_SCALE", "MAX_TOTAL", "tie_bonus",
]

#: The ``[n, K]`` per-option arrays of an :class:`OptionTable` (packed together by reductions and fixing).
OPTION_ARRAYS: tuple[str, ...] = ("gpus", "batch", "utility", "value", "samples_per_s", "valid", "gpu_type", "packed")

#: Integer units per unit of objective value (S = 2**20 by default).
DEFAULT_SCALE = 1 << 20
#: The largest total utility allowed (HiGHS works in doubles: exact below 2**53).
MAX_TOTAL = 1 << 52


def _ro(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class OptionTable:
    """Per job its options (k, b) and integer utilities, padded to a rectangle.

    Arrays are ``[n, K]`` (n jobs, K options of the widest job); entry
    ``[j, o]`` is job j's option o, meaningful only where ``valid[j, o]``.

    Attributes
    ----------
    job_ids
        Job ids, row order.
    capacity
        GPUs G available to the jobs.
    scale
        S: utilities are ``round(value * S) * tie_scale + bonus``.
    tie_scale
        B: 1 without a priority order, else a power of two above the sum of
        all tie-break bonuses.
    gpus, batch
        ``gpus[j, o]`` = k and ``batch[j, o]`` = global batch b of option o of job j.
    utility
        ``utility[j, o]``: int64 utility of option o of job j.
    value
        ``value[j, o]``: the float objective value v of the option.
    samples_per_s
        ``samples_per_s[j, o]``: throughput T_j(k, b).
    valid
        ``valid[j, o]`` True iff option o of job j exists.
    idle_allowed
        ``idle_allowed[j]`` True iff job j may get 0 GPUs.
    current_option
        ``current_option[j]``: index of job j's current (k, b), -1 if none.
    running_ids
        Ids of running jobs (used to name jobs that make a problem infeasible).
    stats
        Book-keeping of compile and reductions (sizes before/after).
    gpu_type
        ``gpu_type[j, o]``: index into ``types`` of the GPU type of option o of job j.
    packed
        ``packed[j, o]`` True iff option o must sit on the fewest nodes, ceil(k / g).
    types
        GPU type names; ``capacities[t]`` free GPUs of type t (``capacity`` is their sum).
    pools
        ``pools[t]``: the nodes of type t (free GPU indices per node), for placement.
    """

    job_ids: tuple[str, ...]
    capacity: int
    scale: int
    tie_scale: int
    gpus: np.ndarray
    batch: np.ndarray
    utility: np.ndarray
    value: np.ndarray
    samples_per_s: np.ndarray
    valid: np.ndarray
    idle_allowed: np.ndarray
    current_option: np.ndarray
    running_ids: tuple[str, ...] = ()
    stats: Mapping[str, Any] = field(default_factory=dict)
    gpu_type: np.ndarray | None = None
    packed: np.ndarray | None = None
    types: tuple[str, ...] = ("gpu",)
    capacities: np.ndarray | None = None
    pools: tuple[Pool, ...] | None = None

    def __post_init__(self) -> None:
        # one-type tables may be built without the type arrays: every option is of type 0, placeable anywhere
        if self.gpu_type is None:
            object.__setattr__(self, "gpu_type", np.zeros(self.gpus.shape, dtype=np.int64))
        if self.packed is None:
            object.__setattr__(self, "packed", np.zeros(self.gpus.shape, dtype=bool))
        if self.capacities is None:
            object.__setattr__(self, "capacities", np.array([self.capacity], dtype=np.int64))
        for name in OPTION_ARRAYS + ("idle_allowed", "current_option", "capacities"):
            _ro(getattr(self, name))

    @property
    def n_types(self) -> int:
        """Number of GPU types T."""
        return len(self.types)

    def gpus_by_type(self, choice: np.ndarray) -> np.ndarray:
        """GPUs of each type that ``choice`` (option per job, -1 idle) uses, ``[T]``."""
        choice = np.asarray(choice, dtype=np.int64)
        rows = np.flatnonzero(choice >= 0)
        cols = choice[rows]
        return np.bincount(self.gpu_type[rows, cols], weights=self.gpus[rows, cols], minlength=self.n_types).astype(
            np.int64
        )

    @property
    def n_jobs(self) -> int:
        """Number of jobs n."""
        return len(self.job_ids)

    @property
    def width(self) -> int:
        """K, the padded number of options per job."""
        return int(self.gpus.shape[1])

    @property
    def n_options(self) -> int:
        """Number of valid options over all jobs (idle not counted)."""
        return int(self.valid.sum())

    def options_of(self, j: int) -> list[tuple[int, int, int]]:
        """Valid options of job row ``j`` as ``(k, b, utility)``."""
        idx = np.flatnonzero(self.valid[j])
        return [(int(self.gpus[j, o]), int(self.batch[j, o]), int(self.utility[j, o])) for o in idx]

    def min_gpus(self) -> np.ndarray:
        """Per job the fewest GPUs of a valid option (capacity + 1 if it has none: it cannot fit)."""
        none = self.capacity + 1
        if not self.width:
            return np.full(self.n_jobs, none, dtype=np.int64)
        return np.where(self.valid, self.gpus, none).min(axis=1)

    def infeasible_jobs(self) -> tuple[str, ...]:
        """Jobs that must run and together cannot fit; () if the table is feasible.

        A job without the idle option needs at least its smallest k; with one
        GPU type the problem is infeasible exactly when those minimums exceed
        the capacity.  With several types (or placement) an infeasible table
        whose minimums fit the total names every job that must run.
        """
        must = ~self.idle_allowed
        if not must.any():
            return ()
        need = self.min_gpus()[must]
        if int(need.sum()) <= self.capacity:
            if self.n_types > 1 or bool(self.packed.any()):
                ids = np.array(self.job_ids, dtype=object)[must]
                return tuple(str(i) for i in ids[np.argsort(-need, kind="stable")])
            return ()
        ids = np.array(self.job_ids, dtype=object)[must]
        order = np.argsort(-need, kind="stable")
        return tuple(str(i) for i in ids[order])

    def objective_of(self, choice: np.ndarray) -> tuple[int, float]:
        """Integer and float objective of ``choice`` (option index per job, -1 = idle)."""
        choice = np.asarray(choice, dtype=np.int64)
        rows = np.flatnonzero(choice >= 0)
        cols = choice[rows]
        u = int(self.utility[rows, cols].sum()) if rows.size else 0
        v = float(self.value[rows, cols].sum()) if rows.size else 0.0
        return u, v


def _rows(opts: list) -> tuple[np.ndarray, np.ndarray, list]:
    """(k, samples/s, keys) of options given as :class:`Option` or ``(k, b, samples_per_s)`` tuples."""
    if opts and isinstance(opts[0], Option):
        k = np.array([o.gpus for o in opts], dtype=np.float64)
        t = np.array([o.samples_per_s for o in opts], dtype=np.float64)
        return k, t, opts
    k = np.array([o[0] for o in opts], dtype=np.float64)
    t = np.array([o[2] for o in opts], dtype=np.float64)
    return k, t, opts


def _v_speedup(problem: Problem, job: Job, opts: list) -> np.ndarray:
    k, t, _ = _rows(opts)
    return float(job.weight) * t / float((t / k).max())


def _v_goodput(problem: Problem, job: Job, opts: list) -> np.ndarray:
    """Speedup of T(k, b) * E(b): E the job's statistical efficiency (1 without one)."""
    k, t, _ = _rows(opts)
    if job.efficiency is not None:
        b = [o.batch if isinstance(o, Option) else o[1] for o in opts]
        t = t * np.array([float(job.efficiency(x)) for x in b])
    return float(job.weight) * t / float((t / k).max())


def _v_throughput(problem: Problem, job: Job, opts: list) -> np.ndarray:
    return float(job.weight) * _rows(opts)[1]


def _v_completion(problem: Problem, job: Job, opts: list) -> np.ndarray:
    return float(job.weight) * _rows(opts)[1] / float(job.remaining_samples)  # type: ignore[arg-type]


def _v_value(problem: Problem, job: Job, opts: list) -> np.ndarray:
    vals = job.values or {}
    default_type = problem.cluster.types[0]
    out = np.full(len(opts), np.nan)
    for i, o in enumerate(opts):
        if isinstance(o, Option):
            key = (o.gpu_type, o.gpus, o.batch) + (("packed",) if o.packed else ())
        else:
            key = (default_type, o[0], o[1])
        v = vals.get(key)
        if v is not None:
            out[i] = float(job.weight) * v
    return out


#: Objective name -> per job, the value v of each option (docs/design.md §2); nan = option not offered.
#: A new separable objective is one entry here (and its name in ``problem.OBJECTIVES``).
OBJECTIVE_VALUES: dict[str, Callable[[Problem, Job, list], np.ndarray]] = {
    "speedup": _v_speedup,
    "throughput": _v_throughput,
    "completion": _v_completion,
    "goodput": _v_goodput,
    "value": _v_value,
}


def _is_current(problem: Problem, job: Job, o: Any) -> bool:
    run = job.running
    if run is None:
        return False
    if isinstance(o, Option):
        return (o.gpu_type, o.gpus, o.batch, o.packed) == current_key(problem, job)
    return (o[0], o[1]) == (run.gpus, run.batch)


def current_key(problem: Problem, job: Job) -> tuple[str, int, int, bool] | None:
    """(type, k, b, packed) of a running job's current option; packed iff its known nodes are the fewest."""
    run = job.running
    if run is None:
        return None
    t = problem.running_type(job)
    packed = False
    if run.nodes is not None:
        g = problem.cluster.pools[t].gpus_per_node  # type: ignore[index]
        packed = len(run.nodes) <= -(-run.gpus // g)
    return (t, run.gpus, run.batch, packed)  # type: ignore[return-value]


def job_values(problem: Problem, job: Job, opts: list) -> list[float]:
    """Objective value v of each option of ``job`` (docs/design.md §2), penalty included.

    Parameters
    ----------
    problem
        The problem (objective and rescale penalty).
    job
        The job.
    opts
        Its options: :class:`Option` (``job.typed_options``) or ``(k, b,
        samples_per_s)`` tuples as from ``job.options(G)`` (one-type jobs).
        An option the objective does not offer (``value`` without a caller
        value) gets nan.
    """
    if not opts:
        return []
    vals = OBJECTIVE_VALUES[problem.objective](problem, job, opts)
    lam = float(problem.rescale_penalty)
    if lam and job.running is not None:
        cur = np.array([_is_current(problem, job, o) for o in opts])
        vals = np.where(cur, vals, vals - lam)
    return [float(v) for v in vals]


def tie_bonus(priority: tuple[str, ...] | None) -> tuple[int, dict[str, int]]:
    """B and per-job bonus for a priority order (earlier id = bigger bonus); ``(1, {})`` without one."""
    if not priority:
        return 1, {}
    p = len(priority)
    bonus = {jid: p - r for r, jid in enumerate(priority)}
    total = p * (p + 1) // 2
    return 1 << max(1, total.bit_length()), bonus


def pick_scale(total_abs_value: float, n: int, tie_scale: int = 1) -> int:
    """S: the largest power of two <= 2**20 keeping every total within 2**52.

    Parameters
    ----------
    total_abs_value
        ``sum_j max_o |v_jo|``.
    n
        Number of jobs (each may round up by half a unit).
    tie_scale
        B, the tie-break multiplier.
    """
    scale = DEFAULT_SCALE
    if total_abs_value > 0:
        limit = MAX_TOTAL / (total_abs_value * tie_scale + n * tie_scale)
        while scale > 1 and scale > limit:
            scale //= 2
        if scale > limit:
            raise ValidationError(
                "jobs[*].weight",
                "objective values whose total fits exact integers (sum of max |v| * B < 2**52)",
                total_abs_value,
                "use smaller weights or the 'speedup' objective",
            )
    return scale


def _overflow_error(
    problem: Problem, per_job: list[list[Option]], per_val: list[list[float]], exc: ValidationError
) -> ValidationError:
    """The objective total overflows: blame the job with the largest value, at its JSON path."""
    j = max(range(len(per_val)), key=lambda i: max((abs(v) for v in per_val[i]), default=0.0))
    job, opts, vals = problem.jobs[j], per_job[j], per_val[j]
    o = max(range(len(vals)), key=lambda i: abs(vals[i]))
    k, b, t = opts[o].gpus, opts[o].batch, opts[o].samples_per_s
    if problem.objective == "value":
        path, found = f"jobs[{j}].values", vals[o] / job.weight
    elif job.weight != 1.0:
        path, found = f"jobs[{j}].weight", job.weight
    elif problem.objective == "completion" and job.remaining_samples is not None and job.remaining_samples < 1:
        path, found = f"jobs[{j}].remaining_samples", job.remaining_samples
    elif isinstance(job.throughput, MeasuredThroughput):
        path, found = f"jobs[{j}].throughput", [k, b, t]  # the row's index in the file is not kept
    else:
        path, found = f"jobs[{j}].profile", job.throughput.name
    return ValidationError(
        path,
        "values small enough that the objective total fits exact integers (sum over jobs of the largest "
        "value x B < 2**52)",
        found,
        f"job {job.id!r} has value {vals[o]:.6g} at (k={k}, b={b}): {t:.6g} samples/s x weight {job.weight:g}, "
        f"objective {problem.objective!r}; the total over jobs is {exc.found:.6g}",
    )


def compile_problem(problem: Problem) -> OptionTable:
    """Compile a problem to its canonical integer option table (docs/design.md §2).

    Options are every feasible (type, k, b[, packed]) with k <= the type's
    free GPUs; ``utility = round(v * S)`` with S the largest power of two <=
    2**20 keeping ``sum_j max |u|`` within 2**52; with a priority order each
    non-idle option of a job also gets an integer bonus below one utility unit
    (utilities are scaled by B first).

    Parameters
    ----------
    problem
        The problem to compile.

    Returns
    -------
    OptionTable
        The unreduced table (see :func:`elasticopt.models.reduce_table`).
    """
    cluster = problem.cluster
    types = cluster.types
    tindex = {t: i for i, t in enumerate(types)}
    per_job: list[list[Option]] = []
    per_val: list[list[float]] = []
    for job in problem.jobs:
        opts = job.typed_options(cluster, problem.node_aware)
        vals = job_values(problem, job, opts)
        keep = [i for i, v in enumerate(vals) if np.isfinite(v)]
        if len(keep) < len(opts):
            opts = [opts[i] for i in keep]
            vals = [vals[i] for i in keep]
        per_job.append(opts)
        per_val.append(vals)
    n = len(problem.jobs)
    K = max((len(o) for o in per_job), default=0)
    gpus = np.zeros((n, K), dtype=np.int64)
    batch = np.zeros((n, K), dtype=np.int64)
    value = np.zeros((n, K), dtype=np.float64)
    sps = np.zeros((n, K), dtype=np.float64)
    valid = np.zeros((n, K), dtype=bool)
    gtype = np.zeros((n, K), dtype=np.int64)
    packed = np.zeros((n, K), dtype=bool)
    current = np.full(n, -1, dtype=np.int64)
    idle = np.array([problem.idle_allowed(j) for j in problem.jobs], dtype=bool)
    for j, (job, opts, vals) in enumerate(zip(problem.jobs, per_job, per_val)):
        m = len(opts)
        if m:
            gpus[j, :m] = [o.gpus for o in opts]
            batch[j, :m] = [o.batch for o in opts]
            sps[j, :m] = [o.samples_per_s for o in opts]
            gtype[j, :m] = [tindex[o.gpu_type] for o in opts]
            packed[j, :m] = [o.packed for o in opts]
            value[j, :m] = vals
            valid[j, :m] = True
        if job.running is not None:
            cur = current_key(problem, job)
            for o, opt in enumerate(opts):
                if (opt.gpu_type, opt.gpus, opt.batch, opt.packed) == cur:
                    current[j] = o
    tie_scale, bonus = tie_bonus(problem.priority)
    total = float(np.abs(np.where(valid, value, 0.0)).max(axis=1).sum()) if K else 0.0
    try:
        scale = pick_scale(total, n, tie_scale)
    except ValidationError as exc:
        raise _overflow_error(problem, per_job, per_val, exc) from None
    scaled = np.rint(value * scale).astype(np.int64)
    utility = scaled * tie_scale
    if bonus:
        bvec = np.array([bonus.get(jid, 0) for jid in problem.job_ids], dtype=np.int64)
        utility = utility + bvec[:, None]
    utility = np.where(valid, utility, 0)
    running = tuple(j.id for j in problem.jobs if j.running is not None)
    G = cluster.gpus
    caps = np.array([cluster.capacity(t) for t in types], dtype=np.int64)
    stats = {"n_jobs": n, "n_options": int(valid.sum()), "width": K, "capacity": G, "capacities": tuple(caps.tolist())}
    return OptionTable(
        job_ids=problem.job_ids,
        capacity=int(G),
        scale=int(scale),
        tie_scale=int(tie_scale),
        gpus=gpus,
        batch=batch,
        utility=utility,
        value=value,
        samples_per_s=sps,
        valid=valid,
        idle_allowed=idle,
        current_option=current,
        running_ids=running,
        stats=stats,
        gpu_type=gtype,
        packed=packed,
        types=types,
        capacities=caps,
        pools=tuple(cluster.pools[t] for t in types),  # type: ignore[index]
    )
