"""``elastic-goodput``: the elastic policy on goodput, T(k, b) * E(b), instead of throughput."""

from __future__ import annotations

from elasticopt.scheduling.hysteresis import Hysteresis
from elasticopt.scheduling.policies.base import register_policy
from elasticopt.scheduling.policies.elastic import ElasticPolicy

__all__ = ["ElasticGoodputPolicy"]


@register_policy("elastic-goodput")
class ElasticGoodputPolicy(ElasticPolicy):
    """:class:`~elasticopt.scheduling.policies.elastic.ElasticPolicy` with ``objective="goodput"``.

    Each option is worth its goodput speedup: samples/s times the job's
    statistical efficiency at that batch (``JobSpec.statistical_efficiency``),
    over the job's best goodput per GPU.  A large batch now has to earn its
    lower efficiency.  Options: as ``ElasticPolicy`` (without ``objective``).
    """

    name = "elastic-goodput"
    # as before the rate floors (ElasticPolicy.START_FLOOR): they were measured on elastic only
    DUE_WEIGHT, START_FLOOR, DUE_FLOOR = 10.0, 0.0, 0.0

    def __init__(
        self,
        solver: str = "dp",
        priority: str = "arrival",
        rescale_penalty: float = 0.3,
        payback: bool = True,
        allow_preemption: bool = False,
        time_limit_s: float | None = None,
        solver_options: dict | None = None,
        hysteresis: Hysteresis | None = None,
        incremental: bool = True,
    ):
        super().__init__(
            solver=solver, objective="goodput", priority=priority, rescale_penalty=rescale_penalty,
            payback=payback, allow_preemption=allow_preemption, time_limit_s=time_limit_s,
            solver_options=solver_options, hysteresis=hysteresis, incremental=incremental,
        )  # fmt: skip
