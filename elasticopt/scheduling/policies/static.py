"""``static`` and ``static-backfill``: non-elastic FIFO on the submitted (k, b)."""

from __future__ import annotations

from elasticopt.scheduling.policies.base import register_policy, submitted_type
from elasticopt.scheduling.state import Allocation, Snapshot, option_error

__all__ = ["StaticPolicy"]


class StaticPolicy:
    """Run each job on exactly its submitted (k, b), in arrival order, never rescaled.

    Parameters
    ----------
    backfill
        False: strict FIFO, the first queued job that does not fit blocks all
        later ones.  True: later jobs that fit start ahead of it (greedy
        backfilling without reservations).

    A job whose submitted option can never run here (more GPUs than the
    cluster, or an option its profile does not know) is skipped, not left to
    block the queue forever; it is reported as unfinished.

    On a cluster of several GPU types each job runs on the type it was
    submitted for (``JobSpec.submitted_type``, else the first type of the
    cluster it may use), FIFO over all types: the first job that does not fit
    its type's free GPUs blocks the queue (without backfill).
    """

    def __init__(self, backfill: bool = False):
        self.backfill = backfill
        self.name = "static-backfill" if backfill else "static"

    def allocate(self, snapshot: Snapshot) -> Allocation:
        target: dict[str, tuple[int, int] | None] = {}
        cluster = snapshot.cluster
        types = cluster.types
        free = {t: cluster.capacity(t) for t in types}
        on: dict[str, str] = {}
        for st in snapshot.running:
            target[st.id] = st.allocation
            on[st.id] = submitted_type(st, types) or types[0]
            free[on[st.id]] -= st.gpus
        skipped = []
        blocked = False
        for st in sorted(snapshot.queued, key=lambda s: (s.spec.arrival_s, s.id)):
            k, b = st.spec.submitted_gpus, st.spec.batch_submitted
            target[st.id] = None
            t = submitted_type(st, types)
            if t is None or option_error(st.spec, k, b, cluster.capacity(t), None if len(types) == 1 else t):
                skipped.append(st.id)
                continue
            if blocked:
                continue
            if k <= free[t]:
                target[st.id] = (k, b)
                on[st.id] = t
                free[t] -= k
            elif not self.backfill:
                blocked = True
        return Allocation(target, info={"skipped": skipped}, gpu_types=on)


register_policy("static", lambda: StaticPolicy(backfill=False))
register_policy("static-backfill", lambda: StaticPolicy(backfill=True))
