"""GPUs for every job of a target: keep running jobs where they are, place the rest.

The model places an allocation on the nodes (docs/design.md §2 "Placement"),
but from scratch: it does not know where jobs run now, and a job moved to other
GPUs pays a restart like any rescale.  Where the executor runs jobs on named
GPUs (the simulated one), the autoscaler turns a policy's target (GPU type, k,
packed) per job into GPUs with :func:`place_targets`, per pool:

1. a job whose type and k did not change keeps its GPUs (a packed job only if
   they are on its fewest nodes); an unpacked job that shrinks keeps part of
   them, one that grows keeps them all and adds GPUs (on its own nodes first);
2. the others, largest first, go on one node if one has room (best fit: the
   fullest node that fits), else on as few nodes as the greedy finds (the
   emptiest nodes whole, the remainder on the fullest node that fits it); GPU
   indices lowest first;
3. if that leaves a packed job on more than its fewest nodes, ceil(k / g), the
   pool is placed as the policy proposed (``Allocation.nodes``: a solver's
   placement, which fits the nodes), moving jobs where it says.

:func:`order_for_gpus` then orders the executor calls so that no job is put on
GPUs another job still holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

from elasticopt.errors import ValidationError
from elasticopt.models import Cluster
from elasticopt.models.problem import Pool
from elasticopt.scheduling.actions import Action, Placed

__all__ = ["place_targets", "order_for_gpus", "gpus_of"]

_NONE: frozenset[int] = frozenset()


def gpus_of(placed: Placed) -> set[tuple[str, int, int]]:
    """The GPUs of a placement as ``(type, node, index)`` triples."""
    t, nodes = placed
    return {(t, n, i) for n, ix in nodes for i in ix}


def _take(free: Sequence[frozenset[int] | set[int]], k: int) -> dict[int, int]:
    """Choose nodes for k GPUs (module docstring, step 2): node -> GPUs; ``free`` is not changed."""
    size = [len(f) for f in free]
    fits = [n for n in range(len(size)) if size[n] >= k]
    if fits:
        return {min(fits, key=lambda n: (size[n], n)): k}
    taken: dict[int, int] = {}
    left = k
    order = sorted(range(len(size)), key=lambda n: (-size[n], n))
    for pos, n in enumerate(order):
        if not size[n]:
            break
        if size[n] >= left:  # the remainder fits a node: the fullest that does (order is by size, then index)
            end = pos
            while end + 1 < len(order) and size[order[end + 1]] >= left:
                end += 1
            first = end
            while first > pos and size[order[first - 1]] == size[order[end]]:
                first -= 1
            taken[order[first]] = left
            return taken
        taken[n] = size[n]
        left -= size[n]
    raise ValidationError("allocation", f"{k} GPUs within the free GPUs of the pool", sum(size))


@lru_cache(maxsize=64)
def _free_sets(pool: Pool) -> tuple[frozenset[int], ...]:
    """Per node of the pool, its free GPU indices."""
    return tuple(frozenset(ix) for ix in pool.free_gpus())


def _place_pool(
    pool: Pool,
    gpu_type: str,
    jobs: Sequence[tuple[str, int, bool]],
    current: Mapping[str, Placed],
) -> tuple[dict[str, Placed], bool]:
    """Keep-in-place placement of one pool's jobs; also whether every packed job is on its fewest nodes."""
    base = _free_sets(pool)
    gpus_per_node = pool.gpus_per_node
    taken: dict[int, set[int]] = {}  # node -> GPU indices given to a job so far
    out: dict[str, Placed] = {}
    rest = []
    grows = []

    def hold(nodes) -> None:
        for n, ix in nodes:
            taken.setdefault(n, set()).update(ix)

    n_nodes = len(base)
    for jid, k, packed in jobs:
        cur = current.get(jid)
        if cur is not None and len(cur[1]) == 1 and cur[0] == gpu_type:  # the common case, on one node
            n, ix = cur[1][0]
            if len(ix) == k and 0 <= n < n_nodes and base[n].issuperset(ix):
                held = taken.get(n)
                if held is None:
                    taken[n] = set(ix)
                    out[jid] = cur
                    continue
                if held.isdisjoint(ix):
                    held.update(ix)
                    out[jid] = cur
                    continue
        if cur is not None and cur[0] == gpu_type and all(
                0 <= n < n_nodes and base[n].issuperset(ix) and taken.get(n, _NONE).isdisjoint(ix)
                for n, ix in cur[1]):
            have = sum(len(ix) for _, ix in cur[1])
            if have == k and (not packed or len(cur[1]) <= -(-k // gpus_per_node)):
                hold(cur[1])
                out[jid] = cur
                continue
            if not packed and have > k:  # a shrink keeps part of its GPUs, on the nodes where it has most
                left, nodes = k, []
                for n, ix in sorted(cur[1], key=lambda e: (-len(e[1]), e[0])):
                    if left:
                        nodes.append((n, tuple(ix[:left])))
                        left -= len(ix[:left])
                hold(nodes)
                out[jid] = (gpu_type, tuple(sorted(nodes)))
                continue
            if not packed and have < k:  # a grow keeps its GPUs and adds some (below)
                hold(cur[1])
                grows.append((jid, k, cur))
                continue
        rest.append((jid, k, packed))
    if not grows and not rest:
        return out, True
    # per node its GPUs still free (the pool's own frozen sets where nothing was taken; replaced, never changed)
    free: list[frozenset[int] | set[int]] = [b - taken[n] if n in taken else b for n, b in enumerate(base)]
    for jid, k, cur in grows:
        mine = {n: list(ix) for n, ix in cur[1]}
        need = k - sum(len(ix) for ix in mine.values())
        for n in sorted(mine):  # first on its own nodes, then where the greedy finds room
            extra = sorted(free[n])[:need]
            free[n] = free[n].difference(extra)
            mine[n] += extra
            need -= len(extra)
        if need:
            for n, c in _take(free, need).items():
                extra = sorted(free[n])[:c]
                free[n] = free[n].difference(extra)
                mine[n] = mine.get(n, []) + extra
        out[jid] = (gpu_type, tuple((n, tuple(sorted(ix))) for n, ix in sorted(mine.items())))
    ok = True
    for jid, k, packed in sorted(rest, key=lambda j: -j[1]):
        counts = _take(free, k)
        if packed and len(counts) > -(-k // gpus_per_node):
            ok = False
        nodes = []
        for n in sorted(counts):
            ix = tuple(sorted(free[n])[: counts[n]])
            free[n] = free[n].difference(ix)
            nodes.append((n, ix))
        out[jid] = (gpu_type, tuple(nodes))
    return out, ok


def _checked(cluster: Cluster, gpu_type: str, jobs: Sequence[tuple[str, int, bool]],
             proposal: Mapping[str, Placed]) -> dict[str, Placed]:
    """The proposal for one pool's jobs, checked GPU by GPU (ValidationError naming the job)."""
    pool = cluster.pools[gpu_type]  # type: ignore[index]
    free = {(n, i) for n, ix in enumerate(pool.free_gpus()) for i in ix}
    out = {}
    for jid, k, _ in jobs:
        p = proposal.get(jid)
        if p is None or p[0] != gpu_type:
            raise ValidationError(f"allocation.nodes[{jid!r}]", f"a placement on {gpu_type!r}", p)
        mine = {(n, i) for n, ix in p[1] for i in ix}
        if len(mine) != k or sum(len(ix) for _, ix in p[1]) != k or not mine <= free:
            raise ValidationError(f"allocation.nodes[{jid!r}]", f"{k} distinct free GPUs of {gpu_type!r}", p)
        free -= mine
        out[jid] = (gpu_type, tuple(sorted((int(n), tuple(sorted(ix))) for n, ix in p[1])))
    return out


def place_targets(
    cluster: Cluster,
    targets: Mapping[str, tuple[str, int, bool]],
    current: Mapping[str, Placed],
    proposal: Mapping[str, Placed] | None = None,
) -> dict[str, Placed]:
    """GPUs for every job with a target (module docstring).

    Parameters
    ----------
    cluster
        The pools (free GPU indices per node).
    targets
        Job id -> (GPU type, k, packed) for every job that is to hold GPUs, in priority order
        (earlier jobs keep their GPUs first).
    current
        Job id -> where a running job's GPUs are now.
    proposal
        Optional placement of every target job that fits the nodes (a solver's), used for a
        pool where keeping jobs in place would spread a packed job.

    Raises
    ------
    ValidationError
        If a pool's targets exceed its free GPUs, or a proposal used does not fit.
    """
    by_type: dict[str, list[tuple[str, int, bool]]] = {}
    for jid, (t, k, packed) in targets.items():
        if t not in cluster.pools:  # type: ignore[operator]
            raise ValidationError(f"allocation[{jid!r}].gpu_type", "a GPU type of the cluster: "
                                  + ", ".join(cluster.types), t)
        by_type.setdefault(t, []).append((jid, k, packed))
    out: dict[str, Placed] = {}
    for t, jobs in by_type.items():
        pool = cluster.pools[t]  # type: ignore[index]
        need = sum(k for _, k, _ in jobs)
        if need > pool.gpus:
            raise ValidationError(f"allocation[{t!r}]", f"at most the pool's {pool.gpus} free GPUs", need)
        placed, ok = _place_pool(pool, t, jobs, current)
        if not ok and proposal and all(j in proposal for j, _, _ in jobs):
            placed = _checked(cluster, t, jobs, proposal)
        out.update(placed)
    return out


def order_for_gpus(actions: Sequence[Action], held: Mapping[str, Placed]) -> list[Action]:
    """The actions in an order in which no job is put on GPUs another job still holds.

    ``held``: where every running job's GPUs are before the actions.  The given order (stops,
    shrinks, moves, grows, starts) is kept where it allows; an action waits until the GPUs it
    needs are released.  A cycle (jobs trading GPUs) is broken by stopping one of its jobs first
    and starting it afterwards (a stop and a start instead of a rescale).
    """
    # only jobs with an action change GPUs, and a target's GPUs are free of every job kept as it is:
    # the GPUs to watch are those the acting jobs hold now
    acting = {a.job_id for a in actions}
    holding = {jid: gpus_of(p) for jid, p in held.items() if jid in acting}
    owner = {g: jid for jid, gs in holding.items() for g in gs}
    pending = list(actions)
    out: list[Action] = []

    def apply(act: Action) -> None:
        for g in holding.pop(act.job_id, ()):
            del owner[g]
        if act.placement is not None:
            holding[act.job_id] = gpus_of(act.placement)
            for g in holding[act.job_id]:
                owner[g] = act.job_id
        out.append(act)

    while pending:
        for i, act in enumerate(pending):
            need = gpus_of(act.placement) if act.placement is not None else set()
            if all(owner.get(g, act.job_id) == act.job_id for g in need):
                apply(pending.pop(i))
                break
        else:  # every pending action waits for another: stop the first one's job, start it later
            act = pending.pop(0)
            apply(Action("stop", act.job_id))
            pending.append(Action("start", act.job_id, act.gpus, act.batch, act.placement))
    return out
