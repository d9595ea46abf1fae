"""``pollux``: Pollux-style fairness (Qiao et al., OSDI'21) — power mean of goodput speedups, p = -1.

Pollux maximises ``FITNESS_p = (sum_j w_j S_j^p)^(1/p)`` over allocations, S_j
the job's goodput speedup, with p = -1: maximising it is minimising
``sum_j w_j / S_j``, a sum of one term per job, so the exact solvers solve it
exactly (Pollux itself searches with a genetic algorithm).  The formula is the
model's objective ``pollux`` (:func:`elasticopt.models.objectives.pollux_objective`:
batch chosen with the GPUs, a running job's change discounted by its restart cost,
a waiting job counted as ``idle_speedup``); this policy is ``elastic`` with it.
"""

from __future__ import annotations

from elasticopt.errors import ValidationError
from elasticopt.models.objectives import get_objective, objective_names, pollux_objective, register_objective
from elasticopt.scheduling.hysteresis import Hysteresis
from elasticopt.scheduling.policies.base import register_policy
from elasticopt.scheduling.policies.elastic import ElasticPolicy

__all__ = ["PolluxFairnessPolicy"]


def _objective_for(idle_speedup: float) -> str:
    """The registered name of the p = -1 objective at ``idle_speedup`` (registered on first use)."""
    obj = pollux_objective(idle_speedup)
    if obj.name not in objective_names():
        register_objective(obj)
    return get_objective(obj.name).name


@register_policy("pollux")
class PolluxFairnessPolicy(ElasticPolicy):
    """The elastic policy with the Pollux-style p = -1 fitness (objective ``pollux``) as its objective.

    Parameters
    ----------
    idle_speedup
        Speedup a waiting job counts as (> 0; default 0.01).
    solver, priority, payback, allow_preemption, time_limit_s, solver_options, hysteresis, node_aware
        As :class:`~elasticopt.scheduling.policies.elastic.ElasticPolicy`.
    """

    name = "pollux"
    # as before the rate floors (ElasticPolicy.START_FLOOR): they were measured on elastic only
    DUE_WEIGHT, START_FLOOR, DUE_FLOOR = 10.0, 0.0, 0.0

    def __init__(
        self,
        idle_speedup: float = 0.01,
        solver: str = "dp",
        priority: str = "arrival",
        payback: bool = True,
        allow_preemption: bool = False,
        time_limit_s: float | None = None,
        solver_options: dict | None = None,
        hysteresis: Hysteresis | None = None,
        node_aware: bool = False,
    ):
        if isinstance(idle_speedup, bool) or not isinstance(idle_speedup, (int, float)) or not (0 < idle_speedup < 1):
            raise ValidationError("pollux.idle_speedup", "a number in (0, 1)", idle_speedup)
        self.idle_speedup = float(idle_speedup)
        super().__init__(
            solver=solver, objective=_objective_for(self.idle_speedup), priority=priority, rescale_penalty=0.0,
            payback=payback, allow_preemption=allow_preemption, time_limit_s=time_limit_s,
            solver_options=solver_options, hysteresis=hysteresis, incremental=True, node_aware=node_aware,
        )  # fmt: skip
