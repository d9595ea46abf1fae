"""The best allocation that places, when the optimum over per-type GPU totals does not (docs/design.md §2-3).

The DPs are exact over per-type totals; where their optimum cannot be placed
on the nodes, this branch and bound looks for the best allocation that can,
before the answer falls back to a backend with node variables:

- jobs in order of their largest option (big packed jobs decide placement
  first), each job's options by utility, best first (idle last);
- the bound of a partial allocation is its utility plus the best utility the
  remaining jobs reach within the remaining GPUs of all types together (a DP
  over total GPUs, ``suffix[j, c]``: a relaxation of both the per-type totals
  and placement), so a branch is cut as soon as it cannot beat the incumbent;
- a branch is also cut when a type's GPUs are exceeded or when the packed
  jobs chosen so far on a type where placement matters cannot be placed
  (:func:`~elasticopt.models.placement.place`, memoised per multiset of sizes).

Finishing the search proves the incumbent optimal (placement included); it
stops after ``max_steps`` options tried or at the deadline, and then reports
the incumbent it has, if any (feasible and placed: a good start for a
re-solve).  Only tables whose DP over total GPUs is small (``n x K x G`` at
most :data:`MAX_SUFFIX_CELLS`) are searched.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from elasticopt.models.placement import place
from elasticopt.models.table_placement import types_needing_placement
from elasticopt.models.table import OptionTable

__all__ = ["PlacedSearch", "best_placed", "MAX_SUFFIX_CELLS", "DEFAULT_STEPS"]

#: Largest jobs x options x GPUs of the suffix DP the search builds.
MAX_SUFFIX_CELLS = 20_000_000
#: Options tried before the search stops.
DEFAULT_STEPS = 100_000

_NEG = np.iinfo(np.int64).min // 4


@dataclass(frozen=True)
class PlacedSearch:
    """Result of :func:`best_placed`.

    ``proven``: the search finished, so ``choice`` (None: nothing places) is
    optimal over allocations that place; ``choice``/``value``: the best
    placed allocation found; ``stop``: ``"steps"``, ``"time"`` or
    ``"size"`` (not searched) when not proven; ``counts``: ``{row: {node:
    GPUs}}`` of the packed jobs where the search placed them itself (the
    node-count DP of :mod:`~elasticopt.solvers.placed_dp`), else None.
    """

    proven: bool
    choice: np.ndarray | None
    value: int | None
    steps: int
    stop: str = ""
    counts: dict | None = None


def _suffix(util: list[list[tuple[int, int]]], idle: list[bool], cap: int) -> np.ndarray:
    """suffix[j, c]: best utility of jobs j.. within c GPUs of any type (NEG: none fits)."""
    n = len(util)
    out = np.full((n + 1, cap + 1), _NEG, dtype=np.int64)
    out[n] = 0
    for j in range(n - 1, -1, -1):
        nxt = out[j + 1]
        row = nxt.copy() if idle[j] else np.full(cap + 1, _NEG, dtype=np.int64)
        for k, u in util[j]:
            if k <= cap:
                cand = np.full(cap + 1, _NEG, dtype=np.int64)
                ok = nxt[: cap + 1 - k] > _NEG
                cand[k:][ok] = nxt[: cap + 1 - k][ok] + u
                np.maximum(row, cand, out=row)
        out[j] = np.maximum.accumulate(row)  # c GPUs reach at least what fewer reach
    return out


def best_placed(table: OptionTable, *, deadline: float | None = None, max_steps: int = DEFAULT_STEPS) -> PlacedSearch:
    """The best allocation of ``table`` that can be placed on its nodes (module docstring)."""
    n = table.n_jobs
    caps = [int(c) for c in table.capacities]
    total = sum(caps)
    valid = table.valid
    if n * max(table.width, 1) * (total + 1) > MAX_SUFFIX_CELLS or table.pools is None:
        return PlacedSearch(False, None, None, 0, "size")
    matter = set(types_needing_placement(table))
    opts: list[list[tuple[int, int, int, int, bool]]] = []  # per job: (utility, k, type, option index, packed)
    for j in range(n):
        cols = np.flatnonzero(valid[j])
        row = [(int(table.utility[j, o]), int(table.gpus[j, o]), int(table.gpu_type[j, o]), int(o),
                bool(table.packed[j, o])) for o in cols.tolist()]
        row.sort(key=lambda x: (-x[0], x[1]))
        opts.append(row)
    order = sorted(range(n), key=lambda j: (-max((x[1] for x in opts[j]), default=0), j))
    idle = [bool(table.idle_allowed[j]) for j in order]
    util = [[(x[1], x[0]) for x in opts[j]] for j in order]
    suffix = _suffix(util, idle, total)
    if suffix[0, total] <= _NEG:
        return PlacedSearch(True, None, None, 0)
    if n == 0:
        return PlacedSearch(True, np.zeros(0, dtype=np.int64), 0, 0)
    placeable: dict[tuple[int, tuple[int, ...]], bool] = {}

    def places(t: int, sizes: list[int]) -> bool:
        key = (t, tuple(sorted(sizes, reverse=True)))
        got = placeable.get(key)
        if got is None:
            got = placeable[key] = place(table.pools[t], list(key[1]), [], deadline=deadline).status == "placed"
        return got

    best_val: int | None = None
    best: list[int] | None = None
    steps = 0
    used = [0] * len(caps)
    packed_on: list[list[int]] = [[] for _ in caps]
    pick = [-1] * n
    pos = [0] * (n + 1)
    value = [0] * (n + 1)
    depth = 0
    while True:
        if depth == n:
            if best_val is None or value[n] > best_val:
                best_val, best = value[n], [opts[r][pick[r]][3] if pick[r] >= 0 else -1 for r in range(n)]
            depth -= 1
            _undo(depth, order, pick, opts, used, packed_on)
            continue
        j = order[depth]
        row = opts[j]
        advanced = False
        while pos[depth] <= len(row):
            i = pos[depth]
            pos[depth] += 1
            steps += 1
            if steps > max_steps or (deadline is not None and not steps & 255 and time.perf_counter() > deadline):
                stop = "steps" if steps > max_steps else "time"
                return PlacedSearch(False, _choice(best), best_val, steps, stop)
            left = total - sum(used)
            if i == len(row):  # idle
                if not idle[depth] or (best_val is not None and value[depth] + int(suffix[depth + 1, left]) <= best_val):
                    continue
                pick[j] = -1
                value[depth + 1] = value[depth]
            else:
                u, k, t, o, pk = row[i]
                if used[t] + k > caps[t]:
                    continue
                rest = int(suffix[depth + 1, left - k])
                if rest <= _NEG or (best_val is not None and value[depth] + u + rest <= best_val):
                    continue
                if pk and t in matter:
                    packed_on[t].append(k)
                    if not places(t, packed_on[t]):
                        packed_on[t].pop()
                        continue
                    packed_on[t].pop()
                used[t] += k
                if pk and t in matter:
                    packed_on[t].append(k)
                pick[j] = i
                value[depth + 1] = value[depth] + u
            depth += 1
            pos[depth] = 0
            advanced = True
            break
        if advanced:
            continue
        if depth == 0:
            return PlacedSearch(True, _choice(best), best_val, steps)
        depth -= 1
        _undo(depth, order, pick, opts, used, packed_on)


def _undo(depth: int, order: list[int], pick: list[int], opts, used: list[int], packed_on: list[list[int]]) -> None:
    """Take back the option job ``order[depth]`` holds."""
    j = order[depth]
    i = pick[j]
    if i >= 0:
        _, k, t, _, pk = opts[j][i]
        used[t] -= k
        if pk and packed_on[t] and packed_on[t][-1] == k:
            packed_on[t].pop()
    pick[j] = -1


def _choice(best: list[int] | None) -> np.ndarray | None:
    """Per job row its option index (-1 idle), as an array."""
    return None if best is None else np.asarray(best, dtype=np.int64)
