"""The DP over node counts (solvers/placed_dp.py) against brute force, the placed branch and bound and milp."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elasticopt import solve
from elasticopt.models import problem_from_dict
from elasticopt.models.table_placement import place_table
from elasticopt.models.table import compile_problem
from elasticopt.solvers.placed_dp import BEAM, best_placed_exact, placed_dp
from elasticopt.solvers.placed_search import best_placed
from elasticopt.solvers.solution import Reason, Status
from elasticopt.solvers.verify import verify
from elasticopt.testing.brute import brute_force


def _problem(g: int, free: list[int], jobs: list[list[tuple[int, bool, int]]], idle: bool = True,
             types: tuple[str, ...] = ("a",)):
    """One pool of len(free) nodes of g GPUs (free[i] free on node i); per job its options (k, packed, value)."""
    rows = []
    for i, opts in enumerate(jobs):
        t = types[i % len(types)]
        tail = lambda p: ["packed"] if p else []  # noqa: E731
        job = {"id": f"j{i}", "throughput": [[t, k, k, float(k)] + tail(p) for k, p, _ in opts],
               "values": [[t, k, k, float(v)] + tail(p) for k, p, v in opts],
               "batch": {"min": 1, "max": 1024, "max_local": 1024}}
        if not idle:  # a running job without preemption must run
            job["running"] = {"gpus": opts[0][0], "batch": opts[0][0], "type": t}
        rows.append(job)
    pools = {t: {"nodes": len(free), "gpus_per_node": g, "free": list(free)} for t in types}
    return problem_from_dict({"format": "elasticopt-instance/2", "objective": "value", "jobs": rows,
                              "allow_preemption": idle, "cluster": {"pools": pools}})


@st.composite
def _instances(draw):
    g = draw(st.integers(2, 4))
    n_nodes = draw(st.integers(1, 4))
    free = draw(st.lists(st.integers(0, g), min_size=n_nodes, max_size=n_nodes))
    cap = n_nodes * g
    n_jobs = draw(st.integers(1, 4))
    jobs = []
    for _ in range(n_jobs):
        ks = draw(st.lists(st.integers(1, cap), min_size=1, max_size=3, unique=True))
        jobs.append([(k, draw(st.booleans()), draw(st.integers(1, 40))) for k in ks])
    return g, free, jobs


def _table_value(table, choice: np.ndarray) -> int:
    rows = np.flatnonzero(choice >= 0)
    return int(table.utility[rows, choice[rows]].sum())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_instances())
def test_the_dp_over_node_counts_is_the_brute_force_optimum_and_places(inst):
    g, free, jobs = inst
    p = _problem(g, free, jobs)
    table = compile_problem(p)
    got = placed_dp(table)
    assert got is not None
    want = brute_force(p)
    assert got.value == want  # every job may idle: something (all idle) always places
    assert _table_value(table, got.choice) == got.value
    pl = place_table(table, got.choice, counts=got.counts)
    assert pl.status == "placed"
    assert place_table(table, got.choice).status == "placed"  # the one placer agrees it places
    # given any incumbent, only better allocations come back, and none is missed
    for inc in (want - 1, want, want + 1):
        again = placed_dp(table, incumbent=inc)
        assert again is not None
        assert (again.value == want) if inc < want else (again.choice is None)
    # the beam pass finds an allocation that places, never above the optimum
    beam = placed_dp(table, beam=1)
    assert beam is not None and beam.choice is not None and beam.value <= want
    assert place_table(table, beam.choice, counts=beam.counts).status == "placed"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_instances())
def test_the_proven_search_matches_the_placed_branch_and_bound(inst):
    g, free, jobs = inst
    table = compile_problem(_problem(g, free, jobs))
    got, ref = best_placed_exact(table), best_placed(table)
    assert got.proven and ref.proven and got.value == ref.value


def test_a_job_that_must_run_and_cannot_place_leaves_nothing():
    """Two 3-GPU packed jobs that must run, on two nodes with 2 free GPUs each: nothing places."""
    table = compile_problem(_problem(4, [2, 2], [[(3, True, 5)], [(3, True, 5)]], idle=False))
    got = placed_dp(table)
    assert got is not None and got.choice is None and got.value is None


def test_a_pool_with_no_free_gpu_idles_every_job():
    table = compile_problem(_problem(4, [0, 0], [[(1, False, 3), (4, True, 9)], [(2, True, 4)]]))
    got = placed_dp(table)
    assert got.value == 0 and (got.choice == -1).all()


def test_several_gpu_types_are_left_to_the_branch_and_bound():
    table = compile_problem(_problem(4, [4, 4], [[(3, True, 5)], [(3, True, 5)]], types=("a", "b")))
    assert placed_dp(table) is None
    assert best_placed_exact(table).proven  # the branch and bound answers


def test_pollux_shaped_totals_optimum_that_does_not_place_is_solved_by_the_dp_and_agrees_with_milp():
    """Pollux's shape (16 x 4 GPUs, options 1..64 packed): the totals' 31 + 30 + 3 = 64 does not place."""
    rows = [["gpu", k, 32 * k, 100.0 * k, "packed"] for k in range(1, 65)]
    jobs = [{"id": f"j{i}", "throughput": rows, "batch": {"min": 32, "max": 2048, "max_local": 32},
             "values": [["gpu", k, 32 * k, k + (10.0 if k == want else 0.0), "packed"] for k in range(1, 65)]}
            for i, want in enumerate((31, 30, 3, 0))]
    p = problem_from_dict({"format": "elasticopt-instance/2", "objective": "value", "jobs": jobs,
                           "cluster": {"pools": {"gpu": {"nodes": 16, "gpus_per_node": 4}}}})
    s = solve(p, "dp")
    assert s.status is Status.OPTIMAL and s.reason is Reason.SOLVED and verify(p, s).ok
    assert "DP over node counts" in s.message and s.unplaced
    assert s.objective == solve(p, "milp").objective
    assert BEAM >= 1
