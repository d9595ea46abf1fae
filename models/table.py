"""The canonical option table: the problem compiled to integers (docs/design.md §2).

Every backend optimises exactly ``sum_j utility[j, choice_j]`` subject to
``sum_j gpus[j, choice_j] <= capacity``, where ``choice_j`` is one valid option
of job j, or idle (worth 0, using 0 GPUs) where ``idle_allowed[j]``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from elasticopt.errors import ValidationError
from elasticopt.models.problem import Job, Problem
from elasticopt.models.throughput import MeasuredThroughput

__all__ = [
    "OptionTable", "compile_problem", "job_values", "pick_scale", "DEFAULT_SCALE", "MAX_TOTAL", "OBJECTIVE_VALUES",
    "tie_bonus",
]

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

    def __post_init__(self) -> None:
        for name in ("gpus", "batch", "utility", "value", "samples_per_s", "valid", "idle_allowed", "current_option"):
            _ro(getattr(self, name))

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

        A job without the idle option needs at least its smallest k; the
        problem is infeasible exactly when those minimums exceed the capacity.
        """
        must = ~self.idle_allowed
        if not must.any():
            return ()
        need = self.min_gpus()[must]
        if int(need.sum()) <= self.capacity:
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


def _speedup(w: float, rates: list[float], ks: list[int]) -> list[float]:
    """w * rate / R with R the best per-GPU rate of the job's options."""
    r = max(t / k for t, k in zip(rates, ks))
    return [(w * t) / r for t in rates]


def _efficiency(job: Job, batch: int) -> float:
    return 1.0 if job.efficiency is None else float(job.efficiency(batch))


#: Per objective: the values of a job's options from (weight w, job, its options (k, b, T)).
OBJECTIVE_VALUES: dict[str, Callable[[float, Job, list[tuple[int, int, float]]], list[float]]] = {
    "speedup": lambda w, job, opts: _speedup(w, [t for _, _, t in opts], [k for k, _, _ in opts]),
    "throughput": lambda w, job, opts: [w * t for _, _, t in opts],
    "completion": lambda w, job, opts: [(w * t) / float(job.remaining_samples) for _, _, t in opts],  # type: ignore[arg-type]
    "goodput": lambda w, job, opts: _speedup(
        w, [t * _efficiency(job, b) for _, b, t in opts], [k for k, _, _ in opts]
    ),
}


def job_values(problem: Problem, job: Job, opts: list[tuple[int, int, float]]) -> list[float]:
    """Objective value v of each option of ``job`` (docs/design.md §2), penalty included.

    Parameters
    ----------
    problem
        The problem (objective and rescale penalty).
    job
        The job.
    opts
        Its feasible options ``(k, b, samples_per_s)`` as from ``job.options(G)``.
    """
    if not opts:
        return []
    w = float(job.weight)
    vals = OBJECTIVE_VALUES[problem.objective](w, job, opts)
    lam = float(problem.rescale_penalty)
    if lam and job.running is not None:
        cur = (job.running.gpus, job.running.batch)
        vals = [v if (k, b) == cur else v - lam for (k, b, _), v in zip(opts, vals)]
    return vals


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
    problem: Problem, per_job: list[list[tuple[int, int, float]]], per_val: list[list[float]], exc: ValidationError
) -> ValidationError:
    """The objective total overflows: blame the job with the largest value, at its JSON path."""
    j = max(range(len(per_val)), key=lambda i: max((abs(v) for v in per_val[i]), default=0.0))
    job, opts, vals = problem.jobs[j], per_job[j], per_val[j]
    o = max(range(len(vals)), key=lambda i: abs(vals[i]))
    k, b, t = opts[o]
    if job.weight != 1.0:
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

    Options are every feasible (k, b) with k <= G; ``utility = round(v * S)``
    with S the largest power of two <= 2**20 keeping ``sum_j max |u|`` within
    2**52; with a priority order each non-idle option of a job also gets an
    integer bonus below one utility unit (utilities are scaled by B first).

    Parameters
    ----------
    problem
        The problem to compile.

    Returns
    -------
    OptionTable
        The unreduced table (see :func:`elasticopt.models.reduce_table`).
    """
    G = problem.cluster.gpus
    per_job: list[list[tuple[int, int, float]]] = []
    per_val: list[list[float]] = []
    for job in problem.jobs:
        opts = job.options(gpus_cap=G)
        per_job.append(opts)
        per_val.append(job_values(problem, job, opts))
    n = len(problem.jobs)
    K = max((len(o) for o in per_job), default=0)
    gpus = np.zeros((n, K), dtype=np.int64)
    batch = np.zeros((n, K), dtype=np.int64)
    value = np.zeros((n, K), dtype=np.float64)
    sps = np.zeros((n, K), dtype=np.float64)
    valid = np.zeros((n, K), dtype=bool)
    current = np.full(n, -1, dtype=np.int64)
    idle = np.array([problem.idle_allowed(j) for j in problem.jobs], dtype=bool)
    for j, (job, opts, vals) in enumerate(zip(problem.jobs, per_job, per_val)):
        m = len(opts)
        if m:
            gpus[j, :m] = [k for k, _, _ in opts]
            batch[j, :m] = [b for _, b, _ in opts]
            sps[j, :m] = [t for _, _, t in opts]
            value[j, :m] = vals
            valid[j, :m] = True
        if job.running is not None:
            for o, (k, b, _) in enumerate(opts):
                if (k, b) == (job.running.gpus, job.running.batch):
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
    stats = {"n_jobs": n, "n_options": int(valid.sum()), "width": K, "capacity": G}
    return OptionTable(
        job_ids=problem.job_ids,
        capacity=G,
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
    )

