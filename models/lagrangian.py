"""Lagrangian (LP-dual) bound and reduced-cost fixing: an exact speed-up (DESIGN §2).

Relaxing the capacity row with a multiplier λ >= 0 gives, for every λ, the
upper bound ::

    L(λ) = λ G + Σ_j max( 0 if j may idle, max_o u[j, o] - λ k[j, o] )

The best λ (the LP dual of the capacity row) is found by bisection on the
subgradient G - Σ_j k_j(λ).  Any allocation that gives job j option o is worth
at most ``L(λ) + r[j, o]`` with the reduced cost ``r[j, o] = (u - λk)[j, o] -
max_o' (u - λk)[j, o'] <= 0``; if that is below the value of a known feasible
allocation (the incumbent), option o cannot be in a better allocation and is
removed.  An incumbent's own options always survive, so the optimum of the
reduced table equals the optimum of the original.  Jobs left with one choice
are fixed and taken out: the DP runs on the remaining core only.

Exactness: λ is searched in floating point, but the bound and every fixing
test are then evaluated exactly, in Python integers, at that λ (a dyadic
rational num/den): any λ >= 0 gives a valid bound, so no rounding margin is needed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from elasticopt.models.table import OptionTable

__all__ = ["Fixing", "lagrangian_bound", "reduced_cost_fixing"]


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


def _scores(table: OptionTable, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """Per job the best u - λk (idle = 0 where allowed) and its option (-1 idle)."""
    s = np.where(table.valid, table.utility.astype(np.float64) - lam * table.gpus, -np.inf)
    if table.width:
        best_o = np.argmax(s, axis=1)
        best = s[np.arange(table.n_jobs), best_o]
    else:
        best_o = np.zeros(table.n_jobs, dtype=np.int64)
        best = np.full(table.n_jobs, -np.inf)
    idle_better = table.idle_allowed & (best <= 0)
    best = np.where(idle_better, 0.0, best)
    choice = np.where(idle_better, -1, best_o)
    return best, choice


def _gpus_of(table: OptionTable, choice: np.ndarray) -> int:
    rows = np.flatnonzero(choice >= 0)
    return int(table.gpus[rows, choice[rows]].sum())


def lagrangian_bound(table: OptionTable, iterations: int = 80) -> tuple[float, float, np.ndarray]:
    """Minimise L(λ) over λ >= 0.

    Returns
    -------
    (bound, λ, choice)
        The best bound found (float), its multiplier, and the Lagrangian
        choice at the smallest λ whose choice fits the capacity (feasible
        unless the table is infeasible).
    """
    G = table.capacity

    def L(lam: float) -> tuple[float, np.ndarray]:
        best, ch = _scores(table, lam)
        return lam * G + float(best.sum()), ch

    val0, ch0 = L(0.0)
    if _gpus_of(table, ch0) <= G:
        return val0, 0.0, ch0
    lo, hi = 0.0, float(np.abs(table.utility).max(initial=0)) + 1.0  # at hi every job prefers its smallest option
    ch_hi = L(hi)[1]
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        _, ch = L(mid)
        if _gpus_of(table, ch) <= G:
            hi, ch_hi = mid, ch
        else:
            lo = mid
    v_lo, _ = L(lo)
    v_hi, _ = L(hi)
    return (v_lo, lo, ch_hi) if v_lo < v_hi else (v_hi, hi, ch_hi)


def _improve(table: OptionTable, choice: np.ndarray) -> np.ndarray:
    """Greedy fill of leftover capacity: per job its best upgrade, by gain per extra GPU."""
    choice = choice.copy()
    n = table.n_jobs
    left = table.capacity - _gpus_of(table, choice)
    if left <= 0:
        return choice
    ar = np.arange(n)
    cur_u = np.where(choice >= 0, table.utility[ar, np.maximum(choice, 0)], 0)
    cur_k = np.where(choice >= 0, table.gpus[ar, np.maximum(choice, 0)], 0)
    gain = table.utility - cur_u[:, None]
    extra = table.gpus - cur_k[:, None]
    ok = table.valid & (gain > 0) & (extra <= left)
    rate = np.where(ok, gain / np.maximum(extra, 0.5), -np.inf)
    best_o = np.argmax(rate, axis=1)
    has = np.isfinite(rate[ar, best_o])
    for j in np.flatnonzero(has)[np.argsort(-rate[has, best_o[has]], kind="stable")]:
        need = int(extra[j, best_o[j]])
        if need <= left:
            left -= need
            choice[j] = best_o[j]
    return choice


def reduced_cost_fixing(table: OptionTable) -> Fixing | None:
    """Remove options that cannot beat a greedy incumbent; fix decided jobs.

    Returns None if the table is infeasible (the Lagrangian choice at any λ
    does not fit), leaving infeasibility to the DP.
    """
    n = table.n_jobs
    if table.width == 0 or not (table.valid.any(axis=1) | table.idle_allowed).all():
        return None  # nothing to fix, or a job that must run has no option: infeasible
    _, lam, ch = lagrangian_bound(table)
    if _gpus_of(table, ch) > table.capacity:
        return None
    inc = _improve(table, ch)
    inc_val, _ = table.objective_of(inc)
    # exact arithmetic: λ = num/den is a dyadic rational; scale every term by den (Python ints)
    num, den = float(lam).as_integer_ratio()
    s = table.utility.astype(object) * den - table.gpus.astype(object) * num
    s = np.where(table.valid, s, -(1 << 400))
    best = s.max(axis=1)
    best = np.where(table.idle_allowed, np.maximum(best, 0), best)
    L_scaled = num * table.capacity + int(best.sum())
    target = int(inc_val) * den
    # an allocation using option o of job j is worth at most (L + reduced cost) / den
    keep = table.valid & ((L_scaled + (s - best[:, None])) >= target).astype(bool)
    idle_keep = table.idle_allowed & ((L_scaled - best) >= target).astype(bool)
    bound = L_scaled // den
    # the incumbent's options survive the tests above (inc_val <= L + its reduced costs); keep them explicitly
    rows = np.flatnonzero(inc >= 0)
    keep[rows, inc[rows]] = True
    idle_keep |= table.idle_allowed & (inc < 0)
    n_choices = keep.sum(axis=1) + idle_keep
    fixed = n_choices == 1
    fixed_choice = np.full(n, -2, dtype=np.int64)
    first_kept = np.argmax(keep, axis=1)
    fixed_choice[fixed] = np.where(idle_keep[fixed], -1, first_kept[fixed])
    frows = np.flatnonzero(fixed & (fixed_choice >= 0))
    fixed_gpus = int(table.gpus[frows, fixed_choice[frows]].sum())
    fixed_util = int(table.utility[frows, fixed_choice[frows]].sum())
    core_rows = np.flatnonzero(~fixed)
    sub_keep = keep[core_rows]
    width = int(sub_keep.sum(axis=1).max()) if core_rows.size else 0
    pos = np.cumsum(sub_keep, axis=1) - 1
    r, c = np.nonzero(sub_keep)

    def pack(a: np.ndarray, fill=0) -> np.ndarray:
        out = np.full((core_rows.size, width), fill, dtype=a.dtype)
        out[r, pos[r, c]] = a[core_rows][r, c]
        return out

    core_cols = np.full((core_rows.size, width), -1, dtype=np.int64)
    core_cols[r, pos[r, c]] = c
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
        capacity=int(table.capacity - fixed_gpus),
        gpus=pack(table.gpus),
        batch=pack(table.batch),
        utility=pack(table.utility),
        value=pack(table.value),
        samples_per_s=pack(table.samples_per_s),
        valid=pack(table.valid, False),
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
        incumbent=inc,
        incumbent_value=int(inc_val),
        options_removed=int(table.valid.sum() - keep.sum()),
    )
