"""Node placement: the one placer (docs/design.md §2 "Placement").

Where the GPUs of every job sit, for the model (``Solution.placement``,
``verify``, the brute force), the autoscaler and simulator, the service and
the launcher's device pool alike.  A job on an unpacked option may use any
free GPUs of its type; a job on a packed option of k GPUs must sit on the
fewest nodes, m = ceil(k / g) (g the type's GPUs per node).  An allocation is
feasible iff, per type, its GPUs fit the type's free GPUs and its packed jobs
can be placed on the nodes: the unpacked jobs then fill what is left,
whatever their sizes.

:func:`pack` places one pool's jobs, from scratch or keeping running jobs
where they are (``current``):

1. with ``current``: a job whose k did not change keeps its GPUs (a packed
   one only if they are on its fewest nodes); an unpacked job that shrinks
   keeps part of them (on the nodes where it has most), one that grows keeps
   them all and adds GPUs, on its own nodes first;
2. the other packed jobs, largest first, by the greedy rule
   (:func:`~elasticopt.models.packing.take`: one node by best fit, else the
   emptiest nodes whole and the remainder on the fullest node that fits it);
   where that spreads a packed job over more than its fewest nodes, the exact
   search over counts of nodes per free size
   (:func:`~elasticopt.models.packing.search_counts`: polynomial in the nodes
   for a fixed g, bounded in steps and by a deadline);
3. the growing jobs' extra GPUs, then the other unpacked jobs, largest first,
   by the greedy rule (never fails when the total fits);
4. if keeping jobs in place leaves no placement of the packed jobs, the
   fewest running jobs are moved: each one alone, then pairs, smallest
   first (``Placement.released``), every other one kept; where none of those
   places, the pool is packed from scratch (jobs move; ``Placement.kept`` is
   False).  A move restarts a job on every host, so moving one job where
   packing from scratch moves most of them is what the hosts measure.

GPU indices: a job takes the lowest free indices of each of its nodes, in
the order above.

**When the totals imply placement** (:func:`placement_implied`): on a type
whose nodes are all wholly free and whose packed sizes form a divisibility
chain with g (every packed k <= g divides g and any two packed k <= g divide
one another; every packed k > g is a multiple of g), any packed jobs whose
GPUs fit the type's free GPUs also fit the nodes: a multiple of g takes whole
nodes, and the smaller sizes, largest first, fill the remaining nodes
perfectly (bin packing with divisible item sizes, Coffman, Garey and Johnson
1987).  A type without packed options needs nothing.  Elsewhere (fragmented
nodes, k = 3 on 4-GPU nodes, k = 12 on 8-GPU nodes) the totals may fit while
the nodes do not, and :func:`pack` decides.

The option table's placement (:func:`~elasticopt.models.table_placement.place_table`,
in ``models/table_placement.py``) runs step 2's greedy rule compiled
(:func:`elasticopt.models.kernels.place_types`, tested equal to :func:`pack`
from scratch) and :func:`pack` where it fails.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

import numpy as np

from elasticopt.models.packing import FreeNodes, assign_moves, search_counts
from elasticopt.models.problem import Pool

__all__ = ["placement_implied", "pack", "place", "Placement", "node_name", "DEFAULT_SEARCH_STEPS", "Stop"]

#: Steps of the exact placement search (candidate moves generated) before it answers "unknown".
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


Stop = Literal["", "steps", "time", "moves"]


@dataclass(frozen=True)
class Placement:
    """Result of :func:`pack` (and :func:`place`).

    Attributes
    ----------
    status
        ``"placed"`` (``nodes`` holds a placement), ``"impossible"`` (proven:
        no placement exists) or ``"unknown"`` (the search stopped first).
    nodes
        Per job of the request, ``{node index: GPU indices}``.
    moved
        Per job, whether its GPUs differ from its current ones (True without one).
    stop
        Why an ``"unknown"`` search stopped: ``"steps"`` (budget), ``"time"``
        (deadline) or ``"moves"`` (a node size too large to list every move).
    steps
        Steps the exact search took (0 where the greedy rule placed every job).
    kept
        False where keeping running jobs in place left no placement, so the
        pool was packed from scratch.
    not_kept
        Job position -> why its current GPUs could not be kept (they are not
        free GPUs of the pool, or another job holds them).
    released
        Positions of running jobs moved although their GPUs could be kept, so
        that the packed jobs place while every other running job stays (step 4).
    """

    status: Literal["placed", "impossible", "unknown"]
    nodes: tuple[dict[int, tuple[int, ...]], ...] = ()
    moved: tuple[bool, ...] = ()
    stop: Stop = ""
    steps: int = 0
    kept: bool = True
    not_kept: Mapping[int, str] = field(default_factory=dict)
    released: tuple[int, ...] = ()


@lru_cache(maxsize=64)
def _free_sets(pool: Pool) -> tuple[frozenset[int], ...]:
    """Per node of the pool, its free GPU indices."""
    return tuple(frozenset(ix) for ix in pool.free_gpus())


_NONE: frozenset[int] = frozenset()


def _why_not(cur: Mapping[int, Sequence[int]], base: Sequence[frozenset[int]],
             taken: Mapping[int, set[int]]) -> str:
    """Why a job cannot keep the GPUs ``cur``; "" if it can."""
    for n, ix in cur.items():
        if not 0 <= n < len(base):
            return f"node {n} does not exist (the pool has {len(base)} nodes)"
        if len(set(ix)) != len(ix):
            return f"node {n}: GPU indices {sorted(ix)} repeat"
        if not base[n].issuperset(ix):
            return f"node {n}: GPUs {sorted(set(ix) - base[n])} are not free GPUs of the pool"
        if not taken.get(n, _NONE).isdisjoint(ix):
            return f"node {n}: GPUs {sorted(taken[n] & set(ix))} are held by another job"
    return ""


def _pack(pool: Pool, jobs: Sequence[tuple[int, bool]], current, max_steps: int, deadline: float | None,
          counts) -> tuple[str, list, Stop, int, dict[int, str]]:
    """One attempt of :func:`pack`: (status, per job its nodes or None, stop, steps, not kept)."""
    base = _free_sets(pool)
    g = pool.gpus_per_node
    taken: dict[int, set[int]] = {}  # node -> GPU indices given to a job so far
    out: list[dict[int, tuple[int, ...]] | None] = [None] * len(jobs)
    packed_rest: list[int] = []
    loose_rest: list[int] = []
    grows: list[int] = []
    not_kept: dict[int, str] = {}

    def hold(j: int, nodes: Mapping[int, Sequence[int]]) -> None:
        for n, ix in nodes.items():
            held = taken.get(n)
            if held is None:
                taken[n] = set(ix)
            else:
                held.update(ix)
        out[j] = {n: tuple(ix) for n, ix in sorted(nodes.items()) if len(ix)}

    for j, (k, packed) in enumerate(jobs):
        cur = current[j] if current is not None else None
        if cur:
            why = _why_not(cur, base, taken)
            if why:
                not_kept[j] = why
            else:
                have = sum(len(ix) for ix in cur.values())
                if have == k and (not packed or sum(1 for ix in cur.values() if len(ix)) <= -(-k // g)):
                    hold(j, cur)
                    continue
                if not packed and have > k:  # a shrink keeps part of its GPUs, on the nodes where it has most
                    left, keep = k, {}
                    for n, ix in sorted(cur.items(), key=lambda e: (-len(e[1]), e[0])):
                        if left and len(ix):
                            keep[n] = tuple(ix[:left])
                            left -= len(keep[n])
                    hold(j, keep)
                    continue
                if not packed and have < k:  # a grow keeps its GPUs and adds some (step 3)
                    hold(j, cur)
                    grows.append(j)
                    continue
        if k:
            (packed_rest if packed else loose_rest).append(j)
        else:
            out[j] = {}
    size = [len(b) - len(taken[n]) if n in taken else len(b) for n, b in enumerate(base)]
    free = FreeNodes(size)  # size, indexed by free GPUs for the greedy takes (changed by free.sub only)
    # per node its free GPU indices, ascending, once the kept jobs hold theirs (only give() takes from here on)
    free_ix = [sorted(b - taken[n]) if n in taken else sorted(b) for n, b in enumerate(base)]

    def give(j: int, got: Mapping[int, int]) -> None:
        """Job j gets ``got[n]`` more GPUs of node n: the lowest free indices."""
        mine = dict(out[j] or {})
        for n, c in sorted(got.items()):
            if not c:
                continue
            left = free_ix[n]
            ix = left[:c]
            del left[:c]
            free.sub(n, c)
            have = mine.get(n)
            mine[n] = tuple(sorted(have + tuple(ix))) if have else tuple(ix)
        out[j] = dict(sorted(mine.items()))

    order = sorted(packed_rest, key=lambda j: (-jobs[j][0], j))
    stop: Stop = ""
    steps = 0
    if counts is not None and all(counts[j] is not None for j in order):
        plan = [dict(counts[j]) for j in order]
        trial = list(size)
        for d in plan:
            for n, c in d.items():
                trial[n] -= c
        if any(c < 0 for c in trial):
            return "impossible", out, "", 0, not_kept
    else:
        plan, trial_free = [], FreeNodes(list(size))
        for j in order:
            k = jobs[j][0]
            d = trial_free.take(k)
            if d is None or len(d) > -(-k // g):
                break
            for n, c in d.items():
                trial_free.sub(n, c)
            plan.append(d)
        if len(plan) < len(order):  # the greedy spread a packed job: the exact search decides
            status, moves, steps, stop = search_counts(size, g, [jobs[j][0] for j in order], max_steps, deadline)
            if status != "placed":
                return status, out, stop, steps, not_kept
            plan = assign_moves(size, moves)  # type: ignore[arg-type]
    for j, d in zip(order, plan):
        give(j, d)
    for j in grows:  # first on its own nodes, then where the greedy finds room
        need = jobs[j][0] - sum(len(ix) for ix in (out[j] or {}).values())
        extra: dict[int, int] = {}
        for n in sorted(out[j] or {}):
            c = min(size[n], need)
            if c:
                extra[n] = c
                need -= c
        give(j, extra)
        if need:
            d = free.take(need)
            if d is None:
                return "impossible", out, "", steps, not_kept
            give(j, d)
    for j in sorted(loose_rest, key=lambda j: (-jobs[j][0], j)):
        d = free.take(jobs[j][0])
        if d is None:
            return "impossible", out, "", steps, not_kept
        give(j, d)
    return "placed", out, stop, steps, not_kept


def pack(
    pool: Pool,
    jobs: Sequence[tuple[int, bool]],
    current: Sequence[Mapping[int, Sequence[int]] | None] | None = None,
    *,
    max_steps: int = DEFAULT_SEARCH_STEPS,
    deadline: float | None = None,
    time_limit_s: float | None = None,
    counts: Sequence[Mapping[int, int] | None] | None = None,
) -> Placement:
    """Place the jobs of one pool on its nodes (module docstring).

    Parameters
    ----------
    pool
        The nodes (free GPU indices per node).
    jobs
        Per job ``(k, packed)``: its GPUs and whether it must sit on its
        fewest nodes, ceil(k / g).  Earlier jobs keep their GPUs first.
    current
        Optional, per job, where it runs now, ``{node index: GPU indices}``
        (None or empty: nowhere); such jobs are kept in place where they can.
    max_steps
        Step budget of the exact search.
    deadline, time_limit_s
        Stop the exact search at this ``time.perf_counter()`` value, or after
        this many seconds (the earlier of the two); it then answers
        ``"unknown"`` with ``stop="time"``.
    counts
        Optional, per packed job, ``{node index: GPUs}`` decided elsewhere (a
        MILP's node variables): used as given, no search (from scratch only).

    Returns
    -------
    Placement
        ``nodes`` and ``moved`` per job, in the order given.
    """
    if time_limit_s is not None:
        end = time.perf_counter() + time_limit_s
        deadline = end if deadline is None else min(deadline, end)
    if sum(k for k, _ in jobs) > pool.gpus:
        return Placement("impossible")
    kept = True
    released: tuple[int, ...] = ()
    status, out, stop, steps, not_kept = _pack(pool, jobs, current, max_steps, deadline, None if current else counts)
    if status != "placed" and current is not None and any(current):  # keeping jobs in place blocks the packed ones
        for few in _releases(jobs, current):  # move as few running jobs as will let them place
            if deadline is not None and time.perf_counter() > deadline:
                break
            trial = [None if j in few else c for j, c in enumerate(current)]
            status, out, stop, more, _ = _pack(pool, jobs, trial, RELEASE_STEPS, deadline, None)
            steps += more
            if status == "placed":
                released = few
                break
    if status != "placed" and current is not None and any(current):
        kept = False
        status, out, stop, steps2, _ = _pack(pool, jobs, None, max_steps, deadline, counts)
        steps += steps2
    if status != "placed":
        return Placement(status, stop=stop, steps=steps, kept=kept, not_kept=not_kept)  # type: ignore[arg-type]
    moved = tuple(
        not (current is not None and current[j] and {n: tuple(sorted(ix)) for n, ix in current[j].items() if len(ix)}
             == {n: tuple(sorted(ix)) for n, ix in (d or {}).items()})
        for j, d in enumerate(out)
    )
    return Placement("placed", tuple(d or {} for d in out), moved, stop, steps, kept, not_kept, released)


#: Sets of running jobs tried for release (step 4), one job, then two, before the pool is packed from scratch.
MAX_RELEASES = 64
#: Exact-search steps of each release tried.
RELEASE_STEPS = 2_000


def _releases(jobs: Sequence[tuple[int, bool]], current) -> list[tuple[int, ...]]:
    """Running jobs to move so the others keep their nodes: each one alone, then pairs, smallest jobs
    first, at most :data:`MAX_RELEASES` sets."""
    held = sorted((j for j, c in enumerate(current) if c), key=lambda j: (jobs[j][0], j))
    out: list[tuple[int, ...]] = [(j,) for j in held]
    for a, i in enumerate(held):
        for b in held[a + 1:]:
            if len(out) >= MAX_RELEASES:
                return out[:MAX_RELEASES]
            out.append((i, b))
    return out[:MAX_RELEASES]


def place(
    pool: Pool,
    packed: list[int],
    unpacked: list[int],
    max_steps: int = DEFAULT_SEARCH_STEPS,
    counts: list[dict[int, int]] | None = None,
    deadline: float | None = None,
) -> Placement:
    """Place jobs on the nodes of one pool, from scratch: :func:`pack` of the packed jobs, then the unpacked.

    Parameters
    ----------
    pool
        The nodes (free GPU indices per node).
    packed
        Sizes k of the packed jobs (each on at most ceil(k / g) nodes).
    unpacked
        Sizes of the jobs that may use any free GPUs.
    max_steps
        Budget of the exact search.
    counts
        Per packed job ``{node: GPUs}`` already decided (e.g. by a MILP's node
        variables): used as given, no search.
    deadline
        ``time.perf_counter()`` value at which the exact search stops.

    Returns
    -------
    Placement
        Packed jobs first, then unpacked jobs, in the order given.
    """
    jobs = [(int(k), True) for k in packed] + [(int(k), False) for k in unpacked]
    given = None if counts is None else list(counts) + [None] * len(unpacked)
    return pack(pool, jobs, max_steps=max_steps, deadline=deadline, counts=given)
