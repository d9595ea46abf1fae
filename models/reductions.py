"""Exact reductions of an option table (docs/design.md §2).

Each step returns a new, smaller :class:`OptionTable` with the same optimum
value (tests prove it):

1. ``best_batch``: per job and k keep only the best b (tie-break: the current
   b, then the smaller b): the capacity sees k only.
2. ``dominance``: drop an option whose utility is not above that of an option
   with fewer GPUs (or of idle, worth 0 with 0 GPUs, where idle is allowed):
   swapping to the smaller one frees GPUs and loses nothing.
3. ``clip_capacity``: G' = min(G, sum_j max k_j).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from elasticopt.models.table import OptionTable

__all__ = ["reduce_table"]


def _keep_mask(table: OptionTable, best_batch: bool, dominance: bool) -> np.ndarray:
    n, K = table.gpus.shape
    keep = table.valid.copy()
    for j in range(n):
        idx = np.flatnonzero(keep[j])
        if idx.size <= 1 and not (dominance and table.idle_allowed[j]):
            continue
        cur = int(table.current_option[j])
        g = table.gpus[j, idx]
        u = table.utility[j, idx]
        b = table.batch[j, idx]
        # order: k asc, utility desc, current first, batch asc -> first per k is the best b
        is_cur = (idx == cur).astype(np.int64)
        order = np.lexsort((b, -is_cur, -u, g))
        idx, g, u = idx[order], g[order], u[order]
        first = np.ones(idx.size, dtype=bool)
        if best_batch:
            first[1:] = g[1:] != g[:-1]
        chosen = idx[first]
        cu = u[first]
        if dominance:
            # running best over smaller k (idle counts as k = 0, u = 0)
            best_before = np.maximum.accumulate(np.concatenate(([0 if table.idle_allowed[j] else -(1 << 62)], cu)))[:-1]
            cg = g[first]
            # options of equal k (when best_batch is off) must compare against strictly smaller k only
            strict = np.empty_like(best_before)
            lo = 0
            for t in range(cg.size):
                if t > 0 and cg[t] != cg[t - 1]:
                    lo = t
                strict[t] = best_before[lo]
            chosen = chosen[cu > strict]
        row = np.zeros(K, dtype=bool)
        row[chosen] = True
        keep[j] = row
    return keep


def _compact(table: OptionTable, keep: np.ndarray, capacity: int) -> OptionTable:
    n = table.n_jobs
    width = int(keep.sum(axis=1).max()) if n else 0
    pos = np.cumsum(keep, axis=1) - 1
    rows, cols = np.nonzero(keep)
    new_cols = pos[rows, cols]

    def pack(a: np.ndarray, fill=0) -> np.ndarray:
        out = np.full((n, width), fill, dtype=a.dtype)
        out[rows, new_cols] = a[rows, cols]
        return out

    current = np.full(n, -1, dtype=np.int64)
    cur = table.current_option
    has = cur >= 0
    if keep.shape[1]:
        has &= keep[np.arange(n), np.maximum(cur, 0)]
    current[has] = pos[np.arange(n)[has], cur[has]]
    stats = dict(table.stats)
    return replace(
        table,
        capacity=capacity,
        gpus=pack(table.gpus),
        batch=pack(table.batch),
        utility=pack(table.utility),
        value=pack(table.value),
        samples_per_s=pack(table.samples_per_s),
        valid=pack(table.valid, False),
        idle_allowed=table.idle_allowed.copy(),
        current_option=current,
        stats=stats,
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
        Keep one b per (job, k).
    dominance
        Drop options not better than one with fewer GPUs (or idle).
    clip_capacity
        Clip G to the most GPUs the jobs can use together.

    Returns
    -------
    OptionTable
        A table with the same optimum; ``stats`` records the sizes before and after.
    """
    keep = _keep_mask(table, best_batch, dominance) if (best_batch or dominance) else table.valid.copy()
    cap = table.capacity
    if clip_capacity:
        usable = int(np.where(keep, table.gpus, 0).max(axis=1).sum()) if table.width else 0
        cap = min(cap, usable)
    out = _compact(table, keep, cap)
    stats = dict(table.stats)
    stats.update(
        reduced=True,
        options_before=int(table.valid.sum()),
        options_after=int(out.valid.sum()),
        capacity_before=int(table.capacity),
        capacity_after=int(cap),
    )
    return replace(out, stats=stats)
