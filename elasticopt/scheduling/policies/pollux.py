"""``pollux``: Pollux-style fairness (Qiao et al., OSDI'21) — power mean of goodput speedups, p = -1.

Pollux maximises ``FITNESS_p = (sum_j w_j S_j^p)^(1/p)`` over allocations, S_j
the job's goodput speedup, with p = -1: maximising it is minimising
``sum_j w_j / S_j``, a sum of one term per job, so the exact solvers solve it
exactly (Pollux itself searches with a genetic algorithm).  Here

- ``S_j(k, b) = T(k, b) E(b) / R_j``, R_j the job's best goodput per GPU
  (S = 1 on its most efficient GPU), batch chosen with the GPUs;
- restart discount: a running job's change is worth its speedup averaged over
  the rest of the job *including* the restart,
  ``S * (rem / g) / (restart_cost_s + rem / g)`` (g its progress rate there);
- a queued job left idle counts as speedup ``idle_speedup``; the option
  value is ``w_j (1 / idle_speedup - 1 / S)`` (idle = 0), so admitting a job
  outweighs any growth, as the power mean with p = -1 demands.
"""

from __future__ import annotations

import numpy as np

from elasticopt.errors import ValidationError
from elasticopt.scheduling.hysteresis import Hysteresis
from elasticopt.scheduling.optioncache import Columns, register_vector_objective
from elasticopt.scheduling.policies.base import register_policy, require_one_type
from elasticopt.scheduling.policies.elastic import ElasticPolicy
from elasticopt.scheduling.state import Allocation, Snapshot

__all__ = ["PolluxFairnessPolicy", "pollux_values"]


def pollux_values(c: Columns, idle_speedup: float) -> np.ndarray:
    """Option values of the p = -1 fitness with restart discount (module docstring)."""
    g = c.t * c.e
    per = np.where(c.valid, g / np.where(c.valid, c.k, 1), -np.inf)
    best = per.max(axis=1) if per.shape[1] else np.zeros(per.shape[0])
    best = np.where(np.isfinite(best) & (best > 0), best, 1.0)
    speed = g / best[:, None]
    rate = np.where(c.good[:, None], g, c.t)
    with np.errstate(divide="ignore", invalid="ignore"):
        left_s = c.rem[:, None] / rate
        discount = np.where(c.running[:, None] & ~c.cur, left_s / (c.cost[:, None] + left_s), 1.0)
        value = c.w[:, None] * (1.0 / idle_speedup - 1.0 / (speed * discount))
    return np.where(c.valid, value, 0.0)


@register_policy("pollux")
class PolluxFairnessPolicy(ElasticPolicy):
    """The elastic policy with the Pollux-style p = -1 fitness as its (separable) objective.

    Parameters
    ----------
    idle_speedup
        Speedup a waiting job counts as (> 0; default 0.01).
    solver, priority, payback, allow_preemption, time_limit_s, solver_options, hysteresis
        As :class:`~elasticopt.scheduling.policies.elastic.ElasticPolicy`.

    Refuses a cluster of several GPU types (ValidationError): its fitness is an
    objective of the per-job option cache, which serves one pool.
    """

    name = "pollux"

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
    ):
        if not (0 < float(idle_speedup) < 1):
            raise ValidationError("pollux.idle_speedup", "a number in (0, 1)", idle_speedup)
        self.idle_speedup = float(idle_speedup)
        objective = register_vector_objective(f"pollux-p-1:{self.idle_speedup!r}",  # one per idle_speedup value
                                              lambda c: pollux_values(c, self.idle_speedup), replace=True)
        super().__init__(
            solver=solver, objective=objective, priority=priority, rescale_penalty=0.0, payback=payback,
            allow_preemption=allow_preemption, time_limit_s=time_limit_s, solver_options=solver_options,
            hysteresis=hysteresis, incremental=True,
        )  # fmt: skip

    def allocate(self, snapshot: Snapshot) -> Allocation:
        """As :meth:`ElasticPolicy.allocate`, on a cluster of one GPU type only."""
        require_one_type(snapshot, self.name)
        return super().allocate(snapshot)
