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

from elasticopt.models.flat import DEFAULT_SCALE, MAX_TOTAL, FlatOptions, Keep, compile_flat, pick_scale, tie_bonus
from elasticopt.models.objectives import job_values
from elasticopt.models.problem import Pool, Problem

__all__ = [
    "OptionTable", "OPTION_ARRAYS", "compile_problem", "job_values", "pick_scale",
    "DEFAULT_SCALE", "MAX_TOTAL", "tie_bonus", "table_from_flat",
]

#: The ``[n, K]`` per-option arrays of an :class:`OptionTable` (packed together by reductions and fixing).
OPTION_ARRAYS: tuple[str, ...] = ("gpus", "batch", "utility", "value", "samples_per_s", "valid", "gpu_type", "packed")

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


def table_from_flat(flat: FlatOptions, sel: np.ndarray | None = None, clip: bool = False,
                    stats: Mapping[str, Any] | None = None) -> OptionTable:
    """Lay flat options out as an :class:`OptionTable` (job j's options, in order, on row j).

    Parameters
    ----------
    flat
        The options, from :func:`~elasticopt.models.flat.compile_flat`.
    sel
        Indices (ascending) of the options to keep; all where None.
    clip
        Clip each type's capacity to the most GPUs of that type the kept
        options can use together (sum over jobs of each job's largest k).
    stats
        Entries added to the table's ``stats``.
    """
    from elasticopt.models.kernels import layout

    n = flat.n_jobs
    f = flat.rows
    if sel is None:
        sel = np.arange(f.job.size)
    gpus, batch, sps, gtype, packed, value, utility, valid, current, most = layout(
        sel, n, len(flat.types), f.job, f.gpus, f.batch, f.samples_per_s, f.gpu_type, f.packed, flat.value,
        flat.utility, flat.is_current)
    caps = np.minimum(flat.capacities, most) if clip else flat.capacities.copy()
    info = {"n_jobs": n, "n_options": int(f.job.size), "width": int(flat.counts.max()) if n else 0,
            "capacity": flat.capacity, "capacities": tuple(flat.capacities.tolist())}
    if stats:
        info.update(stats)
    return OptionTable(
        job_ids=flat.job_ids,
        capacity=int(caps.sum()) if clip else flat.capacity,
        scale=flat.scale,
        tie_scale=flat.tie_scale,
        gpus=gpus,
        batch=batch,
        utility=utility,
        value=value,
        samples_per_s=sps,
        valid=valid,
        idle_allowed=flat.idle_allowed.copy(),
        current_option=current,
        running_ids=flat.running_ids,
        stats=info,
        gpu_type=gtype,
        packed=packed,
        types=flat.types,
        capacities=caps,
        pools=flat.pools,
    )


def compile_problem(problem: Problem, keep: Keep | None = None) -> OptionTable:
    """Compile a problem to its canonical integer option table (docs/design.md §2).

    Options are every feasible (type, k, b[, packed]) with k <= the type's
    free GPUs (:mod:`elasticopt.models.options`, the arrays of
    :meth:`~elasticopt.models.Job.typed_options`); ``utility = round(v * S)``
    with S the largest power of two <= 2**20 keeping ``sum_j max |u|`` within
    2**52; with a priority order each non-idle option of a job also gets an
    integer bonus below one utility unit (utilities are scaled by B first).
    The options are computed flat (:func:`~elasticopt.models.flat.compile_flat`),
    vectorised after the per-job block look-up, then laid out as a table.

    Parameters
    ----------
    problem
        The problem to compile.
    keep
        Optional restriction ``keep(rows) -> mask`` of the options (``compile_flat``'s).

    Returns
    -------
    OptionTable
        The unreduced table (see :func:`elasticopt.models.reduce_table`, and
        :func:`elasticopt.models.reductions.compile_reduced` for both in one pass).
    """
    return table_from_flat(compile_flat(problem, keep))
