"""``optimus``: Optimus-style marginal gain (Peng et al., EuroSys'18) — GPUs elastic, batch fixed.

Every job keeps its submitted global batch.  Queued jobs are admitted in
arrival order on their smallest feasible GPU count while GPUs remain (running
jobs keep at least their smallest option: no preemption).  Then, one step at a
time, the job whose next larger GPU count saves the most remaining time per
added GPU, ``(rem / rate(k) - rem / rate(k')) / (k' - k)``, takes the GPUs,
until no step saves time or no GPUs are left.  Running jobs' changes obey the
anti-thrashing rule.  A heuristic, not an optimum: a baseline.
"""

from __future__ import annotations

import heapq

from elasticopt.scheduling.hysteresis import DEFAULT_HYSTERESIS, Hysteresis
from elasticopt.scheduling.policies.base import register_policy, require_one_type
from elasticopt.scheduling.state import Allocation, JobState, Snapshot, option_error

__all__ = ["OptimusPolicy"]


@register_policy("optimus")
class OptimusPolicy:
    """Marginal remaining-time reduction per GPU, batch fixed at the submitted value.

    Parameters
    ----------
    payback
        Apply the anti-thrashing rule to running jobs' changes.
    hysteresis
        The rule (default :data:`~elasticopt.scheduling.hysteresis.DEFAULT_HYSTERESIS`).

    Refuses a cluster of several GPU types (it cannot choose types): ValidationError.
    """

    name = "optimus"

    def __init__(self, payback: bool = True, hysteresis: Hysteresis | None = None):
        self.payback = payback
        self.hysteresis = DEFAULT_HYSTERESIS if hysteresis is None else hysteresis

    def _ladder(self, st: JobState, cap: int) -> list[tuple[int, float]]:
        """(k, progress rate) at the submitted batch, increasing k, rates increasing."""
        b = st.spec.batch_submitted
        out: list[tuple[int, float]] = []
        for k, bb in st.spec.throughput.candidates(min(cap, st.spec.gpus_max or cap), b, b):
            if bb != b or option_error(st.spec, k, b, cap) is not None:
                continue
            if st.is_running and self.payback and (k, b) != st.allocation and not self.hysteresis.allows(st, k, b):
                continue
            rate = st.progress_per_s(k, b) or 0.0
            if rate > 0 and (not out or rate > out[-1][1]):
                out.append((k, rate))
        return sorted(out)

    def allocate(self, snapshot: Snapshot) -> Allocation:
        """Admit FIFO on the smallest option, then grow by marginal time saved per GPU."""
        require_one_type(snapshot, self.name)
        cap = snapshot.cluster.gpus
        free = cap
        target: dict[str, tuple[int, int] | None] = {st.id: None for st in snapshot.jobs}
        ladders: dict[str, list[tuple[int, float]]] = {}
        pos: dict[str, int] = {}
        for st in snapshot.running:  # keep at least the smallest option (or the current one if none)
            lad = self._ladder(st, cap)
            if st.allocation[1] != st.spec.batch_submitted or not lad:
                target[st.id] = st.allocation
                free -= st.gpus
                continue
            ladders[st.id], pos[st.id] = lad, 0
            free -= lad[0][0]
        for st in sorted(snapshot.queued, key=lambda s: (s.spec.arrival_s, s.id)):
            lad = self._ladder(st, cap)
            if lad and lad[0][0] <= free:
                ladders[st.id], pos[st.id] = lad, 0
                free -= lad[0][0]
        rem = {st.id: st.remaining_samples for st in snapshot.jobs}
        batch = {st.id: st.spec.batch_submitted for st in snapshot.jobs}

        def step(jid: str):
            lad, i = ladders[jid], pos[jid]
            if i + 1 >= len(lad) or lad[i + 1][0] - lad[i][0] > free:
                return None
            (k0, r0), (k1, r1) = lad[i], lad[i + 1]
            return (rem[jid] / r0 - rem[jid] / r1) / (k1 - k0)

        heap = [(-g, jid) for jid in ladders if (g := step(jid)) is not None and g > 0]
        heapq.heapify(heap)
        while heap:
            neg, jid = heapq.heappop(heap)
            g = step(jid)
            if g is None or g <= 0:
                continue
            if g != -neg:  # capacity changed since it was pushed
                heapq.heappush(heap, (-g, jid))
                continue
            lad = ladders[jid]
            free -= lad[pos[jid] + 1][0] - lad[pos[jid]][0]
            pos[jid] += 1
            g = step(jid)
            if g is not None and g > 0:
                heapq.heappush(heap, (-g, jid))
        for jid, i in pos.items():
            target[jid] = (ladders[jid][i][0], batch[jid])
        return Allocation(target, info={"solver": "optimus"})
