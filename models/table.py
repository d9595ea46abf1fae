"""The canonical option table: the problem compiled to integers (docs/design.md §2).

Every backend optimises exactly ``sum_j utility[j, choice_j]`` subject to, for
every GPU type t, ``sum_j gpus[j, choice_j] [gpu_type[j, choice_j] == t] <=
capacities[t]``, and to placement: the jobs on packed options fit on the nodes
of their type, each on the fewest nodes (docs/design.md §2).  ``choice_j`` is
one valid option of job j, or idle (worth 0, using 0 GPUs) where
``idle_allowed[j]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from elasticopt.errors import ValidationError
from elasticopt.models.objectives import OBJECTIVE_VALUES, OptionRows, current_key, job_values, values_of
from elasticopt.models.options import option_blocks
from elasticopt.models.problem import Pool, Problem
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


def _overflow_error(problem: Problem, gpus: np.ndarray, batch: np.ndarray, sps: np.ndarray, value: np.ndarray,
                    valid: np.ndarray, exc: ValidationError) -> ValidationError:
    """The objective total overflows: blame the job with the largest value, at its JSON path."""
    mag = np.where(valid, np.abs(value), -1.0)
    j, o = np.unravel_index(int(np.argmax(mag)), mag.shape)
    job = problem.jobs[j]
    k, b, t, v = int(gpus[j, o]), int(batch[j, o]), float(sps[j, o]), float(value[j, o])
    if problem.objective == "value":
        path, found = f"jobs[{j}].values", v / job.weight
    elif job.weight != 1.0:
        path, found = f"jobs[{j}].weight", job.weight
    elif problem.objective == "completion" and job.remaining_samples is not None and job.remaining_samples < 1:
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


def compile_problem(problem: Problem) -> OptionTable:
    """Compile a problem to its canonical integer option table (docs/design.md §2).

    Options are every feasible (type, k, b[, packed]) with k <= the type's
    free GPUs (:mod:`elasticopt.models.options`, the arrays of
    :meth:`~elasticopt.models.Job.typed_options`); ``utility = round(v * S)``
    with S the largest power of two <= 2**20 keeping ``sum_j max |u|`` within
    2**52; with a priority order each non-idle option of a job also gets an
    integer bonus below one utility unit (utilities are scaled by B first).
    Everything after the per-job block look-up is vectorised over all options.

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
    jobs = problem.jobs
    n = len(jobs)
    ix = option_blocks(problem)
    blocks = ix.blocks
    # the distinct blocks side by side; pair i's options are blocks[pair_block[i]], at offsets off[...]
    blen = np.fromiter((blk[0].size for blk in blocks), dtype=np.int64, count=len(blocks))
    off = np.concatenate(([0], np.cumsum(blen)[:-1])) if blocks else np.zeros(0, dtype=np.int64)
    cat = (lambda i, dt: np.concatenate([blk[i] for blk in blocks]) if blocks else np.zeros(0, dtype=dt))
    all_k, all_b, all_p, all_s = cat(0, np.int64), cat(1, np.int64), cat(2, bool), cat(3, np.float64)
    plen = blen[ix.pair_block]
    total = int(plen.sum())
    pstart = np.cumsum(plen) - plen
    src = np.arange(total) - np.repeat(pstart - off[ix.pair_block], plen)  # option i = entry src[i] of the blocks
    rows = OptionRows(np.repeat(ix.pair_job, plen), all_k[src], all_b[src], all_s[src],
                      np.repeat(ix.pair_type, plen), all_p[src], types)
    fj, ft, fk, fb, fp, fs = ix.flat
    if fj:  # measured points, read flat: merge and restore each job's (type, k, packed, b) order
        cat2 = (lambda a, xs, dt: np.concatenate([a, np.asarray(xs, dtype=dt)]))
        j_, t_ = cat2(rows.job, fj, np.int64), cat2(rows.gpu_type, ft, np.int64)
        k_, b_, p_ = cat2(rows.gpus, fk, np.int64), cat2(rows.batch, fb, np.int64), cat2(rows.packed, fp, bool)
        s_ = cat2(rows.samples_per_s, fs, np.float64)
        order = np.lexsort((b_, p_, k_, t_, j_))
        rows = OptionRows(j_[order], k_[order], b_[order], s_[order], t_[order], p_[order], types)
    counts = np.bincount(rows.job, minlength=n).astype(np.int64) if n else np.zeros(0, np.int64)
    # the running jobs' current options: (type, k, b, packed) per job, -1 where none
    cur_t = np.full(n, -1, dtype=np.int64)
    cur_k = np.zeros(n, dtype=np.int64)
    cur_b = np.zeros(n, dtype=np.int64)
    cur_p = np.zeros(n, dtype=bool)
    tindex = {t: i for i, t in enumerate(types)}
    for j, job in enumerate(jobs):
        if job.running is not None:
            t, k, b, p = current_key(problem, job)  # type: ignore[misc]
            cur_t[j], cur_k[j], cur_b[j], cur_p[j] = tindex[t], k, b, p
    r = rows.job
    is_cur = ((rows.gpu_type == cur_t[r]) & (rows.gpus == cur_k[r]) & (rows.batch == cur_b[r])
              & (rows.packed == cur_p[r]))
    vals = values_of(problem, jobs, rows, is_cur)
    offered = np.isfinite(vals)
    if not offered.all():  # drop the options the objective does not offer
        rows = OptionRows(rows.job[offered], rows.gpus[offered], rows.batch[offered], rows.samples_per_s[offered],
                          rows.gpu_type[offered], rows.packed[offered], types)
        vals, is_cur = vals[offered], is_cur[offered]
        counts = np.bincount(rows.job, minlength=n).astype(np.int64)
    K = int(counts.max()) if n else 0
    starts = np.concatenate(([0], np.cumsum(counts)[:-1])) if n else np.zeros(0, dtype=np.int64)
    col = np.arange(rows.job.size) - np.repeat(starts, counts)  # column of option i in its job's row
    r = rows.job

    def grid(a: np.ndarray, dtype) -> np.ndarray:
        out = np.zeros((n, K), dtype=dtype)
        out[r, col] = a
        return out

    gpus, batch, value = grid(rows.gpus, np.int64), grid(rows.batch, np.int64), grid(vals, np.float64)
    sps, gtype, packed = grid(rows.samples_per_s, np.float64), grid(rows.gpu_type, np.int64), grid(rows.packed, bool)
    valid = grid(np.ones(r.size, dtype=bool), bool)
    current = np.full(n, -1, dtype=np.int64)
    current[r[is_cur]] = col[is_cur]
    idle = np.fromiter((job.running is None or problem.allow_preemption for job in jobs), dtype=bool, count=n)
    tie_scale, bonus = tie_bonus(problem.priority)
    total = float(np.abs(value).max(axis=1).sum()) if K else 0.0
    try:
        scale = pick_scale(total, n, tie_scale)
    except ValidationError as exc:
        raise _overflow_error(problem, gpus, batch, sps, value, valid, exc) from None
    utility = np.rint(value * scale).astype(np.int64) * tie_scale
    if bonus:
        bvec = np.array([bonus.get(jid, 0) for jid in problem.job_ids], dtype=np.int64)
        utility = utility + bvec[:, None]
    utility = np.where(valid, utility, 0)
    running = tuple(j.id for j in jobs if j.running is not None)
    caps = np.array([cluster.capacity(t) for t in types], dtype=np.int64)
    stats = {"n_jobs": n, "n_options": int(r.size), "width": K, "capacity": cluster.gpus,
             "capacities": tuple(caps.tolist())}
    return OptionTable(
        job_ids=problem.job_ids,
        capacity=int(cluster.gpus),
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
