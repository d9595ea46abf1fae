"""elasticopt: elastic scaling of deep-learning training jobs on shared GPU clusters.

Pick both the number of GPUs and the batch size of every job with exact
solvers that agree (docs/design.md). The public surface::

    import elasticopt
    problem = elasticopt.load_instance("instances/tiny.json")
    solution = elasticopt.solve(problem, "dp")
    assert elasticopt.verify(problem, solution).ok
"""

from elasticopt.errors import (
    ElasticoptError,
    InstanceError,
    SolverError,
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
from elasticopt.solvers import (
    Solution,
    Status,
    VerifyReport,
    available_solvers,
    get_backend,
    registered_solvers,
    solve,
    verify,
)

__version__ = "0.1.0"

__all__ = [
    "Cluster",
    "ElasticoptError",
    "InstanceError",
    "Job",
    "MeasuredThroughput",
    "OptionTable",
    "Problem",
    "Running",
    "Solution",
    "SolverError",
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
]
