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

Steps 1 and 2 are one compiled pass over the options sorted by (job, type, k,
packed, b) (:func:`elasticopt.models.kernels.keep_index`); the rest is
vectorised over all options at once.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from elasticopt.models.flat import Keep, compile_flat
from elasticopt.models.problem import Problem
from elasticopt.models.table import OPTION_ARRAYS, OptionTable, table_from_flat

__all__ = ["reduce_table", "compile_reduced", "pack_options"]


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


def _keep_index(rows: np.ndarray, t: np.ndarray, g: np.ndarray, p: np.ndarray, u: np.ndarray,
                is_cur: np.ndarray, idle_allowed: np.ndarray, node_sizes: np.ndarray | None,
                best_batch: bool, dominance: bool) -> np.ndarray:
    """Indices (ascending) of the options the reductions keep (one compiled pass:
    :func:`elasticopt.models.kernels.keep_index`).

    Options are flat and sorted by (job row, type, k, packed, b): ``rows[i]``,
    ``t[i]``, ``g[i]``, ``p[i]``, ``u[i]`` are option i's job row, type, k,
    packing and utility; ``is_cur[i]`` whether it is its job's current option;
    ``node_sizes[t]`` GPUs per node of type t.
    """
    from elasticopt.models.kernels import keep_index

    sizes = _NO_NODES if node_sizes is None else node_sizes
    return keep_index(rows, t, g, p, u, is_cur, idle_allowed, sizes, best_batch, dominance)


_NO_NODES = np.zeros(0, dtype=np.int64)


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
        sel = _keep_index(rows, t, g, p, u, is_cur, table.idle_allowed, _node_sizes(table.pools),
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


def compile_reduced(problem: Problem, keep: Keep | None = None) -> OptionTable:
    """``reduce_table(compile_problem(problem))`` in one pass, the table built once at its reduced size.

    The reductions run on the flat options (:func:`~elasticopt.models.flat.compile_flat`)
    before they are laid out as a table; the result is equal, array by
    array, to compiling and then reducing (tested).

    Parameters
    ----------
    problem
        The problem to compile.
    keep
        Optional restriction ``keep(rows) -> mask`` of the options (``compile_flat``'s).

    Returns
    -------
    OptionTable
        The reduced table (all three reductions).
    """
    flat = compile_flat(problem, keep)
    f = flat.rows
    sel = _keep_index(f.job, f.gpu_type, f.gpus, f.packed, flat.utility, flat.is_current,
                      flat.idle_allowed, _node_sizes(flat.pools), True, True)
    table = table_from_flat(flat, sel, clip=True,
                            stats=_stats({}, int(f.job.size), int(sel.size), flat.capacity, -1))
    table.stats["capacity_after"] = table.capacity  # type: ignore[index]  # (its own new dict: the clipped total)
    return table
