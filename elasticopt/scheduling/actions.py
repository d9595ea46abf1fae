"""Pure functions of the autoscaler: target -> ordered actions, and the payback rule."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = ["Action", "plan_actions", "pays_back"]

#: A job's allocation: (GPUs k, global batch b); None where a job holds nothing.
Option = tuple[int, int]


@dataclass(frozen=True)
class Action:
    """One executor call: ``start``, ``rescale`` or ``stop`` (gpus = batch = 0)."""

    kind: Literal["start", "rescale", "stop"]
    job_id: str
    gpus: int = 0
    batch: int = 0


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
        Job id -> current (k, b) or None (queued).  Every job of ``target``
        should appear; a missing one counts as queued.
    target
        Job id -> target (k, b) or None.  A job missing from ``target`` keeps
        nothing: a running one is stopped.
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
        elif cur is None:
            starts.append(Action("start", jid, tgt[0], tgt[1]))
        elif tgt[0] < cur[0]:
            shrinks.append(Action("rescale", jid, tgt[0], tgt[1]))
        elif tgt[0] == cur[0]:
            same.append(Action("rescale", jid, tgt[0], tgt[1]))
        else:
            grows.append(Action("rescale", jid, tgt[0], tgt[1]))
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
