"""``fixed-batch``: the paper's baseline — GPUs elastic, batch fixed at its submitted value."""

from __future__ import annotations

from collections.abc import Callable

from elasticopt.scheduling.policies.base import register_policy
from elasticopt.scheduling.policies.elastic import ElasticPolicy
from elasticopt.scheduling.state import JobState

__all__ = ["FixedBatchPolicy"]


@register_policy("fixed-batch")
class FixedBatchPolicy(ElasticPolicy):
    """The elastic policy with each job's options restricted to b = submitted batch.

    Same solver, objective, tie-break and anti-thrashing rule as
    :class:`~elasticopt.scheduling.policies.elastic.ElasticPolicy`; only the
    batch size is frozen, so a job needs at least ``b / max_local`` GPUs and
    cannot trade batch for GPUs.  Constructor options: as ``ElasticPolicy``,
    but by default without its rate floors and with ``due_weight`` 10 (the
    baseline unchanged by the rule that made ``elastic`` beat it).
    """

    name = "fixed-batch"
    fixed_batch = True

    # the baseline as the paper compares against it: no rate floors, the due weight it had before them
    DUE_WEIGHT, START_FLOOR, DUE_FLOOR = 10.0, 0.0, 0.0

    def option_filter(self, state: JobState) -> Callable[..., bool] | None:
        b_fixed = state.spec.batch_submitted
        inner = super().option_filter(state)
        if inner is None:
            return lambda k, b, gpu_type=None: b == b_fixed
        return lambda k, b, gpu_type=None: b == b_fixed and inner(k, b, gpu_type)

    option_filter.standard = True  # type: ignore[attr-defined]
