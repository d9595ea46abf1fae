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

from elasticopt.models.placement import pack
from elasticopt.models.problem import Pool

__all__ = ["NodeAssignment", "place", "check_placement"]

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
