"""Exact reductions of an option table (docs/design.md §2).

Each step returns a new, smaller :class:`OptionTable` with the same optimum
value (tests prove it):

1. ``best_batch``: per job, GPU type, k and packing keep only the best b
   (tie-break: the current b, then the smaller b): capacity and placement see
   (type, k, packed) only.
2. ``dominance``: drop option B of a job if another option A of the same job
   and type is worth at least as much, uses fewer GPUs and is no harder to
   place: A unpacked with k_A < k_B (or k_A = k_B and B packed), or both packed
   with k_A < k_B <= g (one node).  Swapping B for A frees GPUs and places A on
   a subset of B's GPUs.  Idle (0 GPUs, worth 0) dominates every option worth
   <= 0 where the job may idle.
3. ``clip_capacity``: per type, G'_t = min(G_t, sum_j max k_j of type t).

Everything is vectorised over all options at once (no loop over jobs).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from elasticopt.models.flat import compile_flat
from elasticopt.models.problem import Problem
from elasticopt.models.table import OPTION_ARRAYS, OptionTable, table_from_flat

__all__ = ["reduce_table", "compile_reduced", "pack_options"]

_NEG = -(1 << 62)


def _prefix_max(group: np.ndarray, vals: np.ndarray) -> np.ndarray:
    """Inclusive running max of ``vals`` within runs of equal ``group`` (inputs sorted by group).

    A Hillis-Steele scan: log2(longest run) steps of a shifted maximum, each
    taken only where the shifted entry is of the same group.
    """
    out = vals.copy()
    m = out.size
    step = 1
    while step < m:
        same = group[step:] == group[:-step]
        if not same.any():
            break
        np.maximum(out[step:], np.where(same, out[:-step], out[step:]), out=out[step:])
        step *= 2
    return out


def _masked_prefix(group: np.ndarray, vals: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Running max within groups over the entries where ``mask`` (``_NEG`` where none yet)."""
    return _prefix_max(group, np.where(mask, vals, _NEG))


def _sorted(*keys: np.ndarray) -> bool:
    """Whether entries are in lexicographic order of ``keys`` (first key most significant)."""
    if keys[0].size < 2:
        return True
    ok_so_far = np.ones(keys[0].size - 1, dtype=bool)  # equal on the more significant keys so far
    for key in keys:
        d = key[1:].astype(np.int64) - key[:-1].astype(np.int64)
        if (ok_so_far & (d < 0)).any():
            return False
        ok_so_far &= d == 0
    return True


