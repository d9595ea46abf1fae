"""``tiresias``: Tiresias-style 2D-LAS (Gu et al., NSDI'19) — fixed size, preemptive, least attained service.

Each job runs on exactly its submitted (k, b) or not at all.  Its *attained
service* is the GPU-time it has received, ``k * progress / rate(k, b)``.
Jobs fall into priority queues by attained service (thresholds in
GPU-seconds, Tiresias' discretised 2D-LAS); within a queue the earlier arrival
goes first.  At every decision the jobs are taken in that order and given
their GPUs while they fit (later jobs that fit may pass one that does not);
a running job that is not chosen is preempted (a checkpoint: it keeps its
progress and pays its restart cost when it starts again).  Decisions happen
at arrivals and completions, and at ticks if the simulation has them
(``--tick-s``): demotions between queues only show at a decision.  On a
cluster of several GPU types each job runs on the type it was submitted for
(``JobSpec.submitted_type``, else the first type of the cluster it may use),
its GPUs counted against that type's.
"""

from __future__ import annotations

import bisect

from elasticopt.errors import ValidationError
from elasticopt.scheduling.policies.base import register_policy, submitted_type
from elasticopt.scheduling.state import Allocation, JobState, Snapshot, option_error

__all__ = ["TiresiasPolicy"]


@register_policy("tiresias")
class TiresiasPolicy:
    """2D-LAS with discretised queues on the submitted (k, b).

    Parameters
    ----------
    thresholds_gpu_s
        Attained-service boundaries between queues, increasing (default: one
        GPU-hour and ten GPU-hours, three queues).
    """

    name = "tiresias"

    def __init__(self, thresholds_gpu_s: tuple[float, ...] = (3600.0, 36000.0)):
        th = tuple(float(t) for t in thresholds_gpu_s)
        if any(t <= 0 for t in th) or list(th) != sorted(th):
            raise ValidationError("tiresias.thresholds_gpu_s", "increasing numbers > 0", thresholds_gpu_s)
        self.thresholds_gpu_s = th

    @staticmethod
    def attained_gpu_s(state: JobState) -> float:
        """GPU-seconds the job has received so far (fixed size: k x progress / rate)."""
        k, b = state.spec.submitted_gpus, state.spec.batch_submitted
        rate = state.progress_per_s(k, b, state.gpu_type or state.spec.submitted_type)
        return k * state.samples_done / rate if rate else 0.0

    def queue(self, state: JobState) -> int:
        """The job's queue (0 = highest priority)."""
        return bisect.bisect_right(self.thresholds_gpu_s, self.attained_gpu_s(state))

    def allocate(self, snapshot: Snapshot) -> Allocation:
        """Admit by (queue, arrival) while the submitted sizes fit; preempt the rest."""
        cluster = snapshot.cluster
        types = cluster.types
        free = {t: cluster.capacity(t) for t in types}
        target: dict[str, tuple[int, int] | None] = {}
        on: dict[str, str] = {}
        skipped = []
        order = sorted(snapshot.jobs, key=lambda s: (self.queue(s), s.spec.arrival_s, s.id))
        for st in order:
            k, b = st.spec.submitted_gpus, st.spec.batch_submitted
            target[st.id] = None
            t = submitted_type(st, types)
            if t is None or option_error(st.spec, k, b, cluster.capacity(t), None if len(types) == 1 else t):
                skipped.append(st.id)
            elif k <= free[t]:
                target[st.id] = (k, b)
                on[st.id] = t
                free[t] -= k
        return Allocation(target, info={"skipped": skipped}, gpu_types=on)
