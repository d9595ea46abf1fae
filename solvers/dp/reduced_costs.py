"""Reduced-cost fixing from the Lagrangian bound: an exact speed-up (docs/design.md §2).

Any allocation that gives job j option o is worth at most ``L(λ) + r[j, o]``
(:mod:`~elasticopt.solvers.dp.lagrangian_bound`); an option whose bound falls below a
known feasible allocation (the incumbent) cannot be in a better one and is
removed, and jobs left with one choice are fixed and taken out: the DP runs on
the remaining core only.  Where the incumbent meets the bound, every job is
fixed: the incumbent is optimal without a DP.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from elasticopt.solvers.dp.lagrangian_bound import LagArrays, fits, improve, lagrangian_bound, margin_of, tie_rounding
from elasticopt.solvers.dp.integer_bound import exact_bound, fill_slack
from elasticopt.solvers.dp.type_split import split_incumbent
from elasticopt.models.reductions import pack_options
from elasticopt.models.table import OPTION_ARRAYS, OptionTable

__all__ = ["Fixing", "Proof", "fixable", "make_fixing", "quick_proof_multi", "reduced_cost_fixing"]


@dataclass(frozen=True)
class Fixing:
    """Result of :func:`reduced_cost_fixing`.

    Attributes
    ----------
    core
        Table of the jobs still free, capacity reduced by the fixed jobs' GPUs.
    core_rows
        ``core_rows[i]`` = row of the original table of core job i.
    core_cols
        ``core_cols[i, o]`` = column in the original table of core option o of core job i.
    fixed_choice
        Per original row: the fixed option (-1 = idle), or -2 for core jobs.
    fixed_utility
        Sum of the fixed jobs' utilities.
    bound
        The Lagrangian upper bound (integer, floored).
    incumbent
        A feasible choice per original row (-1 = idle) and its objective.
    options_removed
        Options eliminated by reduced costs.
    """

    core: OptionTable
    core_rows: np.ndarray
    core_cols: np.ndarray
    fixed_choice: np.ndarray
    fixed_utility: int
    bound: int
    incumbent: np.ndarray
    incumbent_value: int
    options_removed: int
    #: The exact multiplier λ = lam_num / lam_den of the bound (one GPU type; None: the float test was used).
    lam_num: int | None = None
    lam_den: int | None = None


def fixable(table: OptionTable) -> bool:
    """False where fixing has nothing to do (no options) or a job that must run has no option."""
    return bool(table.width) and bool((table.valid.any(axis=1) | table.idle_allowed).all())


def _quick_proof(table: OptionTable, lag: LagArrays) -> Fixing | None:
    """Try λ = the best utility per GPU first: under load it is often the LP optimum.

    There every option scores <= 0, so only jobs that must run take GPUs; if that
    fits, L(λ) = λ G + their scores, and rounding the ties at λ often fills the
    cluster exactly, meeting the bound: every job is then fixed without searching
    for λ.  Returns None when this does not prove optimality.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(table.valid & (table.gpus > 0), table.utility / np.maximum(table.gpus, 1), -np.inf)
    lam = float(ratio.max(initial=-np.inf))
    if not (np.isfinite(lam) and lam > 0):
        return None
    v, ch, k = lag.value(lam)
    if k > table.capacity:
        return None
    bound = int(np.floor(v + margin_of(table, lam)))
    tied = tie_rounding(table, lag, lam)
    if tied is None:
        return None
    inc_val, _ = table.objective_of(tied)
    if inc_val < bound:
        return None
    return _all_fixed(table, bound, tied, int(inc_val))


@dataclass(frozen=True)
class Proof:
    """An allocation proven optimal by the Lagrangian bound alone (every job fixed, no DP needed).

    ``choice[j]``: option of job j (-1 idle), worth ``value`` >= ``bound``, the
    floored Lagrangian bound; ``left[t]``: GPUs of type t it leaves free;
    ``options_removed``: the table's valid options it does not choose.
    """

    choice: np.ndarray
    value: int
    bound: int
    left: np.ndarray
    options_removed: int


def quick_proof_multi(table: OptionTable) -> Proof | None:
    """Several GPU types: λ_t = the best utility per GPU of type t, then a greedy fill of the ties.

    At that λ no option scores above 0, so only the jobs that must run take
    GPUs; if that fits, L(λ) = Σ_t λ_t G_t + their scores.  Options at the best
    rate of their type score 0 (tied with idle): giving them to idle jobs,
    largest first while their type has room, keeps L and raises the incumbent
    by λ_t per GPU; when every type with λ_t > 0 is filled the incumbent meets
    the bound and every job is fixed.  None when this does not prove optimality
    (or the table has one type, or no options).  One compiled pass
    (:func:`elasticopt.solvers.dp.kernels.quick_proof_multi`).
    """
    from elasticopt.solvers.dp.kernels import quick_proof_multi as kernel

    if table.n_types < 2 or not table.width:
        return None
    proven, bound, choice, value, left, n_valid = kernel(
        table.valid, table.gpus, table.gpu_type, table.utility, table.idle_allowed,
        np.asarray(table.capacities, dtype=np.int64), int(table.capacity))
    if not proven:
        return None
    return Proof(choice, int(value), int(bound), left, int(n_valid) - int(np.count_nonzero(choice >= 0)))


