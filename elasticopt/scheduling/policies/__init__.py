"""Scheduling policies: one per module, all reachable through the registry.

Built in: ``elastic``, ``elastic-goodput``, ``fixed-batch``, ``static``,
``static-backfill``, ``greedy``, and the field's baselines ``optimus``,
``tiresias`` and ``pollux``.  Plug in your own with :func:`register_policy` or as
``module:Class`` (see :mod:`elasticopt.scheduling.policies.base`).
"""

from elasticopt.scheduling.policies.base import (
    Policy,
    available_policies,
    get_policy,
    priority_order,
    register_policy,
)
from elasticopt.scheduling.policies.elastic import ElasticPolicy, payback_filter
from elasticopt.scheduling.policies.elastic_goodput import ElasticGoodputPolicy
from elasticopt.scheduling.policies.fixed_batch import FixedBatchPolicy
from elasticopt.scheduling.policies.greedy import GreedyPolicy
from elasticopt.scheduling.policies.optimus import OptimusPolicy
from elasticopt.scheduling.policies.pollux import PolluxFairnessPolicy
from elasticopt.scheduling.policies.static import StaticPolicy
from elasticopt.scheduling.policies.tiresias import TiresiasPolicy

__all__ = [
    "Policy",
    "available_policies",
    "get_policy",
    "priority_order",
    "register_policy",
    "ElasticPolicy",
    "ElasticGoodputPolicy",
    "FixedBatchPolicy",
    "GreedyPolicy",
    "OptimusPolicy",
    "PolluxFairnessPolicy",
    "StaticPolicy",
    "TiresiasPolicy",
    "payback_filter",
]