def _keep_index(rows: np.ndarray, t: np.ndarray, g: np.ndarray, p: np.ndarray, u: np.ndarray, b: np.ndarray,
                is_cur: np.ndarray, idle_allowed: np.ndarray, node_sizes: np.ndarray | None,
                best_batch: bool, dominance: bool) -> np.ndarray:
    """Indices (ascending) of the options the reductions keep.

    Options are flat and sorted by (job row, type, k, packed, b): ``rows[i]``,
    ``t[i]``, ``g[i]``, ``p[i]``, ``u[i]``, ``b[i]`` are option i's job row,
    type, k, packing, utility and batch; ``is_cur[i]`` whether it is its
    job's current option; ``node_sizes[t]`` GPUs per node of type t.
    """
    m = rows.size
    idx = np.arange(m)
    kept = idx
    if best_batch and m:
        # per (job, type, k, packed): the best utility, then the current b, then the smallest b
        start = np.ones(m, dtype=bool)
        start[1:] = (rows[1:] != rows[:-1]) | (t[1:] != t[:-1]) | (g[1:] != g[:-1]) | (p[1:] != p[:-1])
        starts = np.flatnonzero(start)
        if starts.size < m:  # else every group is one option: nothing to choose
            grp = np.cumsum(start) - 1
            # the best (utility, current) of each group, as one integer (|u| < 2**53: 2u + 1 fits int64) ...
            key = 2 * u + is_cur
            best = np.maximum.reduceat(key, starts)
            # ... and the first option reaching it: sorted by b within the group, the smallest b
            first = np.minimum.reduceat(np.where(key == best[grp], idx, m), starts)
            rows, g, t, p, u = rows[first], g[first], t[first], p[first], u[first]
            kept = first
            m = rows.size
            idx = np.arange(m)
    if dominance and m:
        # group (job, type), k ascending (the order above)
        new_grp = np.ones(m, dtype=bool)
        new_grp[1:] = (rows[1:] != rows[:-1]) | (t[1:] != t[:-1])
        grp = np.cumsum(new_grp) - 1
        new_k = new_grp.copy()
        new_k[1:] |= g[1:] != g[:-1]
        run_start = np.maximum.accumulate(np.where(new_k, idx, 0))  # first index of this (group, k) run
        is_last = np.ones(m, dtype=bool)
        is_last[:-1] = new_k[1:]
        run_end = np.minimum.accumulate(np.where(is_last, idx, m)[::-1])[::-1]  # last index of the run
        pu = _masked_prefix(grp, u, ~p)  # best unpacked utility so far (k <= this k within the run's end)
        pp = _masked_prefix(grp, u, p)  # best packed utility so far
        before = run_start - 1
        same = (before >= 0) & (grp[np.maximum(before, 0)] == grp)
        u_lt = np.where(same, pu[np.maximum(before, 0)], _NEG)  # unpacked, k < this k
        p_lt = np.where(same, pp[np.maximum(before, 0)], _NEG)  # packed, k < this k
        u_le = pu[run_end]  # unpacked, k <= this k
        idle0 = np.where(idle_allowed[rows], 0, _NEG)
        one_node = (g <= node_sizes[t]) if node_sizes is not None else np.zeros(m, dtype=bool)
        thr_packed = np.maximum(u_le, np.where(one_node, p_lt, _NEG))
        thr = np.maximum(idle0, np.where(p, thr_packed, u_lt))
        kept = kept[u > thr]
    return kept


def _node_sizes(pools) -> np.ndarray | None:
    return np.asarray([pool.gpus_per_node for pool in pools], dtype=np.int64) if pools else None


