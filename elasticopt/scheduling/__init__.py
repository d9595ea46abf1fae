"""Scheduling: policies, the autoscaler, the simulated executor and the simulator (docs/design.md §4).

::

    events (arrival, completion, tick) -> Autoscaler -> Policy.allocate(snapshot)
       -> diff against current -> actions (start, rescale, stop) -> Executor

The same :class:`Autoscaler` drives :class:`SimulatedExecutor` (virtual time)
and the launcher's executor (real processes).
"""

from elasticopt.scheduling.actions import Action, pays_back, plan_actions
from elasticopt.scheduling.adoption import JobHistory
from elasticopt.scheduling.autoscaler import Autoscaler, Decision, check_allocation
from elasticopt.scheduling.executor import Executor, ExecutorListener, JobProgress, Phase
from elasticopt.scheduling.jobspec import JobSpec
from elasticopt.scheduling.metrics import Metrics, compute_metrics
from elasticopt.scheduling.policies import (
    ElasticPolicy,
    FixedBatchPolicy,
    GreedyPolicy,
    Policy,
    StaticPolicy,
    available_policies,
    get_policy,
    register_policy,
)
from elasticopt.scheduling.records import JobRecord, TimelinePoint, read_jobs_csv, write_jobs_csv, write_summary_json
from elasticopt.scheduling.simulated import SimulatedExecutor
from elasticopt.scheduling.simulator import SimulationConfig, SimulationResult, simulate
from elasticopt.scheduling.state import Allocation, JobState, Snapshot, option_error

__all__ = [
    "Action", "pays_back", "plan_actions",
    "Autoscaler", "Decision", "JobHistory", "check_allocation",
    "Executor", "ExecutorListener", "JobProgress", "JobSpec", "Phase",
    "Metrics", "compute_metrics",
    "ElasticPolicy", "FixedBatchPolicy", "GreedyPolicy", "Policy", "StaticPolicy",
    "available_policies", "get_policy", "register_policy",
    "JobRecord", "TimelinePoint", "read_jobs_csv", "write_jobs_csv", "write_summary_json",
    "SimulatedExecutor",
    "SimulationConfig", "SimulationResult", "simulate",
    "Allocation", "JobState", "Snapshot", "option_error",
]
