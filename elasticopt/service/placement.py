"""Keep-in-place packing of one pool's allocation, verified.

The model places an allocation on the nodes (docs/design.md §2 "Placement")
but does not know where jobs run now, and every host scheduler counts a move
as a restart.  This step packs one pool keeping running jobs where they are:

1. a job whose GPU count did not change keeps its current nodes (a move is a
   restart for every host scheduler), as long as they still fit;
2. the others, largest first, go on one node if any has room (best fit: the
   fullest node that fits), else on the fewest nodes: the emptiest nodes
   whole, the remainder on the fullest node that fits it.

Capacity alone guarantees success (spreading is always possible); what the
greedy order cannot guarantee is the fewest nodes for every packed job, so the
service uses this packing only where it gives them that, the model's placement
otherwise; :func:`check_placement` verifies either independently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Placement", "place", "check_placement"]

Nodes = tuple[tuple[int, int], ...]  # ((node index, GPUs on it), ...), node indices increasing


@dataclass(frozen=True)
class Placement:
    """Where every allocated job's GPUs are.

    Attributes
    ----------
    nodes
        Job id -> ((node index, GPUs), ...) for every job with GPUs.
    moved
        Job id -> True if the job's nodes differ from its current ones.
    warnings
        Current placements that could not be kept as given, and why.
    """

    nodes: Mapping[str, Nodes]
    moved: Mapping[str, bool]
    warnings: tuple[str, ...] = ()


def _valid_current(cur: Sequence[tuple[int, int]], k: int, free: list[int]) -> str:
    """Why ``cur`` cannot be kept for a job of k GPUs; "" if it can."""
    if sum(c for _, c in cur) != k:
        return f"its current nodes hold {sum(c for _, c in cur)} GPUs, not {k}"
    seen: dict[int, int] = {}
    for n, c in cur:
        if not 0 <= n < len(free):
            return f"node {n} does not exist (the cluster has {len(free)} nodes)"
        seen[n] = seen.get(n, 0) + c
    for n, c in seen.items():
        if c > free[n]:
            return f"node {n} has {free[n]} free GPUs, the job's current placement holds {c} there"
    return ""


def _pack(k: int, free: list[int]) -> Nodes:
    """Place k GPUs on the fewest nodes of ``free`` (mutated)."""
    fits = [n for n in range(len(free)) if free[n] >= k]
    if fits:
        n = min(fits, key=lambda i: (free[i], i))
        free[n] -= k
        return ((n, k),)
    order = sorted(range(len(free)), key=lambda i: (-free[i], i))
    taken: dict[int, int] = {}
    left = k
    for pos, n in enumerate(order):
        if free[n] == 0:
            break
        rest = order[pos:]
        fit = [m for m in rest if free[m] >= left]
        if fit:  # the remainder fits one node: the fullest that does
            m = min(fit, key=lambda i: (free[i], i))
            taken[m] = left
            free[m] -= left
            left = 0
            break
        taken[n] = free[n]
        left -= free[n]
        free[n] = 0
    if left:
        raise ValueError(f"{k} GPUs do not fit the free GPUs {free}")
    return tuple(sorted(taken.items()))


def place(
    node_gpus: Sequence[int],
    allocation: Mapping[str, int | None],
    current: Mapping[str, Sequence[tuple[int, int]]],
) -> Placement:
    """Put every allocated job's GPUs on nodes (see the module docstring).

    Parameters
    ----------
    node_gpus
        GPUs of each node, by node index.
    allocation
        Job id -> GPUs (None or 0 = idle); the total must fit.
    current
        Job id -> current ``[(node, gpus), ...]`` of running jobs.

    Raises
    ------
    ValueError
        If the allocation exceeds the nodes' total.
    """
    free = list(node_gpus)
    nodes: dict[str, Nodes] = {}
    warnings: list[str] = []
    rest: list[tuple[str, int]] = []
    for jid, k in allocation.items():
        if not k:
            continue
        cur = current.get(jid)
        if cur and sum(c for _, c in cur) == k:
            why = _valid_current(cur, k, free)
            if not why:
                merged: dict[int, int] = {}
                for n, c in cur:
                    merged[n] = merged.get(n, 0) + c
                    free[n] -= c
                nodes[jid] = tuple(sorted(merged.items()))
                continue
            warnings.append(f"job {jid!r}: current placement not kept: {why}")
        rest.append((jid, k))
    for jid, k in sorted(rest, key=lambda t: -t[1]):
        nodes[jid] = _pack(k, free)
    moved = {}
    for jid, placed in nodes.items():
        cur = current.get(jid)
        moved[jid] = cur is None or tuple(sorted((int(n), int(c)) for n, c in cur)) != placed
    return Placement(nodes=nodes, moved=moved, warnings=tuple(warnings))


def check_placement(
    node_gpus: Sequence[int], allocation: Mapping[str, int | None], placement: Placement
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
