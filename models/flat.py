"""A problem's options as flat arrays: the common form of compile and reduce (docs/design.md §2).

:func:`compile_flat` evaluates every option of every job once, as parallel
1-D arrays in (job, type, k, packed, b) order, with its objective value and
integer utility.  :func:`elasticopt.models.compile_problem` lays them out as
the ``[n, K]`` :class:`~elasticopt.models.OptionTable`;
:func:`elasticopt.models.reductions.compile_reduced` first drops the options
the exact reductions drop, so the table is built once, at its reduced size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter

import numpy as np

from elasticopt.errors import ValidationError
from elasticopt.models.objectives import OptionRows, get_objective, values_of
from elasticopt.models.options import option_blocks
from elasticopt.models.problem import Pool, Problem
from elasticopt.profiles.throughput import MeasuredThroughput

__all__ = ["FlatOptions", "compile_flat", "pick_scale", "tie_bonus", "DEFAULT_SCALE", "MAX_TOTAL"]

#: Integer units per unit of objective value (S = 2**20 by default).
DEFAULT_SCALE = 1 << 20
#: The largest total utility allowed (HiGHS works in doubles: exact below 2**53).
MAX_TOTAL = 1 << 52

_running = attrgetter("running")


@dataclass(frozen=True, eq=False)
class FlatOptions:
    """Every option of every job, flat, sorted by (job, type, k, packed, b).

    Attributes
    ----------
    rows
        ``rows.job[i]``, ``rows.gpus[i]``, ``rows.batch[i]``, ``rows.samples_per_s[i]``,
        ``rows.gpu_type[i]``, ``rows.packed[i]``: job row, k, b, T(k, b), type index
        and packing of option i.
    value
        ``value[i]``: the objective value v of option i (finite: options the
        objective does not offer are already dropped).
    utility
        ``utility[i] = round(value[i] * scale) * tie_scale + bonus[job]``.
    is_current
        ``is_current[i]``: option i is its (running) job's current option.
    counts
        ``counts[j]``: options of job j (they are entries ``starts[j] ..``).
    idle_allowed
        ``idle_allowed[j]``: job j may get 0 GPUs.
    scale, tie_scale
        S and B (docs/design.md §2).
    job_ids, running_ids
        Ids of the jobs (row order) and of the running ones.
    types, capacities, pools
        GPU type names, free GPUs per type, and the nodes of each type.
    capacity
        Free GPUs of all types together.
    """

    rows: OptionRows
    value: np.ndarray
    utility: np.ndarray
    is_current: np.ndarray
    counts: np.ndarray
    idle_allowed: np.ndarray
    scale: int
    tie_scale: int
    job_ids: tuple[str, ...]
    running_ids: tuple[str, ...]
    types: tuple[str, ...]
    capacities: np.ndarray
    pools: tuple[Pool, ...]
    capacity: int

    @property
    def n_jobs(self) -> int:
        """Number of jobs n."""
        return len(self.job_ids)

    @property
    def starts(self) -> np.ndarray:
        """``starts[j]``: index of job j's first option."""
        return np.cumsum(self.counts) - self.counts


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


def _overflow_error(problem: Problem, rows: OptionRows, value: np.ndarray, exc: ValidationError) -> ValidationError:
    """The objective total overflows: blame the job with the largest value, at its JSON path."""
    i = int(np.argmax(np.abs(value)))
    j = int(rows.job[i])
    job = problem.jobs[j]
    k, b, t, v = int(rows.gpus[i]), int(rows.batch[i]), float(rows.samples_per_s[i]), float(value[i])
    requires = get_objective(problem.objective).requires
    if "values" in requires:
        path, found = f"jobs[{j}].values", v / job.weight
    elif job.weight != 1.0:
        path, found = f"jobs[{j}].weight", job.weight
    elif "remaining_samples" in requires and job.remaining_samples is not None and job.remaining_samples < 1:
        path, found = f"jobs[{j}].remaining_samples", job.remaining_samples
    elif isinstance(job.throughput, MeasuredThroughput):
        path, found = f"jobs[{j}].throughput", [k, b, t]  # the row's index in the file is not kept
    else:
        path, found = f"jobs[{j}].profile", getattr(job.throughput, "name", "?")
    return ValidationError(
        path,
        "values small enough that the objective total fits exact integers (sum over jobs of the largest "
        "value x B < 2**52)",
        found,
        f"job {job.id!r} has value {v:.6g} at (k={k}, b={b}): {t:.6g} samples/s x weight {job.weight:g}, "
        f"objective {problem.objective!r}; the total over jobs is {exc.found:.6g}",
    )


def _option_rows(problem: Problem) -> OptionRows:
    """Every (type, k, b, packed) option of every job, sorted (the arrays of ``Job.typed_options``)."""
    from elasticopt.models.kernels import gather_options  # numba: imported on first use

    types = problem.cluster.types
    ix = option_blocks(problem)
    all_k, all_b, all_p, all_s = ix.arrays
    job, k, b, s, t, p = gather_options(ix.pair_job, ix.pair_type, ix.pair_start, ix.pair_size, all_k, all_b, all_p,
                                        all_s)
    rows = OptionRows(job, k, b, s, t, p, types)
    fj, ft, fk, fb, fp, fs = ix.flat
    if len(fj):  # measured points, read flat: merge and restore each job's (type, k, packed, b) order
        cat2 = (lambda a, xs, dt: np.concatenate([a, np.asarray(xs, dtype=dt)]))
        j_, t_ = cat2(rows.job, fj, np.int64), cat2(rows.gpu_type, ft, np.int64)
        k_, b_, p_ = cat2(rows.gpus, fk, np.int64), cat2(rows.batch, fb, np.int64), cat2(rows.packed, fp, bool)
        s_ = cat2(rows.samples_per_s, fs, np.float64)
        order = np.lexsort((b_, p_, k_, t_, j_))
        rows = OptionRows(j_[order], k_[order], b_[order], s_[order], t_[order], p_[order], types)
    return rows


