"""elasticopt: elastic scaling of deep-learning training jobs on shared GPU clusters.

Pick both the number of GPUs and the batch size of every job with exact
solvers that agree (docs/design.md). The public surface::

    import elasticopt
    problem = elasticopt.load_instance("instances/tiny.json")
    solution = elasticopt.solve(problem, "dp")
    assert elasticopt.verify(problem, solution).ok

and the simulation API (``simulate``, ``SimulationConfig``, the policies and
``register_policy``), ``register_solver`` for your own backend and
``register_profile`` for your own throughput data, ``register_objective`` for
your own objective; docs/api.md lists every
name, docs/guides/ shows how to extend each registry.
"""

import logging as _logging

from elasticopt.errors import (
    DuplicateNameError,
    ElasticoptError,
    InstanceError,
    SolverError,
    SolverOptionError,
    SolverUnavailableError,
    UnknownSolverError,
    ValidationError,
)
from elasticopt.models import (
    Cluster,
    Job,
    MeasuredThroughput,
    OptionTable,
    Problem,
    Running,
    ThroughputModel,
    compile_problem,
    load_instance,
    reduce_table,
    save_instance,
)
from elasticopt.models.objectives import Objective, objective_names, register_objective
from elasticopt.profiles import TabularProfile, get_profile, profile_names, read_throughput_csv, register_profile
from elasticopt.scheduling import (
    Allocation,
    ElasticPolicy,
    FixedBatchPolicy,
    GreedyPolicy,
    JobSpec,
    JobState,
    Policy,
    SimulationConfig,
    SimulationResult,
    Snapshot,
    StaticPolicy,
    available_policies,
    get_policy,
    register_policy,
    simulate,
)
from elasticopt.solvers import (
    Backend,
    Outcome,
    Solution,
    Status,
    VerifyReport,
    available_solvers,
    get_backend,
    registered_solvers,
    solve,
    verify,
)
from elasticopt.solvers import register as register_solver

# a library logs through its own logger and leaves handlers to the application (the CLI adds one)
_logging.getLogger(__name__).addHandler(_logging.NullHandler())

__version__ = "0.1.0"

__all__ = [
    # problems and solving
    "Cluster",
    "DuplicateNameError",
    "ElasticoptError",
    "InstanceError",
    "Job",
    "MeasuredThroughput",
    "OptionTable",
    "Problem",
    "Running",
    "Solution",
    "SolverError",
    "SolverOptionError",
    "SolverUnavailableError",
    "Status",
    "ThroughputModel",
    "UnknownSolverError",
    "ValidationError",
    "VerifyReport",
    "available_solvers",
    "compile_problem",
    "get_backend",
    "load_instance",
    "reduce_table",
    "registered_solvers",
    "save_instance",
    "solve",
    "verify",
    # your own solver
    "Backend",
    "Outcome",
    "register_solver",
    # your own objective
    "Objective",
    "objective_names",
    "register_objective",
    # your own throughput data
    "TabularProfile",
    "get_profile",
    "profile_names",
    "read_throughput_csv",
    "register_profile",
    # simulation and policies
    "Allocation",
    "ElasticPolicy",
    "FixedBatchPolicy",
    "GreedyPolicy",
    "JobSpec",
    "JobState",
    "Policy",
    "SimulationConfig",
    "SimulationResult",
    "Snapshot",
    "StaticPolicy",
    "available_policies",
    "get_policy",
    "register_policy",
    "simulate",
]
