"""The best allocation that places, exactly, on one pool of equal nodes (docs/design.md §2-3).

Where the DP's optimum over GPU totals cannot be placed on the nodes, this
dynamic program finds the best allocation that can, and proves it, for a
table of **one GPU type** (the shape of the Pollux and Blox hosts' requests:
one pool of g-GPU nodes):

- **State**: the count of nodes per free size, ``cnt[c]`` = nodes with c
  free GPUs (c = 0..g), and ``r``, the GPUs promised to jobs that may use any
  free GPUs.  Nodes with the same free size are interchangeable, so this is
  every placement up to a renaming of nodes: the same state space as the
  placer's exact search (:func:`~elasticopt.models.packing.search_counts`).
- **Transitions** (jobs one at a time, every valid option and idle where
  allowed): a packed option of k >= 2 GPUs applies one of its moves
  (:func:`~elasticopt.models.packing.moves_for`: every way, up to
  interchangeable nodes, to take k GPUs from ceil(k / g) nodes); an unpacked
  option, or a packed one of 1 GPU (one node either way), adds k to ``r``.
  A state is kept only while ``r`` fits the free GPUs ``sum c cnt[c]``: the
  jobs on unpacked options then fill what the packed ones leave, whatever
  their sizes (the one placer's step 3 never fails when the total fits).
  Hence a state reached with value v is exactly an allocation of the jobs
  so far that places, of utility v, and the best final state is the optimum
  over allocations that place.
- **Bound**: a state at job j with value v is dropped when v plus the best
  utility the remaining jobs reach within the state's unclaimed GPUs (a DP
  over total GPUs, the placed search's ``suffix``: a relaxation) is at most
  the incumbent's utility (an allocation that places, found before).  What
  is dropped cannot beat the incumbent, so the result is the incumbent
  where nothing survives, and the optimum either way.
- **Dominance**: of the states with the same node counts, one is dropped
  when another promises no more GPUs (r) and has at least its value:
  whatever completes it completes the other at the same utility.

It refuses (``None``) a table of several GPU types, nodes larger than the
moves can list (:data:`~elasticopt.models.packing.MAX_MOVES`), or a search
past ``max_states`` kept states or the deadline; the caller then keeps its
branch and bound / fallback.  Memory: the kept states of every job (for the
backtrack), at most ``max_states``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from elasticopt.models.packing import assign_moves, moves_for
from elasticopt.models.table import OptionTable
from elasticopt.solvers.placed_search import PlacedSearch, _suffix, best_placed

__all__ = ["PlacedDP", "placed_dp", "best_placed_exact", "DEFAULT_MAX_STATES", "BEAM"]

#: Kept states (all jobs together) before the DP gives up.
DEFAULT_MAX_STATES = 200_000
#: States kept per job by the heuristic pass that finds the incumbent.
BEAM = 64


@dataclass(frozen=True)
class PlacedDP:
    """Result of :func:`placed_dp`: the optimum over allocations that place.

    ``choice``: per job row its option (-1 idle), or None where nothing
    places or nothing beats the incumbent (then the incumbent is optimal);
    ``value``: its utility; ``counts``: ``{row: {node: GPUs}}`` of the jobs on
    packed options (a placement of ``choice``, as ``place_table`` takes it);
    ``states``: states kept over all jobs.
    """

    choice: np.ndarray | None
    value: int | None
    counts: dict[int, dict[int, int]]
    states: int


def placed_dp(table: OptionTable, *, incumbent: int | None = None, deadline: float | None = None,
              max_states: int = DEFAULT_MAX_STATES, beam: int | None = None) -> PlacedDP | None:
    """The best allocation of ``table`` that places on its one pool's nodes (module docstring).

    Parameters
    ----------
    table
        Option table of one GPU type, built with its cluster's nodes (``table.pools``).
    incumbent
        Utility of an allocation known to place: only better ones are searched for (None: none known).
    deadline
        ``time.perf_counter()`` value past which it gives up (None: no clock).
    max_states
        Kept states past which it gives up.

    Returns
    -------
    PlacedDP or None
        None where it does not apply or gave up (nothing is proven then).
    """
    if table.pools is None or len(table.types) != 1:
        return None
    pool = table.pools[0]
    g = pool.gpus_per_node
    free = pool.free_per_node()
    n = table.n_jobs
    valid = table.valid
    # per job: options as (utility, k, packed move list or None, option column); packed k = 1 is unpacked
    opts: list[list[tuple[int, int, tuple | None, int]]] = []
    for j in range(n):
        row = []
        for o in np.flatnonzero(valid[j]).tolist():
            k, u = int(table.gpus[j, o]), int(table.utility[j, o])
            moves = None
            if bool(table.packed[j, o]) and k >= 2:
                listed, complete = moves_for(k, g)
                if not complete:
                    return None
                moves = _compiled(listed, g)
            row.append((u, k, moves, o))
        row.sort(key=lambda x: (-x[0], x[1]))
        opts.append(row)
    order = sorted(range(n), key=lambda j: (-max((x[1] for x in opts[j]), default=0), j))
    idle = [bool(table.idle_allowed[j]) for j in order]
    suffix = _suffix([[(x[1], x[0]) for x in opts[j]] for j in order], idle, sum(free))
    cnt0 = [0] * (g + 1)
    for c in free:
        cnt0[c] += 1
    start = (tuple(cnt0), 0)
    weights = tuple(range(g + 1))
    lower = incumbent
    layers: list[dict] = []  # per depth: state -> (value, previous state, option index in opts[j] or -1)
    frontier: dict[tuple, int] = {start: 0}
    kept = 0
    for depth, j in enumerate(order):
        if deadline is not None and time.perf_counter() > deadline:
            return None
        nxt: dict[tuple, tuple[int, tuple, int]] = {}
        rest = suffix[depth + 1]

        def offer(state: tuple, value: int, prev: tuple, i: int, left: int) -> None:
            bound = int(rest[left])
            if bound <= _NEG or (lower is not None and value + bound <= lower):
                return
            got = nxt.get(state)
            if got is None or value > got[0]:
                nxt[state] = (value, prev, i)

        for seen, (state, value) in enumerate(frontier.items()):
            if deadline is not None and not seen & 255 and time.perf_counter() > deadline:
                return None
            cnt, r = state
            total = sum(a * b for a, b in zip(cnt, weights))
            if idle[depth]:
                offer(state, value, state, -1, total - r)
            for i, (u, k, moves, _o) in enumerate(opts[j]):
                if moves is None:
                    if r + k <= total:
                        offer((cnt, r + k), value + u, state, i, total - r - k)
                    continue
                for need, delta in moves:
                    if any(cnt[c] < m for c, m in need):
                        continue
                    new = tuple(a + b for a, b in zip(cnt, delta))
                    if r <= total - k:
                        offer((new, r), value + u, state, i, total - r - k)
        nxt = _undominated(nxt)
        if beam is not None and len(nxt) > beam:  # a heuristic: the states of highest value plus bound
            top = sorted(nxt, key=lambda s: -(nxt[s][0] + int(rest[_free(s, weights)])))[:beam]
            nxt = {s: nxt[s] for s in top}
        kept += len(nxt)
        if kept > max_states:
            return None
        layers.append(nxt)
        frontier = {s: v[0] for s, v in nxt.items()}
        if not frontier:
            return PlacedDP(None, None, {}, kept)
    best = max(frontier, key=frontier.__getitem__)
    value = frontier[best]
    choice = np.full(n, -1, dtype=np.int64)
    picked: list[tuple[int, tuple, tuple]] = []  # (job, state before, state after) of packed moves, in job order
    state = best
    for depth in range(n - 1, -1, -1):
        _v, prev, i = layers[depth][state]
        j = order[depth]
        if i >= 0:
            choice[j] = opts[j][i][3]
            if opts[j][i][2] is not None:
                picked.append((j, prev, state))
        state = prev
    picked.reverse()
    return PlacedDP(choice, value, _counts(table, choice, picked, free, g), kept)


_NEG = np.iinfo(np.int64).min // 4


def best_placed_exact(table: OptionTable, *, deadline: float | None = None) -> PlacedSearch:
    """The best allocation that places: this DP where it applies, else the placed branch and bound.

    A pass keeping :data:`BEAM` states per job (value plus bound highest) finds an incumbent that
    places; the exact DP, given it, proves it optimal or finds the optimum.  Where the DP does not apply
    or gives up, :func:`~elasticopt.solvers.placed_search.best_placed` searches, and the better of its
    incumbent and the beam's is reported (not proven).
    """
    heur = placed_dp(table, beam=BEAM, deadline=deadline)
    if heur is not None:
        exact = placed_dp(table, incumbent=heur.value, deadline=deadline)
        if exact is not None:
            win = exact if exact.choice is not None else heur
            return PlacedSearch(True, win.choice, win.value, heur.states + exact.states, counts=win.counts)
    found = best_placed(table, deadline=deadline)
    if heur is not None and heur.choice is not None and (found.value is None or heur.value > found.value):
        found = replace(found, choice=heur.choice, value=heur.value, counts=heur.counts)
    return found


def _undominated(states: dict) -> dict:
    """Drop a state when another with the same node counts promises no more GPUs (r) and has at least
    its value: whatever completes the dropped one completes that one, at the same utility."""
    by_cnt: dict[tuple, list] = {}
    for (cnt, r), entry in states.items():
        by_cnt.setdefault(cnt, []).append((r, -entry[0]))
    out = {}
    for cnt, rs in by_cnt.items():
        if len(rs) == 1:
            key = (cnt, rs[0][0])
            out[key] = states[key]
            continue
        rs.sort()
        best = None
        for r, negv in rs:
            if best is None or -negv > best:
                best = -negv
                out[(cnt, r)] = states[(cnt, r)]
    return out


def _free(state: tuple, weights: tuple[int, ...]) -> int:
    """GPUs of a state not yet claimed: free GPUs of its nodes less those promised to unpacked jobs."""
    cnt, r = state
    return sum(a * b for a, b in zip(cnt, weights)) - r


def _compiled(listed, g: int) -> tuple:
    """Moves as (needed nodes per free size, change of ``cnt``), for the DP's transitions."""
    out = []
    for mv in listed:
        need: dict[int, int] = {}
        delta = [0] * (g + 1)
        for c, after in mv:
            need[c] = need.get(c, 0) + 1
            delta[c] -= 1
            delta[after] += 1
        out.append((tuple(need.items()), tuple(delta)))
    return tuple(out)


