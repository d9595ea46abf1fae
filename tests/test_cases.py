"""Every backend solves every hand-checked case of elasticopt.testing.cases to its known optimum."""

import math

import highspy  # noqa: F401  -- CI must fail, not skip, without the solver extras
import ortools  # noqa: F401
import pyomo  # noqa: F401
import pyscipopt  # noqa: F401
import pytest

from elasticopt.models import compile_problem, reduce_table
from elasticopt.solvers import Status, available_solvers, exact_solvers, get_backend, verify
from elasticopt.testing.brute import brute_force
from elasticopt.testing.cases import CASES, case

ALL = available_solvers()
EXPECTED = {"numpy-dp", "dp", "cpsat", "milp", "scip", "pyomo", "greedy"}


def test_every_backend_is_installed():
    assert EXPECTED <= set(ALL), f"missing backends: {EXPECTED - set(ALL)}"


def test_case_names_are_unique_and_findable():
    names = [c.name for c in CASES]
    assert len(names) == len(set(names))
    assert case("pisinger-strong").optimum == 86 << 20
    with pytest.raises(KeyError, match="lp-fractional"):
        case("nope")


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.name)
def test_hand_optimum_matches_brute_force(c):
    assert brute_force(c.problem) == c.optimum


@pytest.mark.parametrize("reduce", [True, False], ids=["reduced", "full"])
@pytest.mark.parametrize("solver", ALL)
@pytest.mark.parametrize("c", CASES, ids=lambda c: c.name)
def test_backend_reaches_known_optimum(c, solver, reduce):
    table = compile_problem(c.problem)
    if reduce:
        table = reduce_table(table)
    backend = get_backend(solver)
    sol = backend.solve(table, time_limit_s=60)
    rep = verify(c.problem, sol)
    assert rep.ok, rep.errors
    if c.optimum is None:
        assert sol.status is Status.INFEASIBLE, sol.message
        assert set(sol.infeasible_jobs) == set(c.infeasible_jobs)
        return
    if backend.exact:
        assert sol.status is Status.OPTIMAL, sol.message
        assert sol.objective == c.optimum
        assert math.isclose(sol.objective_value, c.value, rel_tol=1e-12, abs_tol=1e-12)
        assert sol.bound == c.optimum
    else:
        assert sol.status is Status.FEASIBLE
        assert sol.objective <= c.optimum


def test_greedy_falls_into_the_lp_trap():
    """The marginal-gain heuristic is not exact: it picks the best-rate job and gets 30, not 38."""
    from elasticopt.solvers import solve

    sol = solve(case("lp-fractional").problem, "greedy")
    assert sol.status is Status.FEASIBLE and sol.objective_value == 30.0
    assert set(exact_solvers()) >= EXPECTED - {"greedy"}