def _quick_proof_multi(table: OptionTable) -> Fixing | None:
    """:func:`quick_proof_multi` as a :class:`Fixing` (every job fixed, an empty core)."""
    proof = quick_proof_multi(table)
    if proof is None:
        return None
    return _all_fixed(table, proof.bound, proof.choice, proof.value, proof.left, proof.options_removed)


def reduced_cost_fixing(table: OptionTable, quick: bool = True,
                        solve: Callable[[OptionTable], np.ndarray | None] | None = None) -> Fixing | None:
    """Remove options that cannot beat a greedy incumbent; fix decided jobs.

    Returns None if the table is infeasible (the Lagrangian choice at any λ
    does not fit), leaving infeasibility to the DP.  ``quick=False`` skips
    :func:`quick_proof_multi` (the caller tried it already).  ``solve``
    (several types): a solver of the restricted table of
    :func:`~elasticopt.solvers.dp.type_split.split_incumbent` (each job on
    the type of its best Lagrangian score), for a stronger incumbent.
    """
    proof = _quick_proof_multi(table) if quick else None
    if proof is not None:  # (the proof fails where a job that must run has no option)
        return proof
    if not fixable(table):
        return None  # nothing to fix, or a job that must run has no option: infeasible
    lag = LagArrays(table)
    quick = None if lag.multi else _quick_proof(table, lag)
    if quick is not None:
        return quick
    bound_f, lam, ch = lagrangian_bound(table, lag=lag)
    if not fits(table, ch):
        return None
    margin = margin_of(table, lam)  # bound_f is L(λ) as evaluated by the search
    bound = int(np.floor(bound_f + margin))
    inc = ch
    inc_val, _ = table.objective_of(inc)
    if inc_val < bound and not lag.multi:  # round the LP: among options tied at λ, move jobs to more GPUs while they fit
        tied = tie_rounding(table, lag, lam)
        if tied is not None:
            tied_val, _ = table.objective_of(tied)
            if tied_val > inc_val:
                inc, inc_val = tied, tied_val
    if inc_val < bound:  # still not proven optimal: fill leftover GPUs greedily
        inc = improve(table, inc)
        inc_val, _ = table.objective_of(inc)
    if inc_val >= bound:  # the incumbent meets the bound: it is optimal, every job is fixed to it
        return _all_fixed(table, bound, inc, int(inc_val))
    # the same bound without rounding, at a rational λ near the float one (lagrangian_exact): no margin,
    # and an option is kept only if it may be in a strictly better allocation
    exact = exact_bound(table, lam)
    if exact is not None:
        bound = min(bound, exact.floor)
        if inc_val < bound and not lag.multi:  # fill the free GPUs by moves among tied options
            filled = fill_slack(table, exact, inc)
            if filled is not inc:
                f_val, _ = table.objective_of(filled)
                if f_val > inc_val and fits(table, filled):
                    inc, inc_val = filled, f_val
        if inc_val < bound and lag.multi and solve is not None:  # each job on its best type, solved exactly
            split = split_incumbent(table, exact.scores, solve)
            if split is not None and fits(table, split):
                s_val, _ = table.objective_of(split)
                if s_val > inc_val:
                    inc, inc_val = split, s_val
        if inc_val >= bound:
            return _all_fixed(table, bound, inc, int(inc_val))
        keep, idle_keep = exact.keep(table, int(inc_val))
        fix = make_fixing(table, bound, inc, int(inc_val), keep, idle_keep)
        return fix if lag.multi else replace(fix, lam_num=exact.num[0], lam_den=exact.den)
    # an allocation using option o of job j is worth at most L + reduced cost (reduced <= 0)
    best, _, _ = lag.scores(lam)
    s = lag.option_scores(lam)
    keep = table.valid & (bound_f + (s - best[:, None]) >= inc_val - margin)
    idle_keep = table.idle_allowed & (bound_f - best >= inc_val - margin)
    return make_fixing(table, bound, inc, int(inc_val), keep, idle_keep)


