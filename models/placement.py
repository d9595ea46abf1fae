"""Node placement: where the GPUs of every job of an allocation sit (docs/design.md §2).

A job on an unpacked option may use any free GPUs of its type; a job on a
packed option of k GPUs must sit on the fewest nodes, m = ceil(k / g) (g the
type's GPUs per node).  An allocation is feasible iff, per type, its GPUs fit
the type's free GPUs and its packed jobs can be placed on the nodes: the
unpacked jobs then fill what is left, whatever their sizes.

**When the totals imply placement** (:func:`placement_implied`): on a type
whose nodes are all wholly free and whose packed sizes form a divisibility
chain with g (every packed k <= g divides g and any two packed k <= g divide
one another; every packed k > g is a multiple of g), any packed jobs whose
GPUs fit the type's free GPUs also fit the nodes: a multiple of g takes whole
nodes, and the smaller sizes, largest first, fill the remaining nodes
perfectly (bin packing with divisible item sizes, Coffman, Garey and Johnson
1987).  A type without packed options needs nothing.  Elsewhere (fragmented
nodes, k = 3 on 4-GPU nodes, k = 12 on 8-GPU nodes) the totals may fit while
the nodes do not: :func:`place` decides by a best-fit heuristic and, if that
fails, an exhaustive search with a step budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np

from elasticopt.models.problem import Pool

__all__ = ["placement_implied", "place", "Placement", "node_name", "DEFAULT_SEARCH_STEPS"]

#: Steps of the exhaustive placement search before it answers "unknown".
DEFAULT_SEARCH_STEPS = 200_000


@lru_cache(maxsize=1 << 14)
def node_name(gpu_type: str, node: int) -> str:
    """Name of node ``node`` of the pool of ``gpu_type``, e.g. ``"a100/1"``."""
    return f"{gpu_type}/{node}"


def _chain(sizes: list[int], g: int) -> bool:
    small = sorted({k for k in sizes if k <= g})
    if any(g % k for k in small):
        return False
    if any(b % a for a, b in zip(small, small[1:])):
        return False
    return all(k % g == 0 for k in sizes if k > g)


def placement_implied(pool: Pool, packed_sizes: list[int] | np.ndarray) -> bool:
    """Whether packed jobs of these sizes always fit ``pool``'s nodes when their total fits its free GPUs.

    True iff there are no packed sizes, or every node is wholly free and the
    sizes form a divisibility chain with g (module docstring).
    """
    sizes = [int(k) for k in np.asarray(packed_sizes).ravel()]
    if not sizes:
        return True
    g = pool.gpus_per_node
    if any(c != g for c in pool.free_per_node()):
        return False
    return _chain(sizes, g)


@dataclass(frozen=True)
class Placement:
    """Result of :func:`place`.

    ``status``: ``"placed"`` (``nodes`` holds a placement), ``"impossible"``
    (proven: no placement exists) or ``"unknown"`` (the search budget ran out).
    ``nodes[i]``: per job i of the request, ``{node index: GPU indices}``.
    """

    status: Literal["placed", "impossible", "unknown"]
    nodes: tuple[dict[int, tuple[int, ...]], ...] = ()


@lru_cache(maxsize=256)
def _walk(sizes: tuple[int, ...]) -> tuple[int, ...]:
    """Node indices in the order unpacked jobs fill them: fullest first, ties by index (the sort is stable)."""
    return tuple(sorted(range(len(sizes)), key=sizes.__getitem__, reverse=True))


def _counts_to_indices(pool: Pool, counts: list[dict[int, int]]) -> tuple[dict[int, tuple[int, ...]], ...]:
    free = [list(ix) for ix in pool.free_gpus()]
    out = []
    for c in counts:
        d = {}
        for node, cnt in sorted(c.items()):
            if cnt:
                d[node] = tuple(free[node][:cnt])
                del free[node][:cnt]
        out.append(d)
    return tuple(out)


def _heuristic(free: list[int], packed: list[tuple[int, int]], g: int) -> list[dict[int, int]] | None:
    """Best fit, largest packed job first; a job over several nodes takes the fullest nodes first."""
    free = list(free)
    res: dict[int, dict[int, int]] = {}
    for i, k in packed:
        m = -(-k // g)
        if m == 1:
            fit = [n for n, c in enumerate(free) if c >= k]
            if not fit:
                return None
            n = min(fit, key=lambda x: (free[x], x))
            free[n] -= k
            res[i] = {n: k}
        else:
            nodes = sorted(range(len(free)), key=lambda x: (-free[x], x))[:m]
            if sum(free[n] for n in nodes) < k:
                return None
            left, d = k, {}
            for n in nodes:
                take = min(free[n], left)
                if take:
                    d[n] = take
                    free[n] -= take
                    left -= take
            res[i] = d
    return [res[i] for i, _ in packed]


def _splits(k: int, m: int, free: tuple[int, ...], start: int = 0):
    """Ways to take k GPUs from at most m nodes (node index >= start), as {node: count}."""
    if k == 0:
        yield {}
        return
    if m == 0:
        return
    for n in range(start, len(free)):
        top = min(free[n], k)
        for take in range(top, 0, -1):
            for rest in _splits(k - take, m - 1, free, n + 1):
                d = {n: take}
                d.update(rest)
                yield d


def _search(free: tuple[int, ...], packed: list[tuple[int, int]], g: int, budget: list[int]) -> list[dict[int, int]] | None | str:
    failed: set = set()

    def rec(idx: int, fr: tuple[int, ...]) -> list[dict[int, int]] | None | str:
        if idx == len(packed):
            return []
        key = (idx, fr)
        if key in failed:
            return None
        budget[0] -= 1
        if budget[0] < 0:
            return "unknown"
        _, k = packed[idx]
        m = -(-k // g)
        seen_vals: set = set()
        for d in _splits(k, m, fr):
            sig = tuple(sorted((fr[n], c) for n, c in d.items()))  # nodes with equal free are interchangeable
            if sig in seen_vals:
                continue
            seen_vals.add(sig)
            nf = list(fr)
            for n, c in d.items():
                nf[n] -= c
            sub = rec(idx + 1, tuple(nf))
            if sub == "unknown":
                return sub
            if sub is not None:
                return [d] + sub  # type: ignore[operator]
        failed.add(key)
        return None

    return rec(0, free)


def place(
    pool: Pool,
    packed: list[int],
    unpacked: list[int],
    max_steps: int = DEFAULT_SEARCH_STEPS,
    counts: list[dict[int, int]] | None = None,
) -> Placement:
    """Place jobs on the nodes of one pool.

    Parameters
    ----------
    pool
        The nodes (free GPU indices per node).
    packed
        Sizes k of the packed jobs (each on at most ceil(k / g) nodes).
    unpacked
        Sizes of the jobs that may use any free GPUs.
    max_steps
        Budget of the exhaustive search.
    counts
        Per packed job ``{node: GPUs}`` already decided (e.g. by a MILP's node
        variables): used as given, no search.

    Returns
    -------
    Placement
        Packed jobs first, then unpacked jobs, in the order given.
    """
    g = pool.gpus_per_node
    free_gpus = pool.free_gpus()
    free = [len(ix) for ix in free_gpus]
    if sum(packed) + sum(unpacked) > sum(free):
        return Placement("impossible")
    order = sorted(range(len(packed)), key=lambda i: (-packed[i], i))
    req = [(i, packed[i]) for i in order]
    if counts is not None:
        counts = [counts[i] for i in order]
    else:
        counts = _heuristic(free, req, g) if req else []
    if counts is None:
        found = _search(tuple(free), req, g, [max_steps])
        if found == "unknown":
            return Placement("unknown")
        if found is None:
            return Placement("impossible")
        counts = found  # type: ignore[assignment]
    by_job: list[dict[int, int]] = [{} for _ in packed]
    for (i, _), d in zip(req, counts):  # type: ignore[arg-type]
        by_job[i] = d
    if packed:
        placed = list(_counts_to_indices(pool, by_job))
        free_ix = list(free_gpus)
        for d in placed:
            for n, ix in d.items():
                free_ix[n] = free_ix[n][len(ix):]  # packed jobs took the first free indices of their nodes
        walk = _walk(tuple(len(ix) for ix in free_ix))
    else:
        placed, free_ix, walk = [], free_gpus, _walk(tuple(free))
    pos, off = 0, 0
    for k in unpacked:
        d: dict[int, tuple[int, ...]] = {}
        need = k
        while need:
            n = walk[pos]
            ix = free_ix[n]
            take = min(len(ix) - off, need)
            if take > 0:
                d[n] = ix[off : off + take]
                off += take
                need -= take
            if off >= len(ix):
                pos, off = pos + 1, 0
        placed.append(d)
    return Placement("placed", tuple(placed))


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


def place_choice(
    table, choice: np.ndarray, max_steps: int = DEFAULT_SEARCH_STEPS, counts: dict | None = None
) -> tuple[str, dict[int, dict[str, tuple[int, ...]]]]:
    """Place the allocation ``choice`` (option per job row of ``table``, -1 idle) on the nodes.

    Per type as :func:`place` does: its heuristic compiled
    (:func:`elasticopt.models.kernels.place_pool`), the exhaustive search of
    at most ``max_steps`` steps where that fails.  ``counts``: optional
    ``{row: {node: GPUs}}`` for packed jobs, decided elsewhere (a MILP's node
    variables), used as given.

    Returns
    -------
    (status, nodes)
        ``status`` as :class:`Placement`'s (the worst over the types); a table
        without ``pools`` (built without its cluster's nodes) places nothing.
        ``nodes[row]`` = ``{node name: GPU indices}`` for every job that runs,
        when placed.
    """
    from elasticopt.models.kernels import place_types

    choice = np.asarray(choice, dtype=np.int64)
    if table.pools is None:  # a table built without its cluster's nodes: totals only, nothing to place
        return "placed", {}
    rows = np.flatnonzero(choice >= 0)
    cols = choice[rows]
    ks = table.gpus[rows, cols]
    pk = table.packed[rows, cols]
    types = table.gpu_type[rows, cols]
    out: dict[int, dict[str, tuple[int, ...]]] = {}
    status = "placed"
    done = np.zeros(len(table.types), dtype=bool)
    if counts is None:  # every type by the heuristic, compiled
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
            return status, out
    fast, out = out, {}
    row_type = dict(zip(rows.tolist(), types.tolist()))
    for t, name in enumerate(table.types):  # where the heuristic failed, or counts are given: place()
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
        res = place(pool, p_ks, u_ks, max_steps, given)
        if res.status != "placed":
            if res.status == "impossible" or status == "placed":
                status = res.status
            continue
        for r, d in zip(p_rows.tolist() + u_rows.tolist(), res.nodes):
            out[r] = {node_name(name, n): ix for n, ix in d.items()}
    return status, (out if status == "placed" else {})


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
