"""Keep-in-place placement of one pool's allocation, in the service's terms, verified.

The placement itself is the model's one placer
(:func:`elasticopt.models.placement.pack`): running jobs keep their nodes
where they can (a move is a restart for every host scheduler), the others go
best fit on the fewest nodes, packed jobs on their fewest nodes or, where
keeping jobs in place leaves no room for that, the pool is packed from
scratch.  This module only speaks the service's language: nodes as
``(node index, GPUs)`` pairs (hosts do not name GPU indices), and
:func:`check_placement` verifies the result independently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from elasticopt.models.placement import node_name, pack
from elasticopt.models.problem import Pool
from elasticopt.models.table import job_values
from elasticopt.service.protocol import ServiceError

if TYPE_CHECKING:
    from elasticopt.service.translate import Translation
    from elasticopt.solvers import Solution

__all__ = ["NodeAssignment", "place", "check_placement", "answer_allocation"]

Nodes = tuple[tuple[int, int], ...]  # ((node index, GPUs on it), ...), node indices increasing


@dataclass(frozen=True)
class NodeAssignment:
    """Where every allocated job's GPUs are.

    Attributes
    ----------
    nodes
        Job id -> ((node index, GPUs), ...) for every job with GPUs.
    moved
        Job id -> True if the job's nodes differ from its current ones.
    warnings
        Current placements that could not be kept as given, and why.
    kept
        False where keeping running jobs in place left no placement of the
        packed jobs, so the pool was packed from scratch.
    status
        The placer's status: ``"placed"``, or ``"impossible"`` / ``"unknown"``
        (then ``nodes`` is empty).
    """

    nodes: Mapping[str, Nodes]
    moved: Mapping[str, bool]
    warnings: tuple[str, ...] = ()
    kept: bool = True
    status: str = "placed"


def _valid_current(cur: Sequence[tuple[int, int]], left: list[int]) -> str:
    """Why ``cur`` cannot be held on nodes with ``left`` GPUs not yet claimed by another job; "" if it can."""
    seen: dict[int, int] = {}
    for n, c in cur:
        if not 0 <= n < len(left):
            return f"node {n} does not exist (the cluster has {len(left)} nodes)"
        if c < 1:
            return f"node {n}: {c} GPUs (expected at least 1)"
        seen[n] = seen.get(n, 0) + c
    for n, c in seen.items():
        if c > left[n]:
            return f"node {n} has {left[n]} free GPUs left, the job's current placement holds {c} there"
    return ""


def place(
    node_gpus: Sequence[int],
    allocation: Mapping[str, int | None],
    current: Mapping[str, Sequence[tuple[int, int]]],
    packed: Mapping[str, bool] | None = None,
    deadline: float | None = None,
) -> NodeAssignment:
    """Put every allocated job's GPUs on nodes (module docstring).

    Parameters
    ----------
    node_gpus
        GPUs of each node, by node index.
    allocation
        Job id -> GPUs (None or 0 = idle); earlier jobs keep their nodes first.
    current
        Job id -> current ``[(node, gpus), ...]`` of running jobs.
    packed
        Job id -> whether it must sit on its fewest nodes (default: no job).
    deadline
        ``time.perf_counter()`` value at which the placer's exact search stops.

    Raises
    ------
    ValueError
        If the allocation exceeds the nodes' total.
    """
    if sum(k or 0 for k in allocation.values()) > sum(node_gpus):
        raise ValueError(f"{sum(k or 0 for k in allocation.values())} GPUs do not fit the nodes' {sum(node_gpus)}")
    g = max(node_gpus, default=1) or 1
    pool = Pool(len(node_gpus), g, tuple(tuple(range(c)) for c in node_gpus))
    ids = [jid for jid, k in allocation.items() if k]
    left = list(node_gpus)
    claimed = [0] * len(node_gpus)
    cur_ix: list[dict[int, tuple[int, ...]] | None] = []
    warnings: list[str] = []
    for jid in ids:  # hosts name GPU counts per node: the i-th running job of a node holds its next GPUs
        cur = current.get(jid)
        if not cur:
            cur_ix.append(None)
            continue
        why = _valid_current(cur, left)
        if why:
            warnings.append(f"job {jid!r}: current placement not kept: {why}")
            cur_ix.append(None)
            continue
        mine: dict[int, tuple[int, ...]] = {}
        for n, c in cur:
            mine[n] = mine.get(n, ()) + tuple(range(claimed[n], claimed[n] + c))
            claimed[n] += c
            left[n] -= c
        cur_ix.append(mine)
    flags = packed or {}
    res = pack(pool, [(int(allocation[j]), bool(flags.get(j, False))) for j in ids], cur_ix,  # type: ignore[arg-type]
               deadline=deadline)
    if res.status != "placed":
        return NodeAssignment({}, {}, tuple(warnings), res.kept, res.status)
    if res.released:
        warnings.append("moved so that the packed jobs place, every other running job kept: "
                        + ", ".join(repr(ids[i]) for i in res.released))
    nodes = {j: tuple((n, len(ix)) for n, ix in sorted(d.items())) for j, d in zip(ids, res.nodes)}
    moved = {}
    for jid, placed in nodes.items():
        cur = current.get(jid)
        merged: dict[int, int] = {}
        for n, c in cur or ():
            merged[int(n)] = merged.get(int(n), 0) + int(c)
        moved[jid] = cur is None or not cur or tuple(sorted(merged.items())) != placed
    return NodeAssignment(nodes, moved, tuple(warnings), res.kept)


def check_placement(
    node_gpus: Sequence[int], allocation: Mapping[str, int | None], placement: NodeAssignment
) -> list[str]:
    """Independent check: every job's GPUs placed exactly, no node over capacity."""
    errors: list[str] = []
    used = [0] * len(node_gpus)
    for jid, k in allocation.items():
        placed = placement.nodes.get(jid, ())
        if sum(c for _, c in placed) != (k or 0):
            errors.append(f"job {jid!r}: {sum(c for _, c in placed)} GPUs placed, {k or 0} allocated")
        for n, c in placed:
            if not 0 <= n < len(node_gpus) or c < 1:
                errors.append(f"job {jid!r}: bad node entry ({n}, {c})")
                continue
            used[n] += c
    extra = set(placement.nodes) - set(allocation)
    if extra:
        errors.append(f"placed jobs that are not allocated: {sorted(extra)}")
    for n, (u, cap) in enumerate(zip(used, node_gpus)):
        if u > cap:
            errors.append(f"node {n}: {u} GPUs placed, it has {cap}")
    return errors


