"""The separable objectives (docs/design.md §2): per option a value v, computed for many jobs at once.

An objective is one entry of :data:`OBJECTIVE_VALUES`: a function of the
problem, the jobs and their options flattened into :class:`OptionRows`,
returning v per option (nan: the objective does not offer that option).
:func:`job_values` applies the same function to one job's options, so the
compiled table and the independent checks (``verify``, brute force) share one
definition.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter

import numpy as np

from elasticopt.models.problem import Job, Option, Problem

__all__ = ["OptionRows", "OBJECTIVE_VALUES", "job_values", "current_key", "values_of"]

_WEIGHT = attrgetter("weight")


@dataclass(frozen=True)
class OptionRows:
    """Options of several jobs, flattened: option i belongs to ``jobs[job[i]]``.

    Attributes
    ----------
    job
        ``job[i]``: index (into the ``jobs`` passed alongside) of the job of option i.
    gpus, batch, samples_per_s
        k, b and T(k, b) of option i.
    gpu_type
        ``gpu_type[i]``: index into ``types`` of option i's GPU type.
    packed
        ``packed[i]``: option i sits on the fewest nodes.
    types
        GPU type names.
    """

    job: np.ndarray
    gpus: np.ndarray
    batch: np.ndarray
    samples_per_s: np.ndarray
    gpu_type: np.ndarray
    packed: np.ndarray
    types: tuple[str, ...]

    @classmethod
    def of(cls, problem: Problem, opts: Sequence) -> "OptionRows":
        """The options of one job: :class:`Option` objects or ``(k, b, samples_per_s)`` tuples (one type)."""
        types = problem.cluster.types
        if opts and isinstance(opts[0], Option):
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


def _weights(jobs: Sequence[Job]) -> np.ndarray:
    return np.fromiter(map(_WEIGHT, jobs), dtype=np.float64, count=len(jobs))


def _v_speedup(problem: Problem, jobs: Sequence[Job], rows: OptionRows) -> np.ndarray:
    from elasticopt.models.kernels import group_max  # numba: imported on first use

    best = group_max(rows.job, rows.samples_per_s / rows.gpus, len(jobs))  # R_j: the job's best per-GPU rate
    return _weights(jobs)[rows.job] * rows.samples_per_s / best[rows.job]


def _v_goodput(problem: Problem, jobs: Sequence[Job], rows: OptionRows) -> np.ndarray:
    """Speedup of T(k, b) * E(b), E the job's statistical efficiency (1 where it has none)."""
    e = np.ones(rows.job.size)
    has = np.fromiter((j.efficiency is not None for j in jobs), dtype=bool, count=len(jobs))
    for i in np.flatnonzero(has[rows.job]).tolist():
        e[i] = float(jobs[int(rows.job[i])].efficiency(int(rows.batch[i])))  # type: ignore[misc]
    g = rows.samples_per_s * e
    from elasticopt.models.kernels import group_max

    best = group_max(rows.job, g / rows.gpus, len(jobs))  # the job's best goodput per GPU
    return _weights(jobs)[rows.job] * g / best[rows.job]


def _v_throughput(problem: Problem, jobs: Sequence[Job], rows: OptionRows) -> np.ndarray:
    return _weights(jobs)[rows.job] * rows.samples_per_s


def _v_completion(problem: Problem, jobs: Sequence[Job], rows: OptionRows) -> np.ndarray:
    rem = np.fromiter((j.remaining_samples or np.nan for j in jobs), dtype=np.float64, count=len(jobs))
    return _weights(jobs)[rows.job] * rows.samples_per_s / rem[rows.job]


def _v_value(problem: Problem, jobs: Sequence[Job], rows: OptionRows) -> np.ndarray:
    out = np.full(rows.job.size, np.nan)
    types = rows.types
    for i, (j, t, k, b, p) in enumerate(zip(rows.job.tolist(), rows.gpu_type.tolist(), rows.gpus.tolist(),
                                            rows.batch.tolist(), rows.packed.tolist())):
        vals = jobs[j].values
        if vals:
            v = vals.get((types[t], k, b, "packed") if p else (types[t], k, b))
            if v is not None:
                out[i] = jobs[j].weight * v
    return out


#: Objective name -> per option its value v (docs/design.md §2); nan = option not offered.
#: A new separable objective is one entry here (and its name in ``problem.OBJECTIVES``).
OBJECTIVE_VALUES: dict[str, Callable[[Problem, Sequence[Job], OptionRows], np.ndarray]] = {
    "speedup": _v_speedup,
    "throughput": _v_throughput,
    "completion": _v_completion,
    "goodput": _v_goodput,
    "value": _v_value,
}


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


def values_of(problem: Problem, jobs: Sequence[Job], rows: OptionRows, current: np.ndarray) -> np.ndarray:
    """v of every option, the rescale penalty subtracted from a running job's other options.

    ``current[i]`` True iff option i is its job's current option.
    """
    vals = OBJECTIVE_VALUES[problem.objective](problem, jobs, rows)
    lam = float(problem.rescale_penalty)
    if lam:
        running = np.fromiter((j.running is not None for j in jobs), dtype=bool, count=len(jobs))
        vals = np.where(running[rows.job] & ~current, vals - lam, vals)
    return vals


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
    rows = OptionRows.of(problem, opts)
    cur = np.zeros(len(opts), dtype=bool)
    if job.running is not None:
        if isinstance(opts[0], Option):
            key = current_key(problem, job)
            cur = np.array([(o.gpu_type, o.gpus, o.batch, o.packed) == key for o in opts])
        else:
            cur = np.array([(o[0], o[1]) == (job.running.gpus, job.running.batch) for o in opts])
    return values_of(problem, [job], rows, cur).tolist()
