"""The allocation problem, defined once (docs/design.md §2), and its instance files (§7).

Installed as ``elasticopt.models``.
"""

from elasticopt.models.instance import (
    FORMAT,
    dumps_instance,
    instance_schema,
    load_instance,
    problem_from_dict,
    problem_to_dict,
    save_instance,
)
from elasticopt.models.problem import OBJECTIVES, Cluster, Job, Problem, Running
from elasticopt.models.reductions import compile_reduced, reduce_table
from elasticopt.models.table import OptionTable, compile_problem, job_values
from elasticopt.profiles.throughput import MeasuredThroughput, ThroughputModel, power_of_two_grid

__all__ = [
    "FORMAT",
    "OBJECTIVES",
    "Cluster",
    "Job",
    "MeasuredThroughput",
    "OptionTable",
    "Problem",
    "Running",
    "ThroughputModel",
    "compile_problem",
    "compile_reduced",
    "dumps_instance",
    "instance_schema",
    "job_values",
    "load_instance",
    "power_of_two_grid",
    "problem_from_dict",
    "problem_to_dict",
    "reduce_table",
    "save_instance",
]
