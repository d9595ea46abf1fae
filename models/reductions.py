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

from elasticopt.models.table import OPTION_ARRAYS, OptionTable

__all__ = ["reduce_table", "pack_options"]

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


def _keep_mask(table: OptionTable, best_batch: bool, dominance: bool) -> np.ndarray:
    n, K = table.gpus.shape
    keep = table.valid.copy()
    if not keep.any():
        return keep
    rows, cols = np.nonzero(keep)  # row-major: compiled tables list each job's options by (type, k, packed, b)
    g = table.gpus[rows, cols]
    t = table.gpu_type[rows, cols]
    p = table.packed[rows, cols]
    u = table.utility[rows, cols]
    b = table.batch[rows, cols]
    if not _sorted(rows, t, g, p, b):  # tables built elsewhere: sort once
        order = np.lexsort((b, p, g, t, rows))
        rows, cols, g, t, p, u, b = rows[order], cols[order], g[order], t[order], p[order], u[order], b[order]
    m = rows.size
    idx = np.arange(m)
    if best_batch:
        # per (job, type, k, packed): the best utility, then the current b, then the smallest b
        start = np.ones(m, dtype=bool)
        start[1:] = (rows[1:] != rows[:-1]) | (t[1:] != t[:-1]) | (g[1:] != g[:-1]) | (p[1:] != p[:-1])
        starts = np.flatnonzero(start)
        grp = np.cumsum(start) - 1
        best_u = np.maximum.reduceat(u, starts)
        is_cur = table.current_option[rows] == cols
        rank = np.where(u == best_u[grp], 1 + is_cur.astype(np.int64), 0)  # 2: best and current, 1: best
        best_rank = np.maximum.reduceat(rank, starts)
        first = np.minimum.reduceat(np.where(rank == best_rank[grp], idx, m), starts)  # sorted by b: smallest b
        rows, cols, g, t, p, u = rows[first], cols[first], g[first], t[first], p[first], u[first]
        m = rows.size
        idx = np.arange(m)
    if dominance:
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
        idle0 = np.where(table.idle_allowed[rows], 0, _NEG)
        node = np.asarray([pool.gpus_per_node for pool in table.pools], dtype=np.int64) if table.pools else None
        one_node = (g <= node[t]) if node is not None else np.zeros(m, dtype=bool)
        thr_packed = np.maximum(u_le, np.where(one_node, p_lt, _NEG))
        thr = np.maximum(idle0, np.where(p, thr_packed, u_lt))
        ok = u > thr
        rows, cols = rows[ok], cols[ok]
    out = np.zeros_like(keep)
    out[rows, cols] = True
    return out


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
    keep = _keep_mask(table, best_batch, dominance) if (best_batch or dominance) else table.valid.copy()
    caps = np.array(table.capacities, dtype=np.int64)
    if clip_capacity and table.width:
        rows, cols = np.nonzero(keep)
        T = table.n_types
        # per (job, type) the most GPUs of that type, summed over jobs
        most = np.zeros((table.n_jobs, T), dtype=np.int64)
        np.maximum.at(most, (rows, table.gpu_type[rows, cols]), table.gpus[rows, cols])
        caps = np.minimum(caps, most.sum(axis=0))
    elif clip_capacity:
        caps = np.zeros_like(caps)
    out = _compact(table, keep, caps)
    stats = dict(table.stats)
    stats.update(
        reduced=True,
        options_before=int(table.valid.sum()),
        options_after=int(out.valid.sum()),
        capacity_before=int(table.capacity),
        capacity_after=int(caps.sum()),
    )
    return replace(out, stats=stats)
