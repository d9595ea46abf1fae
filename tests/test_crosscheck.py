"""Cross-check: every installed exact backend reaches numpy-dp's integer optimum.

Compared are integer objectives and INFEASIBLE verdicts, never allocations
(ties are legitimate).  Every returned solution must pass ``verify``.  The
solver extras are imported plainly: CI fails (not skips) without them.
Example counts follow the hypothesis profile (ELASTICOPT_HYPOTHESIS_PROFILE).
"""

import highspy  # noqa: F401
import ortools  # noqa: F401
import pyomo  # noqa: F401
import pyscipopt  # noqa: F401
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elasticopt.models import Cluster, Job, MeasuredThroughput, Problem, Running, compile_problem, reduce_table
from elasticopt.solvers import Status, exact_solvers, get_backend, verify
from elasticopt.testing.strategies import problems

REFERENCE = "numpy-dp"
OTHERS = [s for s in exact_solvers() if s != REFERENCE]
assert {"dp", "cpsat", "milp", "scip", "pyomo"} <= set(OTHERS), f"exact backends installed: {exact_solvers()}"

_N = settings.default.max_examples


def check_against_reference(problem, solver: str, reduce: bool) -> None:
    table = compile_problem(problem)
    if reduce:
        table = reduce_table(table)
    ref = get_backend(REFERENCE).solve(table)
    sol = get_backend(solver).solve(table, time_limit_s=60)
    for s in (ref, sol):
        rep = verify(problem, s)
        assert rep.ok, (s.solver, rep.errors)
    assert ref.status in (Status.OPTIMAL, Status.INFEASIBLE)
    if ref.status is Status.INFEASIBLE:
        assert sol.status is Status.INFEASIBLE, (sol.status, sol.message)
        assert set(sol.infeasible_jobs) == set(ref.infeasible_jobs)
        return
    assert sol.status is Status.OPTIMAL, (sol.status, sol.message)
    assert sol.objective == ref.objective, (solver, sol.objective, ref.objective)
    assert sol.bound is None or sol.bound >= ref.objective


@pytest.mark.parametrize("solver", OTHERS)
@settings(max_examples=_N)
@given(problem=problems(), reduce=st.booleans())
def test_same_optimum_as_numpy_dp(solver, problem, reduce):
    check_against_reference(problem, solver, reduce)


@pytest.mark.parametrize("solver", [s for s in OTHERS if s != "pyomo"])  # Pyomo builds slowly: kept small
@settings(max_examples=max(5, _N // 6))
@given(problem=problems(max_jobs=40, max_gpus=64, max_options=8), reduce=st.booleans())
def test_same_optimum_on_larger_problems(solver, problem, reduce):
    check_against_reference(problem, solver, reduce)


@settings(max_examples=_N)
@given(problem=problems())
def test_greedy_is_feasible_never_optimal(problem):
    table = reduce_table(compile_problem(problem))
    ref = get_backend(REFERENCE).solve(table)
    sol = get_backend("greedy").solve(table)
    rep = verify(problem, sol)
    assert rep.ok, rep.errors
    if ref.status is Status.INFEASIBLE:
        assert sol.status is Status.INFEASIBLE
        return
    assert sol.status is Status.FEASIBLE
    assert sol.objective <= ref.objective
    for j, jid in enumerate(table.job_ids):  # jobs that may not idle always get an option
        if not table.idle_allowed[j]:
            assert sol.allocation[jid] is not None


@pytest.mark.parametrize("solver", OTHERS)
@pytest.mark.parametrize("reduce", [False, True])
def test_a_job_that_may_not_idle_and_fits_nowhere_is_infeasible_for_every_backend(solver, reduce):
    # Found by the thorough hypothesis profile: SCIP left out the empty "= 1" row of the job with no option
    # (2 GPUs on a 1-GPU cluster, running, preemption off), answered an allocation that idles it, and verify
    # turned that into ERROR.  Every backend must say INFEASIBLE and name the same jobs as numpy-dp.
    cluster = Cluster(1, 1)
    jobs = (
        Job("j0", MeasuredThroughput({(1, 1): 1.0}), 1, 1, 1, running=Running(1, 1), remaining_samples=1.0),
        Job("j1", MeasuredThroughput({(2, 2): 1.0}), 2, 2, 1, gpus_min=2, running=Running(2, 2),
            remaining_samples=1.0),
    )
    problem = Problem(cluster, jobs, "speedup", allow_preemption=False)
    check_against_reference(problem, solver, reduce)
    ref = get_backend(REFERENCE).solve(compile_problem(problem))
    assert ref.status is Status.INFEASIBLE and "j1" in ref.infeasible_jobs
