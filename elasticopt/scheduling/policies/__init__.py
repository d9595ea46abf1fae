"""Scheduling policies: one per module, all reachable through the registry.

Built in: ``elastic``, ``fixed-batch``, ``static``, ``static-backfill``,
``greedy``.  Plug in your own with :func:`register_policy` or as
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
from elasticopt.scheduling.policies.fixed_batch import FixedBatchPolicy
from elasticopt.scheduling.policies.greedy import GreedyPolicy
from elasticopt.scheduling.policies.static import StaticPolicy

__all__ = [
    "Policy",
    "available_policies",
    "get_policy",
    "priority_order",
    "register_policy",
    "ElasticPolicy",
    "FixedBatchPolicy",
    "GreedyPolicy",
    "StaticPolicy",
    "payback_filter",
]
