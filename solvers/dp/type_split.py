"""Several GPU types: the jobs whose options all lie on one type separate (docs/design.md §3).

A job whose valid options are all of type t changes only the type-t
coordinate of the DP state.  Call the jobs with options on two or more types
the *coupled* jobs X, and the rest the groups J_t (options on type t only).
The order of the jobs in the DP does not change its optimum, so take X first
and then each group: with F_X(p) the best value of X on at most p_t GPUs of
each type (the multi-type DP over X alone) and f_t(c) the best value of J_t
on at most c GPUs of type t (a one-type DP), the optimum is exactly ::

    max_p  F_X(p) + Σ_t f_t(G_t - p_t)

(every allocation splits into X's part, using some p, and each group's part,
using at most G_t - p_t; and every such combination is feasible).  The
multi-type state space is then paid for X only, the groups cost
Σ_t |J_t| (G_t + 1) cells instead of |J_t| Π_t (G_t + 1).

The same split gives a strong incumbent (:func:`split_incumbent`): keep every
job on the type of its best Lagrangian score (jobs tied across types keep the
tied types), which makes almost every job single-type, and solve that table
exactly with the split DP; any such allocation is feasible for the whole
table, so it can only improve the incumbent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from elasticopt.models.reductions import pack_options
from elasticopt.models.table import OPTION_ARRAYS, OptionTable
from elasticopt.solvers.common import INFEASIBLE_BELOW, NEG

__all__ = ["coupled_rows", "type_groups", "rows_table", "sub_table", "restricted", "split_incumbent", "clip_capacities",
           "split_dp", "combine"]


def coupled_rows(table: OptionTable) -> np.ndarray:
    """Per row: whether its valid options lie on two or more GPU types."""
    if not table.width or table.n_types < 2:
        return np.zeros(table.n_jobs, dtype=bool)
    big = np.int64(table.n_types)
    lo = np.where(table.valid, table.gpu_type, big).min(axis=1)
    hi = np.where(table.valid, table.gpu_type, -1).max(axis=1)
    return table.valid.any(axis=1) & (lo != hi)


def type_groups(table: OptionTable) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
    """(coupled rows, rows of each type's group, rows with no valid option)."""
    x = coupled_rows(table)
    has = table.valid.any(axis=1) if table.width else np.zeros(table.n_jobs, dtype=bool)
    first = np.where(table.valid, table.gpu_type, table.n_types).min(axis=1) if table.width else \
        np.zeros(table.n_jobs, dtype=np.int64)
    single = has & ~x
    groups = [np.flatnonzero(single & (first == t)) for t in range(table.n_types)]
    return np.flatnonzero(x), groups, np.flatnonzero(~has)


def rows_table(table: OptionTable, rows: np.ndarray) -> OptionTable:
    """The table of ``rows`` only (every type, the same columns and capacities)."""
    rows = np.asarray(rows, dtype=np.int64)
    ids = tuple(table.job_ids[j] for j in rows)
    id_set = set(ids)
    arrays = {name: getattr(table, name)[rows] for name in OPTION_ARRAYS}
    return replace(table, job_ids=ids, idle_allowed=table.idle_allowed[rows],
                   current_option=table.current_option[rows],
                   running_ids=tuple(i for i in table.running_ids if i in id_set), stats=dict(table.stats), **arrays)


def sub_table(table: OptionTable, rows: np.ndarray, t: int) -> tuple[OptionTable, np.ndarray]:
    """The one-type table of ``rows`` with their options of type ``t`` only (capacity ``G_t``), packed left.

    Returns (table, cols): ``cols[i, o]`` is the column in ``table`` of option o of row i (-1: none).
    """
    rows = np.asarray(rows, dtype=np.int64)
    keep = table.valid & (table.gpu_type == t)
    arrays, cols = pack_options(table, keep, rows)
    arrays["gpu_type"] = np.zeros_like(arrays["gpus"])
    ids = tuple(table.job_ids[j] for j in rows)
    id_set = set(ids)
    cap = int(table.capacities[t])
    cur = table.current_option[rows]
    new_cur = np.full(rows.size, -1, dtype=np.int64)
    if cols.size:
        hit = (cols == cur[:, None]) & (cur[:, None] >= 0)
        new_cur = np.where(hit.any(axis=1), np.argmax(hit, axis=1), -1).astype(np.int64)
    sub = replace(
        table,
        job_ids=ids,
        capacity=cap,
        capacities=np.array([cap], dtype=np.int64),
        types=(table.types[t],),
        pools=None if table.pools is None else (table.pools[t],),
        idle_allowed=table.idle_allowed[rows],
        current_option=new_cur,
        running_ids=tuple(i for i in table.running_ids if i in id_set),
        stats=dict(table.stats),
        **arrays,
    )
    return sub, cols


def restricted(table: OptionTable, scores: np.ndarray, max_cells: int = 50_000_000) -> OptionTable:
    """Every job kept on the type(s) of its best-scoring valid option only (``scores[j, o]``, exact integers).

    Jobs whose best score is reached on two or more types (exact ties) keep
    all of those types while the coupled DP over them stays under
    ``max_cells`` (first all such jobs, then only those that must run; else
    none: ties go to the lowest type).  The result has the same rows and
    columns: any feasible choice of it is feasible for ``table``.
    """
    T = table.n_types
    if not table.width:
        return table
    s = np.where(table.valid, scores, np.iinfo(np.int64).min)
    best = s.max(axis=1)
    top = table.valid & (s == best[:, None])
    on = np.zeros((table.n_jobs, T), dtype=bool)  # on[j, t]: a best-scoring option of job j is of type t
    rows, cols = np.nonzero(top)
    on[rows, table.gpu_type[rows, cols]] = True
    tied = on.sum(axis=1) > 1
    first = np.argmax(on, axis=1)
    for allowed in (tied, tied & ~table.idle_allowed):
        if not allowed.any():
            break
        used = on[allowed].any(axis=0)
        states = float(np.prod(np.where(used, np.asarray(table.capacities, dtype=np.float64) + 1, 1.0)))
        if allowed.sum() * states <= max_cells:
            break
    else:
        allowed = np.zeros(table.n_jobs, dtype=bool)
    keep_types = np.where(allowed[:, None], on, np.arange(T)[None, :] == first[:, None])
    valid = table.valid & keep_types[np.arange(table.n_jobs)[:, None], table.gpu_type]
    cur = table.current_option
    ok = (cur >= 0) & valid[np.arange(table.n_jobs), np.maximum(cur, 0)]
    return replace(table, valid=valid, current_option=np.where(ok, cur, -1).astype(np.int64))


def split_incumbent(table: OptionTable, scores: np.ndarray,
                    solve: Callable[[OptionTable], np.ndarray | None]) -> np.ndarray | None:
    """A feasible allocation: the optimum of :func:`restricted` (each job on its best type), by ``solve``.

    ``solve(table)`` returns a choice per row (-1 idle) that fits the
    capacities, or None; on the restricted table almost every job is
    single-type, so the split DP solves it with a small coupled part.
    Returns None where a job that must run has no option left or ``solve`` fails.
    """
    sub = restricted(table, scores)
    if not (sub.valid.any(axis=1) | sub.idle_allowed).all():
        return None
    out = solve(sub)
    if out is None or (table.gpus_by_type(out) > np.asarray(table.capacities)).any():
        return None
    return np.asarray(out, dtype=np.int64)


def clip_capacities(table: OptionTable) -> OptionTable:
    """Per type, the capacity clipped to the most GPUs of that type the jobs can use (fewer DP states)."""
    if not table.width:
        return replace(table, capacities=np.zeros_like(table.capacities), capacity=0)
    rows, cols = np.nonzero(table.valid)
    most = np.zeros((table.n_jobs, table.n_types), dtype=np.int64)
    np.maximum.at(most, (rows, table.gpu_type[rows, cols]), table.gpus[rows, cols])
    caps = np.minimum(np.asarray(table.capacities), most.sum(axis=0))
    return replace(table, capacities=caps, capacity=int(caps.sum()))


def split_dp(core: OptionTable, x: np.ndarray, groups: list[np.ndarray], xt: OptionTable,
             forward1: Callable[[OptionTable], Any], forward_x: Callable[[OptionTable], Any]
             ) -> tuple[int, np.ndarray, int] | None:
    """The optimum of ``core`` by the split: ``max_p F_X(p) + Σ_t f_t(G_t - p_t)`` and the choice reaching it.

    ``x``, ``groups``: from :func:`type_groups` (rows with no option idle);
    ``xt``: the coupled rows' table (:func:`rows_table`, capacities clipped).
    ``forward1(one_type_table)`` / ``forward_x(xt)``: a DP's final row of
    values over the states (value on at most p GPUs; infeasible below
    ``INFEASIBLE_BELOW``) and ``back(p)``, the choice per row from state p,
    or None when the time limit passed.  Returns (best, choice per core row,
    cells: jobs x states run), best < ``INFEASIBLE_BELOW`` where nothing
    fits, or None on the time limit.
    """
    caps = np.asarray(core.capacities)
    f, backs, cells = [], [], 0
    for t, rows in enumerate(groups):
        if rows.size == 0:
            f.append(np.zeros(int(caps[t]) + 1, dtype=np.int64))
            backs.append(None)
            continue
        sub, cols = sub_table(core, rows, t)  # (its options packed left: the group's own width)
        out = forward1(sub)
        if out is None:
            return None
        f.append(out[0])
        backs.append((out[1], cols))
        cells += rows.size * (int(caps[t]) + 1)
    dims = tuple(int(c) + 1 for c in xt.capacities)
    back_x = None
    if x.size:
        out = forward_x(xt)
        if out is None:
            return None
        fx, back_x = out
        cells += x.size * int(np.prod(dims))
    else:
        dims, fx = (1,) * core.n_types, np.zeros(1, dtype=np.int64)
    best, p = combine(fx, dims, caps, f, NEG)
    choice = np.full(core.n_jobs, -1, dtype=np.int64)
    if best < INFEASIBLE_BELOW:
        return best, choice, cells
    coord = np.unravel_index(p, dims)
    if back_x is not None:
        choice[x] = back_x(p)[: x.size]
    for t, rows in enumerate(groups):
        if backs[t] is not None:
            back, cols = backs[t]
            c = back(int(caps[t]) - int(coord[t]))[: rows.size]
            choice[rows] = np.where(c >= 0, cols[np.arange(rows.size), np.maximum(c, 0)], -1)
    return best, choice, cells


def combine(fx: np.ndarray, dims: tuple[int, ...], caps: np.ndarray, f: list[np.ndarray], neg: int) -> tuple[int, int]:
    """``max_p F_X(p) + Σ_t f_t(G_t - p_t)`` over the flat state p of ``dims`` (row-major).

    ``fx[p]``: X's best value on at most p (length Π dims); ``f[t][c]``: type t's group
    on at most c GPUs (length ``caps[t] + 1``, ``dims[t] <= caps[t] + 1``).  Returns
    (best value, its flat state); values below ``neg`` are infeasible.
    """
    total = np.maximum(np.asarray(fx[: int(np.prod(dims))], dtype=np.int64), neg).reshape(dims)
    for t, d in enumerate(dims):
        ft = np.maximum(np.asarray(f[t], dtype=np.int64), neg)
        col = ft[int(caps[t]) - np.arange(d)]  # f_t(G_t - p_t) for p_t = 0..d-1
        shape = [1] * len(dims)
        shape[t] = d
        total = total + col.reshape(shape)
    flat = total.ravel()
    p = int(np.argmax(flat))
    return int(flat[p]), p