def _counts(table: OptionTable, choice: np.ndarray, picked: list, free: tuple[int, ...],
            g: int) -> dict[int, dict[int, int]]:
    """``{row: {node: GPUs}}`` for every job on a packed option: the DP's moves on real nodes, then the
    packed 1-GPU jobs on any node with a free GPU."""
    moves = []
    for _j, before, after in picked:
        (cb, _), (ca, _) = before, after
        moves.append(_move_between(cb, ca, int(table.gpus[_j, choice[_j]]), g))
    out = {j: d for (j, _b, _a), d in zip(picked, assign_moves(free, moves))}
    left = list(free)
    for d in out.values():
        for node, c in d.items():
            left[node] -= c
    for j in np.flatnonzero(choice >= 0).tolist():
        o = int(choice[j])
        if bool(table.packed[j, o]) and int(table.gpus[j, o]) == 1:
            node = next(x for x, c in enumerate(left) if c > 0)  # the DP kept r within the free GPUs
            left[node] -= 1
            out[j] = {node: 1}
    return out


def _move_between(before: tuple[int, ...], after: tuple[int, ...], k: int, g: int):
    """The move of k GPUs that turns node counts ``before`` into ``after`` (one of :func:`moves_for`'s)."""
    delta = tuple(a - b for a, b in zip(after, before))
    for mv in moves_for(k, g)[0]:
        d = [0] * (g + 1)
        for c, r in mv:
            d[c] -= 1
            d[r] += 1
        if tuple(d) == delta and all(before[c] >= sum(1 for x, _ in mv if x == c) for c, _ in mv):
            return mv
    raise AssertionError("placed_dp: no move between two of its states")  # pragma: no cover
