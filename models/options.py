"""Every job's options on the cluster as arrays, fast (the compile step of docs/design.md §2).

The same options as :meth:`elasticopt.models.Job.typed_options` (the readable
reference that ``verify`` and the brute force use), built per (job, GPU type)
as arrays: a fitted profile is evaluated on its whole candidate grid at once
(``samples_per_s_array``), measured points are read as arrays, and jobs with
the same model and limits on the same pool share one block (a cache keyed by
them), so compiling n jobs costs a dictionary look-up per job and type.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import chain
from operator import attrgetter
from typing import Any

import numpy as np

from elasticopt.models.problem import Pool, Problem
from elasticopt.models.rules import NO_LIMIT, fits_array
from elasticopt.profiles.throughput import MeasuredThroughput

__all__ = ["option_blocks", "Block", "OptionIndex"]

#: One job's options on one type: (gpus, batch, packed, samples_per_s), sorted by (k, packed, b).
Block = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]

_JOB_FIELDS = attrgetter("throughput", "types", "gpus_min", "gpus_max", "batch_min", "batch_max", "max_local")

#: Per class of a job's ``throughput``: a mapping of GPU type -> model (or one model for every type).
_IS_MAPPING: dict[type, bool] = {dict: True}

_EMPTY: Block = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, bool), np.zeros(0))


def _allowed(k: np.ndarray, b: np.ndarray, lim: tuple[int, ...]) -> np.ndarray:
    return fits_array(k, b, *lim[:5])  # lim: (gmin, k_hi, bmin, bmax, mloc, cap)


def _sps(model: Any, k: np.ndarray, b: np.ndarray, nodes: np.ndarray | None = None) -> np.ndarray:
    # the model's own scalar answers, so the table holds exactly what Job.typed_options (and verify) compute:
    # a vectorised power (SIMD) can differ from the scalar one in the last bit
    if nodes is None:
        vals = [model.samples_per_s(int(x), int(y)) for x, y in zip(k.tolist(), b.tolist())]
    else:
        vals = [model.samples_per_s_on_nodes(int(x), int(y), int(n)) for x, y, n in
                zip(k.tolist(), b.tolist(), nodes.tolist())]
    return np.array([v if v is not None else np.nan for v in vals], dtype=np.float64)


def _ok(t: np.ndarray) -> np.ndarray:
    return np.isfinite(t) & (t > 0)


def _measured_block(model: Any, lim: tuple[int, ...]) -> Block:
    parts = []
    for pts, packed in ((model.points, False), (getattr(model, "packed", None) or {}, True)):
        if not pts:
            continue
        kb = np.array(list(pts), dtype=np.int64).reshape(-1, 2)
        t = np.fromiter(pts.values(), dtype=np.float64, count=len(pts))
        k, b = kb[:, 0], kb[:, 1]
        keep = _allowed(k, b, lim) & _ok(t)
        parts.append((k[keep], b[keep], np.full(int(keep.sum()), packed), t[keep]))
    return _sorted(parts)


def _sorted(parts: list) -> Block:
    if not parts:
        return _EMPTY
    k = np.concatenate([p[0] for p in parts])
    b = np.concatenate([p[1] for p in parts])
    p = np.concatenate([p[2] for p in parts])
    t = np.concatenate([p[3] for p in parts])
    order = np.lexsort((b, p, k))  # (k, packed, b): the order reduce_table groups options in
    return k[order], b[order], p[order], t[order]


def _model_block(model: Any, lim: tuple[int, ...], pool: Pool, aware: bool) -> Block:
    """Options of one model on one pool (see :meth:`Job.typed_options` for the rules)."""
    if type(model) is MeasuredThroughput:
        return _measured_block(model, lim)
    gmin, k_hi, bmin, bmax, mloc, cap = lim
    cands = model.candidates(k_hi, bmin, bmax)
    if not cands:
        return _EMPTY
    kb = np.array(sorted(set(cands)), dtype=np.int64).reshape(-1, 2)
    k, b = kb[:, 0], kb[:, 1]
    keep = _allowed(k, b, lim)
    k, b = k[keep], b[keep]
    t = _sps(model, k, b)
    good = _ok(t)
    k, b, t = k[good], b[good], t[good]
    parts = []
    aware = aware and hasattr(model, "samples_per_s_on_nodes") and pool.nodes > 1
    if aware:
        multi = k > 1
        parts.append((k[~multi], b[~multi], np.zeros(int((~multi).sum()), bool), t[~multi]))
        km, bm = k[multi], b[multi]
        spread = _sps(model, km, bm, np.minimum(km, pool.nodes))
        packed = _sps(model, km, bm, -(-km // pool.gpus_per_node))
        s_ok = _ok(spread)
        parts.append((km[s_ok], bm[s_ok], np.zeros(int(s_ok.sum()), bool), spread[s_ok]))
        p_ok = _ok(packed) & (~s_ok | (packed > np.where(s_ok, spread, -np.inf)))
        parts.append((km[p_ok], bm[p_ok], np.ones(int(p_ok.sum()), bool), packed[p_ok]))
    else:
        parts.append((k, b, np.zeros(k.size, bool), t))
    packed_pts = getattr(model, "packed", None)
    if packed_pts:
        kb = np.array(list(packed_pts), dtype=np.int64).reshape(-1, 2)
        tp = np.fromiter(packed_pts.values(), dtype=np.float64, count=len(packed_pts))
        sel = (kb[:, 0] <= cap) & _allowed(kb[:, 0], kb[:, 1], lim)
        parts.append((kb[sel, 0], kb[sel, 1], np.ones(int(sel.sum()), bool), tp[sel]))
    return _sorted(parts)


class _Arena:
    """Every cached block's options side by side, so that a compile gathers from one set of arrays.

    ``arrays()`` are (gpus, batch, packed, samples_per_s); a block added at
    offset ``off`` is entries ``off .. off + size``.  Appends fill spare room
    (doubled when full): adding a block costs its own size, not the arena's.
    """

    def __init__(self) -> None:
        self.size = 0
        self._k = np.zeros(1024, np.int64)
        self._b = np.zeros(1024, np.int64)
        self._p = np.zeros(1024, bool)
        self._s = np.zeros(1024, np.float64)

    def add(self, blk: Block) -> int:
        """Append ``blk``; its offset."""
        off, m = self.size, blk[0].size
        if off + m > self._k.size:
            cap = max(2 * self._k.size, off + m)
            self._k, self._b, self._p, self._s = (np.concatenate([a[:off], np.zeros(cap - off, a.dtype)])
                                                  for a in (self._k, self._b, self._p, self._s))
        for a, x in zip((self._k, self._b, self._p, self._s), blk):
            a[off:off + m] = x
        self.size = off + m
        return off

    def arrays(self) -> Block:
        """Views of the filled part (later appends do not change them)."""
        n = self.size
        return self._k[:n], self._b[:n], self._p[:n], self._s[:n]


#: Blocks of shared models (profiles), kept across compiles: per pool (free GPUs, GPUs per node, nodes,
#: node-aware), key -> (model, offset, size) in ``_ARENA``; the model is kept so that a key's id(model)
#: cannot be reused by another object while the entry lives.
_CACHE: dict[tuple, dict[tuple, tuple[Any, int, int]]] = {}
_CACHE_MAX = 1 << 16
_ARENA = _Arena()


@dataclass(frozen=True)
class OptionIndex:
    """Every (job, GPU type) pair with options, and where its options are.

    ``pair_job[i]``, ``pair_type[i]``: job row and type index of pair i (pairs
    in job order, then pool order); its options are entries ``pair_start[i] ..
    pair_start[i] + pair_size[i]`` of ``arrays`` (gpus, batch, packed,
    samples_per_s), sorted by (k, packed, b).
    """

    pair_job: np.ndarray
    pair_type: np.ndarray
    pair_start: np.ndarray
    pair_size: np.ndarray
    arrays: Block
    #: measured points of the jobs' own :class:`MeasuredThroughput` models, flat (unsorted):
    #: ``(job row, type index, k, b, packed, samples/s)`` arrays
    flat: tuple[np.ndarray, ...]


def _own_points(own: list[Mapping[tuple[int, int], float]],
                own_at: list[tuple[int, int, bool, int, int, int, int, int]]) -> tuple[np.ndarray, ...]:
    """The points of the jobs' own models that keep to their rules, flat: ``(job row, type index, k, b, packed,
    samples/s)`` arrays (``own[i]``: one model's points, ``own_at[i]``: its job, type, packed flag and limits
    ``(gmin, k_hi, bmin, bmax, mloc)``), read in C and checked at once (:func:`~elasticopt.models.rules.fits_array`,
    the array form of the rule the per-point loop it replaces applied)."""
    if not own:
        return _NO_POINTS
    sizes = np.fromiter(map(len, own), dtype=np.int64, count=len(own))
    total = int(sizes.sum())
    kb = np.fromiter(chain.from_iterable(chain.from_iterable(own)), dtype=np.int64, count=2 * total).reshape(-1, 2)
    sps = np.fromiter(chain.from_iterable(d.values() for d in own), dtype=np.float64, count=total)
    at = np.repeat(np.array(own_at, dtype=np.int64), sizes, axis=0)  # per point: its model's row of own_at
    k, b = kb[:, 0], kb[:, 1]
    keep = fits_array(k, b, at[:, 3], at[:, 4], at[:, 5], at[:, 6], at[:, 7])
    return at[keep, 0], at[keep, 1], k[keep], b[keep], at[keep, 2].astype(bool), sps[keep]


_NO_POINTS: tuple[np.ndarray, ...] = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64),
                                      np.zeros(0, np.int64), np.zeros(0, bool), np.zeros(0, np.float64))


def option_blocks(problem: Problem) -> OptionIndex:
    """The options of every job on every GPU type it may use, as shared blocks (module docstring)."""
    global _ARENA
    cluster = problem.cluster
    aware = bool(problem.node_aware)
    # per pool: index, type, the pool, its free GPUs, and its blocks (key -> (model, offset, size))
    pools = [(ti, t, pool, pool.gpus, _CACHE.setdefault((pool.gpus, pool.gpus_per_node, pool.nodes, aware), {}))
             for ti, (t, pool) in enumerate(cluster.pools.items())]  # type: ignore[union-attr]
    pj: list[int] = []
    pt: list[int] = []
    ps: list[int] = []
    pn: list[int] = []
    own: list[Mapping[tuple[int, int], float]] = []  # measured points of the jobs' own models, one dict each,
    own_at: list[tuple[int, int, bool, int, int, int, int, int]] = []  # and (job, type, packed, limits) of it
    big = NO_LIMIT
    for j, (tp, jtypes, gmin, gmax, bmin, bmax, mloc) in enumerate(map(_JOB_FIELDS, problem.jobs)):
        per_type = _IS_MAPPING.get(type(tp))
        if per_type is None:
            per_type = _IS_MAPPING[type(tp)] = isinstance(tp, Mapping)
        if gmax is None:
            gmax = big
        for ti, t, pool, cap, cache in pools:
            if jtypes is not None and t not in jtypes:
                continue
            model = tp.get(t) if per_type else tp
            if model is None:
                continue
            khi = gmax if gmax < cap else cap
            if type(model) is MeasuredThroughput:  # a job's own points: nothing to share, read flat (below)
                for pts, packed in ((model.points, False), (model.packed, True)):
                    if pts:
                        own.append(pts)
                        own_at.append((j, ti, packed, gmin, khi, bmin, bmax, mloc))
                continue
            key = (id(model), gmin, khi, bmin, bmax, mloc)  # flat: cheap to hash
            hit = cache.get(key)
            if hit is None or hit[0] is not model:
                blk = _model_block(model, (gmin, khi, bmin, bmax, mloc, cap), pool, aware)
                hit = cache[key] = (model, _ARENA.add(blk), blk[0].size)
            if hit[2]:
                pj.append(j)
                pt.append(ti)
                ps.append(hit[1])
                pn.append(hit[2])
    out = OptionIndex(np.asarray(pj, dtype=np.int64), np.asarray(pt, dtype=np.int64),
                      np.asarray(ps, dtype=np.int64), np.asarray(pn, dtype=np.int64), _ARENA.arrays(),
                      _own_points(own, own_at))
    if sum(map(len, _CACHE.values())) >= _CACHE_MAX:  # only after this call's offsets are taken (they point into
        _CACHE.clear()  # this arena)
        _ARENA = _Arena()
    return out
