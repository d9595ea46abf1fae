"""Status plus reason (solvers/solution.py Reason) and backends' capabilities as data (solvers/base.py)."""

from __future__ import annotations

import pytest

from elasticopt.generate import generate_instance
from elasticopt.models import problem_from_dict
from elasticopt.models.table import compile_problem
from elasticopt.solvers.placed_search import best_placed
from elasticopt.solvers import (
    Capabilities,
    Reason,
    Status,
    available_solvers,
    capabilities,
    get_backend,
    placement_solvers,
    registered_solvers,
    solve,
    verify,
)


def test_every_backend_declares_capabilities_and_placement_solvers_read_them():
    for name in registered_solvers():
        caps = capabilities(name)
        assert isinstance(caps, Capabilities) and caps.placement in ("exact", "checked", "heuristic")
        if caps.placement == "exact":
            assert get_backend(name).exact
        if caps.warm_start:
            assert "hint" in type(get_backend(name)).default_options  # a warm start is an option the backend checks
    ranked = [n for n in ("milp", "cpsat", "pyomo") if n in available_solvers()]
    assert placement_solvers() == ranked


def test_pyomo_and_milp_maps_name_real_library_statuses():
    import highspy
    from pyomo.opt import TerminationCondition

    from elasticopt.solvers import milp, pyomo_model

    assert set(pyomo_model.STATUS_MAP) <= set(TerminationCondition.__members__)
    assert pyomo_model.STATUS_MAP["maxTimeLimit"] == (Status.LIMIT, Reason.TIME_LIMIT)
    assert set(milp.REASON_MAP) == {k for k, v in milp.STATUS_MAP.items() if v is Status.LIMIT}
    assert set(milp.REASON_MAP) <= set(highspy.HighsModelStatus.__members__)


def test_a_dp_state_space_past_max_cells_says_so():
    p = generate_instance("paper", 50, 256, 0)
    sol = solve(p, "numpy-dp", max_cells=10)
    assert sol.status is Status.LIMIT and sol.reason is Reason.STATE_SPACE
    assert sol.to_dict()["reason"] == "state_space"
    assert solve(p, "numpy-dp").reason is Reason.SOLVED


def _unplaceable() -> object:
    """Three jobs whose best totals (3 + 3 + 2 = 8 GPUs on two 4-GPU nodes, all packed) cannot be placed."""
    jobs = [{"id": j, "throughput": [["a", k, k, float(k), "packed"]], "values": [["a", k, k, float(k), "packed"]],
             "batch": {"min": 1, "max": 64, "max_local": 64}} for j, k in (("x", 3), ("y", 3), ("z", 2))]
    return problem_from_dict({"format": "elasticopt-instance/2", "objective": "value", "jobs": jobs,
                              "cluster": {"pools": {"a": {"nodes": 2, "gpus_per_node": 4}}}})


def test_an_unplaceable_totals_optimum_is_searched_then_proven_or_named():
    p = _unplaceable()
    s = solve(p, "dp")
    assert s.status is Status.OPTIMAL and s.reason is Reason.SOLVED and verify(p, s).ok
    assert s.objective == solve(p, "milp").objective and "proven by" in s.message
    assert s.stats["placed_search_steps"] > 0


def _pollux_31_30_3() -> object:
    """Pollux's shape (16 nodes x 4 GPUs, options 1..64 packed): the totals' optimum 31 + 30 + 3 does not place,
    and the branch and bound under it takes several hundred steps."""
    rows = [["gpu", k, 32 * k, 100.0 * k, "packed"] for k in range(1, 65)]
    jobs = [{"id": f"j{i}", "throughput": rows, "batch": {"min": 32, "max": 2048, "max_local": 32},
             "values": [["gpu", k, 32 * k, k + (10.0 if k == want else 0.0), "packed"] for k in range(1, 65)]}
            for i, want in enumerate((31, 30, 3, 0))]
    return problem_from_dict({"format": "elasticopt-instance/2", "objective": "value", "jobs": jobs,
                              "cluster": {"pools": {"gpu": {"nodes": 16, "gpus_per_node": 4}}}})


def test_the_time_limit_reaches_the_placement_search():
    """A limit already spent when placement starts: the search under the totals' optimum stops at its first look
    at the clock; the reason says time, the totals' allocation is kept for a re-solve, and what it found places."""
    p = _pollux_31_30_3()
    full = solve(p, "dp")
    assert full.status is Status.OPTIMAL
    assert best_placed(compile_problem(p)).steps > 256  # the branch and bound, where the DP gives up, reads the clock
    s = solve(p, "dp", time_limit_s=1e-9)
    assert s.status is Status.LIMIT and s.reason is Reason.TIME_LIMIT and s.unplaced
    assert verify(p, s).ok and s.bound >= full.objective
    assert s.objective is None or s.objective <= full.objective


@pytest.mark.parametrize("name", ["milp", "cpsat"])
def test_exact_placement_backends_take_a_hint_where_placement_matters(name):
    p = _unplaceable()
    d = solve(p, "dp")
    s = solve(p, name, hint=d)
    assert s.status is Status.OPTIMAL and s.objective == d.objective and verify(p, s).ok