def _solution_nodes(t: str, nodes: int, alloc: Mapping[str, int], sol: Solution) -> NodeAssignment | None:
    """The solution's own placement of one pool's jobs as (node, GPUs) pairs, every job moved; None where a
    job has none or names a node this pool lacks."""
    index = {node_name(t, n): n for n in range(nodes)}
    out: dict[str, Nodes] = {}
    for j in alloc:
        got = sol.placement.get(j)
        if got is None:
            return None
        pairs = []
        for name, ix in got.items():
            n = index.get(name)
            if n is None:
                return None
            if ix:
                pairs.append((n, len(ix)))
        pairs.sort()
        out[j] = tuple(pairs)
    return NodeAssignment(out, dict.fromkeys(alloc, True))


def answer_allocation(tr: Translation, sol: Solution, job_value: Mapping[str, float],
                      verified: bool = False) -> tuple[dict[str, Any], list[str]]:
    """A response's ``allocation``: per job GPUs, batch, pool, nodes, value (caller units), whether it moved;
    and warnings.

    Per pool, the model's one placer keeping running jobs in place (:func:`place`: a job keeps its nodes
    when its GPU count is kept; where that leaves a packed job no fewest nodes, the pool is packed from
    scratch).  A pool where no job runs has nothing to keep: its answer is the solution's own placement
    (``sol.placement``, the same placer's from scratch as the solve made it, verified by ``verify``), not
    placed a second time (1,000 jobs: ~4 ms).  The solution's placement is also the answer where the
    placer's search stops first.  Every placement is checked (:func:`check_placement`) before it is
    answered, but for the solution's own where ``verified`` (``verify`` passed it: every job on its count of
    free GPUs of its pool, none twice, packed ones on their fewest nodes, which implies what the check
    checks).  ``job_value``: the chosen options' values as :func:`~elasticopt.solvers.verify` recomputed
    them (empty when the request turned verification off: then computed here, the same way).
    """
    problem = tr.problem
    first_pool = next(iter(tr.pools))
    pool_of = {jid: sol.gpu_types.get(jid, first_pool) for jid, a in sol.allocation.items() if a}
    nodes_of: dict[str, list[list[int]]] = {}
    moved: dict[str, bool] = {}
    warnings: list[str] = []
    for t, pool in tr.pools.items():
        alloc = {jid: sol.allocation[jid][0] for jid, p in pool_of.items() if p == t}  # type: ignore[index]
        if not alloc:
            continue
        g = pool.gpus_per_node
        current = {jid: [(n - pool.first, c) for n, c in cur] for jid, (ct, cur) in tr.current.items()
                   if ct == t and jid in alloc}
        pl = None if current else _solution_nodes(t, len(pool.node_gpus), alloc, sol)
        checked = pl is not None and verified  # the solution's own placement, which verify passed
        if pl is None:
            pl = place(pool.node_gpus, alloc, current, {j: bool(sol.packed.get(j)) for j in alloc})
            warnings.extend(pl.warnings)
            if pl.status == "placed" and not pl.kept:
                warnings.append(f"pool {t!r}: keeping running jobs on their nodes would spread a packed job; "
                                "the pool is packed from scratch")
        if not checked and (pl.status != "placed" or not all(len(pl.nodes[j]) <= -(-k // g)
                                                             for j, k in alloc.items() if sol.packed.get(j))):
            chosen = {j: tuple(sorted((int(name.rsplit("/", 1)[1]), len(ix)) for name, ix in sol.placement[j].items()))
                      for j in alloc}
            pl = NodeAssignment(chosen, {j: tuple(sorted(current.get(j, ()))) != chosen[j] for j in alloc})
            warnings.append(f"pool {t!r}: the placer stopped before placing the packed jobs; "
                            "the model's placement is used")
        errors = [] if checked else check_placement(pool.node_gpus, alloc, pl)
        if errors:
            raise ServiceError("internal", "placement does not verify: " + "; ".join(errors), "allocation",
                               "a placement within every node's GPUs", errors[0])
        first = pool.first
        for j in alloc:
            nodes_of[j] = [[first + n, c] for n, c in pl.nodes[j]]
            moved[j] = bool(pl.moved[j])
    out: dict[str, Any] = {}
    for job in problem.jobs:
        a = sol.allocation.get(job.id)
        if a is None:
            out[job.id] = None
            continue
        (k, b), t, packed = a, pool_of[job.id], bool(sol.packed.get(job.id, False))
        vj = tr.value_jobs.get(job.id)
        if vj is not None:
            v = vj.priced[(t, k, b, packed)]
        elif job.id in job_value:
            v = job_value[job.id]
        else:
            # priced among all its options, as verify prices it: an objective may divide by the job's best
            # rate over them (speedup, goodput); priced alone, the chosen option was its own best (a value of k)
            opts = job.typed_options(problem.cluster, problem.node_aware)
            v = next(val for o, val in zip(opts, job_values(problem, job, opts))
                     if (o.gpu_type, o.gpus, o.batch, o.packed) == (t, k, b, packed))
        out[job.id] = {"gpus": k, "batch": b, "pool": t, "nodes": nodes_of[job.id], "value": float(v),
                       "moved": moved[job.id]}
    for jid in tr.left_out:
        out[jid] = None
    return out, warnings
