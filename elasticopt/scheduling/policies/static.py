"""``static`` and ``static-backfill``: non-elastic FIFO on the submitted (k, b)."""

from __future__ import annotations

from elasticopt.scheduling.policies.base import register_policy
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
    """

    def __init__(self, backfill: bool = False):
        self.backfill = backfill
        self.name = "static-backfill" if backfill else "static"

    def allocate(self, snapshot: Snapshot) -> Allocation:
        target: dict[str, tuple[int, int] | None] = {}
        free = snapshot.cluster.gpus
        for st in snapshot.running:
            target[st.id] = st.allocation
            free -= st.gpus
        skipped = []
        blocked = False
        for st in sorted(snapshot.queued, key=lambda s: (s.spec.arrival_s, s.id)):
            k, b = st.spec.submitted_gpus, st.spec.batch_submitted
            target[st.id] = None
            if option_error(st.spec, k, b, snapshot.cluster.gpus) is not None:
                skipped.append(st.id)
                continue
            if blocked:
                continue
            if k <= free:
                target[st.id] = (k, b)
                free -= k
            elif not self.backfill:
                blocked = True
        return Allocation(target, info={"skipped": skipped})


register_policy("static", lambda: StaticPolicy(backfill=False))
register_policy("static-backfill", lambda: StaticPolicy(backfill=True))