def _current_options(cluster, running: list, run_rows: list[int]) -> np.ndarray:
    """``cur[i]`` = (type index, k, b, packed) of running job ``run_rows[i]``'s current option (as
    :func:`~elasticopt.models.objectives.current_key`: packed iff on the fewest nodes; no type: the first)."""
    if not run_rows:
        return np.zeros((0, 4), dtype=np.int64)
    types = cluster.types
    tindex = {t: i for i, t in enumerate(types)}
    gpn = [pool.gpus_per_node for pool in cluster.pool_list]
    out = []
    for r in map(running.__getitem__, run_rows):
        t = 0 if r.gpu_type is None else tindex[r.gpu_type]
        k, nodes = r.gpus, r.nodes
        out.append((t, k, r.batch, nodes is not None and len(nodes) <= -(-k // gpn[t])))
    return np.array(out, dtype=np.int64)


#: A restriction of the options the compiler reads as data: ``keep(rows) -> mask``, True for the options kept.
Keep = Callable[[OptionRows], np.ndarray]


def compile_flat(problem: Problem, keep: Keep | None = None) -> FlatOptions:
    """Every option of every job with its value and integer utility, flat (docs/design.md §2).

    Options are every feasible (type, k, b[, packed]) with k <= the type's
    free GPUs (:mod:`elasticopt.models.options`, the arrays of
    :meth:`~elasticopt.models.Job.typed_options`); ``utility = round(v * S)``
    with S the largest power of two <= 2**20 keeping ``sum_j max |u|`` within
    2**52; with a priority order each option of a job also gets an integer
    bonus below one utility unit (utilities are scaled by B first).
    Everything after the per-job block look-up is vectorised over all options.

    ``keep``, if given, is called once with every option (its ``OptionRows``) and returns a
    boolean mask: the options where it is False are dropped before anything else is computed
    (a policy's restriction, e.g. the anti-thrashing rule, as one array operation; the jobs'
    models stay the shared ones, so their blocks stay cached across compiles).

    Raises
    ------
    ValidationError
        If the objective total cannot be held in exact integers (names the job's field).
    """
    from elasticopt.models.kernels import current_mask, value_totals  # numba: imported on first use

    cluster = problem.cluster
    types = cluster.types
    jobs = problem.jobs
    n = len(jobs)
    rows = _option_rows(problem)
    if keep is not None:
        sel = np.asarray(keep(rows), dtype=bool)
        if not sel.all():
            rows = OptionRows(rows.job[sel], rows.gpus[sel], rows.batch[sel], rows.samples_per_s[sel],
                              rows.gpu_type[sel], rows.packed[sel], types)
    running = list(map(_running, jobs))
    run_rows = [j for j, r in enumerate(running) if r is not None]
    is_cur = current_mask(rows.job, rows.gpu_type, rows.gpus, rows.batch, rows.packed,
                          np.asarray(run_rows, dtype=np.int64), _current_options(cluster, running, run_rows), n)
    vals = values_of(problem, jobs, rows, is_cur)
    # per job its options and largest |v| (0 without options): their sum, as the [n, K] table would sum it
    counts, most, n_offered = value_totals(rows.job, vals, n)
    if n_offered < vals.size:  # drop the options the objective does not offer
        offered = np.isfinite(vals)
        rows = OptionRows(rows.job[offered], rows.gpus[offered], rows.batch[offered], rows.samples_per_s[offered],
                          rows.gpu_type[offered], rows.packed[offered], types)
        vals, is_cur = vals[offered], is_cur[offered]
    idle = np.ones(n, dtype=bool)
    if not problem.allow_preemption:
        idle[run_rows] = False
    tie_scale, bonus = tie_bonus(problem.priority)
    try:
        scale = pick_scale(float(most.sum()), n, tie_scale)
    except ValidationError as exc:
        raise _overflow_error(problem, rows, vals, exc) from None
    utility = np.rint(vals * scale).astype(np.int64)
    if tie_scale != 1:
        utility *= tie_scale
    job_ids = problem.job_ids
    if bonus:
        bvec = np.array([bonus.get(jid, 0) for jid in job_ids], dtype=np.int64)
        utility = utility + bvec[rows.job]
    return FlatOptions(
        rows=rows,
        value=vals,
        utility=utility,
        is_current=is_cur,
        counts=counts,
        idle_allowed=idle,
        scale=int(scale),
        tie_scale=int(tie_scale),
        job_ids=job_ids,
        running_ids=tuple(job_ids[j] for j in run_rows),
        types=types,
        capacities=cluster.capacities.copy(),
        pools=cluster.pool_list,
        capacity=int(cluster.gpus),
    )
