"""Pure functions of the autoscaler: target -> ordered actions, and the payback rule."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = ["Action", "Option", "Placed", "plan_actions", "pays_back"]

#: A job's allocation: (GPUs k, global batch b); None where a job holds nothing.
Option = tuple[int, int]
#: Where a job's GPUs are: (GPU type, ((node index in its type's pool, (GPU indices, ...)), ...)), nodes increasing.
Placed = tuple[str, tuple[tuple[int, tuple[int, ...]], ...]]


@dataclass(frozen=True)
class Action:
    """One executor call: ``start``, ``rescale`` or ``stop`` (gpus = batch = 0).

    ``placement``: the GPUs to run on, where the autoscaler places jobs (None elsewhere).
    """

    kind: Literal["start", "rescale", "stop"]
    job_id: str
    gpus: int = 0
    batch: int = 0
    placement: Placed | None = None


def plan_actions(
    current: Mapping[str, Option | None],
    target: Mapping[str, Option | None],
    order: Mapping[str, int] | None = None,
) -> list[Action]:
    """Turn a target allocation into executor actions, releasing GPUs first.

    Order: stops, then shrinks (rescales to fewer GPUs), then rescales that
    keep the GPU count (batch changes), then grows, then starts.  Applied in
    this order, GPUs in use never exceed ``max(sum(current), sum(target))``,
    so a target that fits the cluster never overcommits it on the way.

    Parameters
    ----------
    current
        Job id -> current (k, b) or None (queued), or (k, b, placement) where
        GPUs are placed.  Every job of ``target`` should appear; a missing one
        counts as queued.
    target
        Job id -> target, as ``current``.  A job missing from ``target`` keeps
        nothing: a running one is stopped.  A job whose placement changes at
        the same (k, b) is rescaled (moved).
    order
        Optional rank per job id to order actions within a group (default:
        job id order).

    Returns
    -------
    list[Action]
        The actions, in the order they must be applied.
    """
    rank = (lambda j: (order.get(j, math.inf), j)) if order is not None else (lambda j: (0, j))
    stops, shrinks, same, grows, starts = [], [], [], [], []
    for jid in sorted(set(current) | set(target), key=rank):
        cur = current.get(jid)
        tgt = target.get(jid)
        if cur == tgt:
            continue
        if tgt is None:
            stops.append(Action("stop", jid))
            continue
        where = tgt[2] if len(tgt) > 2 else None  # type: ignore[misc]
        if cur is None:
            starts.append(Action("start", jid, tgt[0], tgt[1], where))
        elif tgt[0] < cur[0]:
            shrinks.append(Action("rescale", jid, tgt[0], tgt[1], where))
        elif tgt[0] == cur[0]:
            same.append(Action("rescale", jid, tgt[0], tgt[1], where))
        else:
            grows.append(Action("rescale", jid, tgt[0], tgt[1], where))
    return stops + shrinks + same + grows + starts


def pays_back(
    remaining_samples: float,
    rate_now: float,
    rate_new: float,
    restart_cost_s: float,
    margin: float = 1.0,
) -> bool:
    """Whether a rescale finishes the job sooner despite its restart cost.

    Without the rescale the job needs ``remaining / rate_now`` seconds; with
    it, ``restart_cost + remaining / rate_new``.  The rescale pays back iff the
    time saved exceeds ``margin`` times the restart cost.

    Parameters
    ----------
    remaining_samples
        Samples the job still has to process.
    rate_now, rate_new
        Samples/s now and after the rescale (> 0).
    restart_cost_s
        Seconds without progress that the rescale costs.
    margin
        Safety factor (>= 1 makes the rule stricter).
    """
    if rate_new <= 0:
        return False
    if rate_now <= 0:
        return True
    saved = remaining_samples / rate_now - remaining_samples / rate_new
    return saved > margin * restart_cost_s
