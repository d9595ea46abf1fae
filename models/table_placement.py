"""The option table's placement: an allocation of table rows on the nodes (docs/design.md §2 "Placement").

:func:`place_table` places a choice of options (one per job row of an
:class:`~elasticopt.models.table.OptionTable`) with the one placer of
:mod:`elasticopt.models.placement`: per GPU type, its greedy rule compiled
(:func:`elasticopt.models.kernels.place_types`, tested equal to
:func:`~elasticopt.models.placement.pack` from scratch), and
:func:`~elasticopt.models.placement.place` where that fails.
:func:`types_needing_placement` names the types where the totals do not
imply placement (:func:`~elasticopt.models.placement.placement_implied`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np

from elasticopt.models.placement import DEFAULT_SEARCH_STEPS, Stop, node_name, place, placement_implied
from elasticopt.models.problem import Pool

__all__ = ["TablePlacement", "place_table", "place_choice", "types_needing_placement"]


@lru_cache(maxsize=64)
def _pool_arrays(pools: tuple[Pool, ...], types: tuple[str, ...]) -> tuple:
    """The pools as :func:`~elasticopt.models.kernels.place_types` reads them, with their node names
    (cached by value: a cluster's pools recur from one solve to the next)."""
    free_gpus = [pool.free_gpus() for pool in pools]
    sizes = [len(f) for f in free_gpus]
    free = np.fromiter((len(ix) for f in free_gpus for ix in f), dtype=np.int64, count=sum(sizes))
    start = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=start[1:])
    gpn = np.array([pool.gpus_per_node for pool in pools], dtype=np.int64)
    names = [[node_name(t, n) for n in range(size)] for t, size in zip(types, sizes)]
    for a in (free, start, gpn):
        a.setflags(write=False)
    return free_gpus, free, start, gpn, names


@dataclass(frozen=True)
class TablePlacement:
    """Result of :func:`place_table`.

    ``status``: as :class:`Placement`'s, the worst over the types;
    ``nodes[row]`` = ``{node name: GPU indices}`` for every job that runs, when
    placed; ``stop``: why an ``"unknown"`` search stopped; ``steps``: steps of
    the exact search over all types.
    """

    status: Literal["placed", "impossible", "unknown"]
    nodes: Mapping[int, Mapping[str, tuple[int, ...]]]
    stop: Stop = ""
    steps: int = 0


def place_table(table, choice: np.ndarray, max_steps: int = DEFAULT_SEARCH_STEPS, counts: dict | None = None,
                deadline: float | None = None) -> TablePlacement:
    """Place the allocation ``choice`` (option per job row of ``table``, -1 idle) on the nodes, from scratch.

    Per type as :func:`pack` does: its greedy rule compiled
    (:func:`elasticopt.models.kernels.place_types`), :func:`pack` where that
    fails (the exact search, at most ``max_steps`` steps, until ``deadline``).
    ``counts``: optional ``{row: {node: GPUs}}`` for packed jobs, decided
    elsewhere (a MILP's node variables), used as given.  A table without
    ``pools`` (built without its cluster's nodes) places nothing.
    """
    from elasticopt.models.kernels import place_types

    choice = np.asarray(choice, dtype=np.int64)
    if table.pools is None:  # a table built without its cluster's nodes: totals only, nothing to place
        return TablePlacement("placed", {})
    rows = np.flatnonzero(choice >= 0)
    cols = choice[rows]
    ks = table.gpus[rows, cols]
    pk = table.packed[rows, cols]
    types = table.gpu_type[rows, cols]
    out: dict[int, dict[str, tuple[int, ...]]] = {}
    status = "placed"
    done = np.zeros(len(table.types), dtype=bool)
    if counts is None:  # every type by the greedy rule, compiled
        free_gpus, free, start, gpn, names = _pool_arrays(table.pools, table.types)
        done, job, node, off, cnt = place_types(ks, pk, types, free, start, gpn)
        rows_l, types_l = rows.tolist(), types.tolist()
        for i, n, a, c in zip(job.tolist(), node.tolist(), off.tolist(), cnt.tolist()):
            r, t = rows_l[i], types_l[i]
            d = out.get(r)
            if d is None:
                d = out[r] = {}
            d[names[t][n]] = free_gpus[t][n][a : a + c]
        if done.all():
            return TablePlacement(status, out)
    fast, out = out, {}
    row_type = dict(zip(rows.tolist(), types.tolist()))
    stop: Stop = ""
    steps = 0
    for t, name in enumerate(table.types):  # where the greedy failed, or counts are given: pack()
        sel = types == t
        if done[t]:  # placed above: keep the type order
            out.update((r, d) for r, d in fast.items() if row_type[r] == t)
            continue
        if not sel.any():
            continue
        t_rows, t_ks, t_pk = rows[sel], ks[sel], pk[sel]
        pool = table.pools[t]
        p_rows, u_rows = t_rows[t_pk], t_rows[~t_pk]
        p_ks, u_ks = t_ks[t_pk].tolist(), t_ks[~t_pk].tolist()
        given = None
        if counts is not None and all(int(r) in counts for r in p_rows):
            given = [counts[int(r)] for r in p_rows]
        res = place(pool, p_ks, u_ks, max_steps, given, deadline)
        steps += res.steps
        if res.status != "placed":
            if res.status == "impossible" or status == "placed":
                status = res.status
                stop = res.stop
            continue
        for r, d in zip(p_rows.tolist() + u_rows.tolist(), res.nodes):
            out[r] = {node_name(name, n): ix for n, ix in d.items()}
    if status != "placed":
        return TablePlacement(status, {}, stop, steps)  # type: ignore[arg-type]
    return TablePlacement("placed", out, "", steps)


def place_choice(table, choice: np.ndarray, max_steps: int = DEFAULT_SEARCH_STEPS, counts: dict | None = None,
                 deadline: float | None = None) -> tuple[str, dict[int, dict[str, tuple[int, ...]]]]:
    """:func:`place_table` as ``(status, nodes)``."""
    res = place_table(table, choice, max_steps, counts, deadline)
    return res.status, res.nodes  # type: ignore[return-value]


def types_needing_placement(table) -> list[int]:
    """GPU types (indices) of ``table`` where the totals do not imply placement (:func:`placement_implied`)."""
    out = []
    if table.pools is None:
        return out
    for t, pool in enumerate(table.pools):
        sel = table.valid & table.packed & (table.gpu_type == t)
        if sel.any() and not placement_implied(pool, np.unique(table.gpus[sel])):
            out.append(t)
    return out