def _clipped(caps: np.ndarray, rows: np.ndarray, t: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Per type min(G_t, sum over jobs of the most GPUs of type t a kept option uses).

    Kept options flat, sorted by (job row, type, k): the last of each (job, type) run has its most GPUs.
    """
    if not rows.size:
        return np.zeros_like(caps)
    last = np.ones(rows.size, dtype=bool)
    last[:-1] = (rows[1:] != rows[:-1]) | (t[1:] != t[:-1])
    most = np.bincount(t[last], weights=g[last], minlength=caps.size).astype(np.int64)
    return np.minimum(caps, most)


def _keep_mask(table: OptionTable, best_batch: bool, dominance: bool) -> tuple[np.ndarray, np.ndarray]:
    """``keep[j, o]``: option o of job j survives; and the capacities clipped to the kept options."""
    keep = np.zeros_like(table.valid)
    rows, cols = np.nonzero(table.valid)  # row-major: compiled tables list each job's options by (type, k, packed, b)
    g = table.gpus[rows, cols]
    t = table.gpu_type[rows, cols]
    p = table.packed[rows, cols]
    u = table.utility[rows, cols]
    b = table.batch[rows, cols]
    if not _sorted(rows, t, g, p, b):  # tables built elsewhere: sort once
        order = np.lexsort((b, p, g, t, rows))
        rows, cols, g, t, p, u, b = rows[order], cols[order], g[order], t[order], p[order], u[order], b[order]
    is_cur = table.current_option[rows] == cols
    if best_batch or dominance:
        sel = _keep_index(rows, t, g, p, u, b, is_cur, table.idle_allowed, _node_sizes(table.pools),
                          best_batch, dominance)
        rows, cols, t, g = rows[sel], cols[sel], t[sel], g[sel]
    keep[rows, cols] = True
    return keep, _clipped(np.array(table.capacities, dtype=np.int64), rows, t, g)


def pack_options(table: OptionTable, keep: np.ndarray, rows: np.ndarray | None = None) -> tuple[dict, np.ndarray]:
    """The per-option arrays of ``table`` restricted to ``keep`` and packed to the left.

    Parameters
    ----------
    table
        The table.
    keep
        ``keep[j, o]``: option o of job j survives.
    rows
        Job rows to take (all where None), in this order.

    Returns
    -------
    (arrays, cols)
        ``arrays[name]`` for every name in :data:`OPTION_ARRAYS`, and
        ``cols[i, o']`` = column in ``table`` of packed option o' of row i (-1 = none).
    """
    if rows is not None:
        keep = keep[rows]
    n = keep.shape[0]
    width = int(keep.sum(axis=1).max()) if n and keep.size else 0
    pos = np.cumsum(keep, axis=1) - 1
    r, c = np.nonzero(keep)
    pc = pos[r, c]
    src_rows = r if rows is None else rows[r]
    arrays = {}
    for name in OPTION_ARRAYS:
        a = getattr(table, name)
        out = np.zeros((n, width), dtype=a.dtype)
        out[r, pc] = a[src_rows, c]
        arrays[name] = out
    cols = np.full((n, width), -1, dtype=np.int64)
    cols[r, pc] = c
    return arrays, cols


def _compact(table: OptionTable, keep: np.ndarray, capacities: np.ndarray) -> OptionTable:
    n = table.n_jobs
    arrays, _ = pack_options(table, keep)
    pos = np.cumsum(keep, axis=1) - 1
    current = np.full(n, -1, dtype=np.int64)
    cur = table.current_option
    has = cur >= 0
    if keep.shape[1]:
        has &= keep[np.arange(n), np.maximum(cur, 0)]
    current[has] = pos[np.arange(n)[has], cur[has]]
    return replace(
        table,
        capacity=int(capacities.sum()),
        capacities=capacities,
        idle_allowed=table.idle_allowed.copy(),
        current_option=current,
        stats=dict(table.stats),
        **arrays,
    )


def reduce_table(
    table: OptionTable,
    *,
    best_batch: bool = True,
    dominance: bool = True,
    clip_capacity: bool = True,
) -> OptionTable:
    """Apply the exact reductions of docs/design.md §2.

    Parameters
    ----------
    table
        A compiled option table.
    best_batch
        Keep one b per (job, type, k, packed).
    dominance
        Drop options not better than an easier one with fewer GPUs (or idle).
    clip_capacity
        Clip each type's capacity to the most GPUs of that type the jobs can use together.

    Returns
    -------
    OptionTable
        A table with the same optimum; ``stats`` records the sizes before and after.
    """
    keep, clipped = _keep_mask(table, best_batch, dominance)
    caps = clipped if clip_capacity else np.array(table.capacities, dtype=np.int64)
    out = _compact(table, keep, caps)
    return replace(out, stats=_stats(table.stats, int(table.valid.sum()), int(out.valid.sum()),
                                     int(table.capacity), int(caps.sum())))


def _stats(stats, before: int, after: int, cap_before: int, cap_after: int) -> dict:
    out = dict(stats)
    out.update(reduced=True, options_before=before, options_after=after, capacity_before=cap_before,
               capacity_after=cap_after)
    return out


def compile_reduced(problem: Problem) -> OptionTable:
    """``reduce_table(compile_problem(problem))`` in one pass, the table built once at its reduced size.

    The reductions run on the flat options (:func:`~elasticopt.models.flat.compile_flat`)
    before they are laid out as a table; the result is equal, array by
    array, to compiling and then reducing (tested).

    Parameters
    ----------
    problem
        The problem to compile.

    Returns
    -------
    OptionTable
        The reduced table (all three reductions).
    """
    flat = compile_flat(problem)
    f = flat.rows
    sel = _keep_index(f.job, f.gpu_type, f.gpus, f.packed, flat.utility, f.batch, flat.is_current,
                      flat.idle_allowed, _node_sizes(flat.pools), True, True)
    caps = _clipped(flat.capacities, f.job[sel], f.gpu_type[sel], f.gpus[sel])
    table = table_from_flat(flat, sel, caps)
    return replace(table, stats=_stats(table.stats, int(f.job.size), int(sel.size), flat.capacity, int(caps.sum())))