def _all_fixed(table: OptionTable, bound: int, inc: np.ndarray, inc_val: int, caps: np.ndarray | None = None,
               removed: int | None = None) -> Fixing:
    """Every job fixed to the incumbent (proven optimal): an empty core.

    ``caps``: the GPUs per type the incumbent leaves free, ``removed`` the
    valid options it does not choose (computed here where None).
    """
    inc = np.asarray(inc, dtype=np.int64)
    if caps is None:
        caps = np.asarray(table.capacities) - table.gpus_by_type(inc)
    if removed is None:
        removed = int(table.valid.sum()) - int(np.count_nonzero(inc >= 0))
    arrays = _empty_arrays(table.width)
    core = OptionTable(
        job_ids=(),
        capacity=int(caps.sum()),
        scale=table.scale,
        tie_scale=table.tie_scale,
        idle_allowed=_EMPTY_BOOL,
        current_option=_EMPTY_INT,
        running_ids=(),
        stats=dict(table.stats),
        types=table.types,
        capacities=caps,
        pools=table.pools,
        **arrays,
    )
    return Fixing(
        core=core,
        core_rows=_EMPTY_INT,
        core_cols=_empty_arrays(0)["gpus"],
        fixed_choice=inc,
        fixed_utility=inc_val,
        bound=int(bound),
        incumbent=inc,
        incumbent_value=inc_val,
        options_removed=removed,
    )


def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


_EMPTY_INT = _frozen(np.zeros(0, dtype=np.int64))
_EMPTY_BOOL = _frozen(np.zeros(0, dtype=bool))
_EMPTY: dict[int, dict[str, np.ndarray]] = {}


def _empty_arrays(width: int) -> dict[str, np.ndarray]:
    """The ``[0, width]`` option arrays of an empty core (read-only, shared)."""
    out = _EMPTY.get(width)
    if out is None:
        dtypes = {"gpus": np.int64, "batch": np.int64, "utility": np.int64, "value": np.float64,
                  "samples_per_s": np.float64, "valid": bool, "gpu_type": np.int64, "packed": bool}
        out = _EMPTY[width] = {name: _frozen(np.zeros((0, width), dtype=dtypes[name])) for name in OPTION_ARRAYS}
    return out


def make_fixing(
    table: OptionTable, bound: int, inc: np.ndarray, inc_val: int, keep: np.ndarray, idle_keep: np.ndarray
) -> Fixing:
    """Fix the jobs left with one choice and pack the rest into the core table.

    ``keep[j, o]`` / ``idle_keep[j]``: the choices that survived the reduced-cost
    test; the incumbent's own choices are added here whatever the test said.
    """
    n = table.n_jobs
    keep = keep.copy()
    idle_keep = idle_keep.copy()
    # the incumbent's options survive the tests (inc_val <= L + its reduced costs); keep them explicitly
    rows = np.flatnonzero(inc >= 0)
    keep[rows, inc[rows]] = True
    idle_keep |= table.idle_allowed & (inc < 0)
    n_choices = keep.sum(axis=1) + idle_keep
    fixed = n_choices == 1
    fixed_choice = np.full(n, -2, dtype=np.int64)
    first_kept = np.argmax(keep, axis=1)
    fixed_choice[fixed] = np.where(idle_keep[fixed], -1, first_kept[fixed])
    frows = np.flatnonzero(fixed & (fixed_choice >= 0))
    fixed_util = int(table.utility[frows, fixed_choice[frows]].sum())
    fixed_only = np.where(fixed, fixed_choice, -1)
    caps = np.asarray(table.capacities) - table.gpus_by_type(fixed_only)
    core_rows = np.flatnonzero(~fixed)
    sub_keep = keep[core_rows]
    width = int(sub_keep.sum(axis=1).max()) if core_rows.size else 0
    pos = np.cumsum(sub_keep, axis=1) - 1
    arrays, core_cols = pack_options(table, keep, core_rows)
    cur = table.current_option[core_rows]
    ci = np.arange(core_rows.size)
    has_cur = cur >= 0
    if width:
        has_cur &= sub_keep[ci, np.maximum(cur, 0)]
    new_cur = np.where(has_cur, pos[ci, np.maximum(cur, 0)] if width else -1, -1).astype(np.int64)
    core_ids = set(table.job_ids[j] for j in core_rows)
    core = replace(
        table,
        job_ids=tuple(table.job_ids[j] for j in core_rows),
        capacity=int(caps.sum()),
        capacities=caps,
        **arrays,
        idle_allowed=idle_keep[core_rows].copy(),
        current_option=new_cur,
        running_ids=tuple(i for i in table.running_ids if i in core_ids),
        stats=dict(table.stats),
    )
    return Fixing(
        core=core,
        core_rows=core_rows,
        core_cols=core_cols,
        fixed_choice=fixed_choice,
        fixed_utility=fixed_util,
        bound=int(bound),
        incumbent=np.asarray(inc, dtype=np.int64),
        incumbent_value=int(inc_val),
        options_removed=int(table.valid.sum() - keep.sum()),
    )
