"""Solver backends for the option table (docs/design.md §3). Installed as ``elasticopt.solvers``.

Every backend is registered by name (:func:`get_backend`); libraries are
imported inside the solve call, so this package imports without them.
"""

from elasticopt.solvers.base import Backend, Capabilities, Outcome
from elasticopt.solvers.registry import (
    available_solvers,
    capabilities,
    exact_solvers,
    get_backend,
    placement_solvers,
    register,
    registered_solvers,
)
from elasticopt.solvers.solution import Reason, Solution, Status
from elasticopt.solvers.verify import VerifyReport, verify

# built-in backends register themselves on import (no solver library is imported here)
from elasticopt.solvers.dp import numpy_backend as _numpy_dp  # noqa: E402,F401
from elasticopt.solvers.dp import jax_backend as _jax_dp  # noqa: E402,F401
from elasticopt.solvers import cpsat as _cpsat  # noqa: E402,F401
from elasticopt.solvers import milp as _milp  # noqa: E402,F401
from elasticopt.solvers import scip as _scip  # noqa: E402,F401
from elasticopt.solvers import pyomo_model as _pyomo_model  # noqa: E402,F401
from elasticopt.solvers import greedy as _greedy  # noqa: E402,F401
from elasticopt.solvers.api import solve  # noqa: E402

__all__ = [
    "Backend",
    "Capabilities",
    "Outcome",
    "Reason",
    "Solution",
    "Status",
    "VerifyReport",
    "available_solvers",
    "capabilities",
    "exact_solvers",
    "get_backend",
    "placement_solvers",
    "register",
    "registered_solvers",
    "solve",
    "verify",
]
