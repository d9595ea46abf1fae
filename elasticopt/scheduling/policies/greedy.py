"""``greedy``: marginal-gain heuristic (Optimus-style), one GPU step at a time."""

from __future__ import annotations

import heapq

import numpy as np

from elasticopt.models.objectives import ModelJobs, OptionRows, get_objective
from elasticopt.scheduling.policies.base import priority_order, register_policy, require_one_type
from elasticopt.scheduling.policies.elastic import payback_filter
from elasticopt.scheduling.state import Allocation, Snapshot, to_model_job

__all__ = ["GreedyPolicy"]


@register_policy("greedy")
class GreedyPolicy:
    """Hand out GPUs by the best marginal speedup per GPU until none is positive.

    Every job starts at nothing (queued) or at its smallest option (running,
    no preemption); then, repeatedly, the job whose next larger GPU count
    adds the most value per added GPU (docs/design.md §2 ``speedup`` values, the
    rescale penalty charged to changes of running jobs) takes it, ties going
    to the earlier job in ``priority`` order.  Not exact: a baseline.

    Parameters
    ----------
    priority
        ``arrival`` or ``srpt`` (as for ``elastic``).
    rescale_penalty
        λ subtracted from the value of any non-current option of a running job.
    payback
        Apply the anti-thrashing option filter of ``elastic``.

    Refuses a cluster of several GPU types (it cannot choose types): ValidationError.
    """

    name = "greedy"

    def __init__(self, priority: str = "arrival", rescale_penalty: float = 0.01, payback: bool = True):
        self.priority = priority
        self.rescale_penalty = float(rescale_penalty)
        self.payback = payback

    def allocate(self, snapshot: Snapshot) -> Allocation:
        require_one_type(snapshot, self.name)
        cap = snapshot.cluster.gpus
        rank = {jid: i for i, jid in enumerate(priority_order(snapshot, self.priority))}
        speedup = get_objective("speedup")
        ladders: dict[str, list[tuple[int, int, float]]] = {}  # per job: (k, b, value), increasing k
        pos: dict[str, int] = {}  # index into ladder, -1 = queued
        used = 0
        for st in snapshot.jobs:
            job = to_model_job(st, payback_filter(st) if self.payback else None)
            best: dict[int, tuple[float, int]] = {}
            for k, b, t in job.options(cap):
                cur = st.allocation == (k, b)
                key = (t, cur, -b)
                if k not in best or key > (best[k][0], st.allocation == (k, best[k][1]), -best[k][1]):
                    best[k] = (t, b)
            if not best:
                if st.is_running:  # keep what it has
                    ladders[st.id] = [(st.gpus, st.batch, 0.0)]
                    pos[st.id] = 0
                    used += st.gpus
                continue
            ks = sorted(best)
            m = len(ks)
            rows = OptionRows(np.zeros(m, np.int64), np.array(ks, np.int64), np.array([best[k][1] for k in ks], np.int64),
                              np.array([best[k][0] for k in ks]), np.zeros(m, np.int64), np.zeros(m, bool),
                              snapshot.cluster.types)
            values = speedup.values(rows, ModelJobs([job])).tolist()  # the speedup objective's own formula
            ladder = []
            for k, v in zip(ks, values):
                b = best[k][1]
                if st.is_running and (k, b) != st.allocation:
                    v -= self.rescale_penalty
                if not ladder or v > ladder[-1][2]:
                    ladder.append((k, b, v))
            ladders[st.id] = ladder
            if st.is_running:
                pos[st.id] = 0
                used += ladder[0][0]
            else:
                pos[st.id] = -1

        def step(jid: str):
            """Best (gain per GPU, next index) for one job, or None."""
            lad, i = ladders[jid], pos[jid]
            k0, v0 = (0, 0.0) if i < 0 else (lad[i][0], lad[i][2])
            best = None
            for j in range(i + 1, len(lad)):
                dk = lad[j][0] - k0
                if dk > cap - used:
                    break
                gain = (lad[j][2] - v0) / dk
                if gain > 0 and (best is None or gain > best[0]):
                    best = (gain, j)
            return best

        heap = []
        for jid in ladders:
            s = step(jid)
            if s is not None:
                heapq.heappush(heap, (-s[0], rank[jid], jid, s[1]))
        while heap:
            neg_gain, _, jid, j = heapq.heappop(heap)
            s = step(jid)  # capacity may have shrunk since this entry was pushed
            if s is None:
                continue
            if s[1] != j or -neg_gain != s[0]:
                heapq.heappush(heap, (-s[0], rank[jid], jid, s[1]))
                continue
            k_old = 0 if pos[jid] < 0 else ladders[jid][pos[jid]][0]
            used += ladders[jid][j][0] - k_old
            pos[jid] = j
            s = step(jid)
            if s is not None:
                heapq.heappush(heap, (-s[0], rank[jid], jid, s[1]))
        target = {st.id: None for st in snapshot.jobs}
        for jid, i in pos.items():
            if i >= 0:
                k, b, _ = ladders[jid][i]
                target[jid] = (k, b)
        return Allocation(target, info={"solver": "greedy-policy"})
