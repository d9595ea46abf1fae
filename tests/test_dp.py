"""The two DP backends against brute force and each other; INFEASIBLE handling."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elasticopt.models import Cluster, Job, MeasuredThroughput, Problem, Running, compile_problem, load_instance
from elasticopt.solvers import Status, solve, verify
from elasticopt.solvers.dp.jax_backend import CHUNKS, DISPATCH_OPS, _kernels, bucket, chunk_plan
from elasticopt.solvers.dp.value_type import ValueType
from elasticopt.testing.brute import brute_force
from elasticopt.testing.strategies import problems, tiny_problems

S = 1 << 20


@given(tiny_problems())
def test_dp_backends_equal_brute_force(problem):
    best = brute_force(problem)
    for name in ("numpy-dp", "dp"):
        sol = solve(problem, name)
        rep = verify(problem, sol)
        assert rep.ok, rep.errors
        if best is None:
            assert sol.status is Status.INFEASIBLE
            assert sol.infeasible_jobs
        else:
            assert sol.status is Status.OPTIMAL
            assert sol.objective == best == sol.bound


@given(problems(max_jobs=25, max_gpus=40, max_options=6))
def test_jax_dp_equals_numpy_dp(problem):
    a = solve(problem, "numpy-dp")
    assert verify(problem, a).ok
    for fixing in (True, False):
        b = solve(problem, "dp", fixing=fixing)
        assert a.status is b.status
        assert a.objective == b.objective
        assert verify(problem, b).ok


@given(problems(max_jobs=12, max_gpus=30, max_options=6))
def test_lagrangian_bound_and_fixing_are_exact(problem):
    from elasticopt.models import reduce_table
    from elasticopt.solvers.dp.reduced_costs import reduced_cost_fixing

    table = reduce_table(compile_problem(problem))
    ref = solve(table, "numpy-dp", reduce=False)
    fix = reduced_cost_fixing(table)
    if fix is None:
        return
    assert ref.status is Status.OPTIMAL  # fixing only gives up on infeasible tables
    assert fix.incumbent_value <= ref.objective <= fix.bound
    core = solve(fix.core, "numpy-dp", reduce=False)
    assert core.status is Status.OPTIMAL
    assert core.objective + fix.fixed_utility == ref.objective


def test_tiny_instance_hand_checked():
    # a: 1->100, 2->180, 4->260 ; b: 1->50, 2->95 ; 4 GPUs: a2+b2 = 275 beats a4 = 260
    p = load_instance("instances/tiny.json")
    for name in ("numpy-dp", "dp"):
        sol = solve(p, name)
        assert sol.status is Status.OPTIMAL
        assert sol.objective == 275 * S
        assert sol.objective_value == pytest.approx(275.0)
        assert dict(sol.allocation) == {"a": (2, 64), "b": (2, 64)}


def test_infeasible_instance_names_running_jobs():
    p = load_instance("instances/infeasible.json")
    for name in ("numpy-dp", "dp"):
        sol = solve(p, name)
        assert sol.status is Status.INFEASIBLE
        assert set(sol.infeasible_jobs) == {"big-a", "big-b"}
        assert "big-a" in sol.message and "capacity is 4" in sol.message
        assert verify(p, sol).ok


def test_running_job_that_cannot_fit_at_all_is_infeasible():
    j = Job("r", MeasuredThroughput({(8, 64): 10.0}), 64, 64, 64, gpus_min=8, running=Running(8, 64))
    sol = solve(Problem(Cluster(4), (j,)), "dp")
    assert sol.status is Status.INFEASIBLE and sol.infeasible_jobs == ("r",)


def test_zero_gpus_and_empty_problem():
    j = Job("q", MeasuredThroughput({(1, 8): 10.0}), 8, 8, 8)
    for name in ("numpy-dp", "dp"):
        sol = solve(Problem(Cluster(0), (j,)), name)
        assert sol.status is Status.OPTIMAL and sol.objective == 0 and sol.allocation == {"q": None}
        sol = solve(Problem(Cluster(4), ()), name)
        assert sol.status is Status.OPTIMAL and sol.objective == 0 and dict(sol.allocation) == {}


def test_verify_catches_a_wrong_solution():
    from dataclasses import replace

    p = load_instance("instances/tiny.json")
    sol = solve(p, "dp")
    bad = replace(sol, allocation={"a": (4, 128), "b": (2, 64)})
    rep = verify(p, bad)
    assert not rep.ok and any("6 GPUs" in e for e in rep.errors)
    rep = verify(p, replace(sol, objective=sol.objective + 1))
    assert not rep.ok and any("objective" in e for e in rep.errors)
    rep = verify(p, replace(sol, status=Status.INFEASIBLE))
    assert not rep.ok


def test_bucket_shapes():
    assert bucket(1) == 8 and bucket(8) == 8 and bucket(9) == 16
    for x in (100, 1000, 1025, 4097, 5000):
        b = bucket(x)
        assert b >= x and b <= x * 1.07 + 8
        b4 = bucket(x, 8, 4)
        assert b4 >= x and b4 <= x * 1.26 + 8
    assert bucket(1000, 8, 4) == 1024 and bucket(4097) == 4352


def test_jax_dp_does_not_recompile_across_job_counts_and_clipping():
    rng = np.random.default_rng(1)

    def prob(n, G):
        jobs = []
        for i in range(n):
            pts = {(k, 32 * k): float(rng.uniform(1, 10) * k**0.8) for k in (1, 2, 4)}
            jobs.append(Job(f"j{i}", MeasuredThroughput(pts), 32, 128, 32))
        return Problem(Cluster(G), tuple(jobs))

    for n in (590, 130, 9, 3):  # warm every chunk size: at this width one chunk of 1024, 512, 64, 8 (chunk_plan, priced)
        for fixing in (False, True):
            solve(prob(n, 60), "dp", fixing=fixing)
    before = _kernels.cache_info()
    sizes = {key: _kernels(*key)._cache_size() for key in _kernel_keys()}
    for n in (3, 5, 9, 40, 70, 130, 300, 590, 1000):  # different job counts; light load clips the capacity
        for fixing in (False, True):
            sol = solve(prob(n, 60), "dp", fixing=fixing)
            assert sol.status is Status.OPTIMAL
    after = _kernels.cache_info()
    assert after.misses == before.misses  # no new kernel shape
    assert {key: _kernels(*key)._cache_size() for key in _kernel_keys()} == sizes  # no new XLA compile


def _kernel_keys():
    return [(c, 3, bucket(61, 8, 16), "int8", ValueType("int32", 2, False)) for c in CHUNKS]


def test_chunk_plan():
    assert chunk_plan(0) == [8] and chunk_plan(1) == [8] and chunk_plan(9) == [8, 8]
    assert chunk_plan(600) == [512, 64, 8, 8, 8]
    for n in range(0, 1200, 37):
        plan = chunk_plan(n)
        assert sum(plan) >= n and sum(plan) - n <= 8 and set(plan) <= set(CHUNKS)


@settings(max_examples=200, deadline=None)
@given(n=st.integers(0, 3000), ops_per_job=st.integers(1, 1 << 24))
def test_chunk_plan_by_cost(n, ops_per_job):
    # the plan priced by dispatches and padded jobs covers n with the sizes of CHUNKS and costs at most the
    # greedy plan's (which is among its candidates)
    plan = chunk_plan(n, ops_per_job)
    assert sum(plan) >= n and set(plan) <= set(CHUNKS)
    cost = lambda p: len(p) * DISPATCH_OPS + sum(p) * ops_per_job  # noqa: E731
    assert cost(plan) <= cost(chunk_plan(n))
    assert sum(plan) - n < CHUNKS[0]  # never a whole chunk of padding


def test_chunk_plan_pads_where_dispatches_cost_more():
    # n = 1000, K = 8, G = 1024 (length 1088): one chunk of 1024 instead of 13 chunks
    assert chunk_plan(1000, 8 * 1088) == [1024]
    assert chunk_plan(600, 8 * 1088) == [512, 64, 64]
    # G = 10^5: a padded job costs more than a dispatch: greedy
    assert chunk_plan(1000, 8 * 100_352) == chunk_plan(1000)


def test_regression_instance_from_the_simulator():
    # a 3-job decision of the simulator on which an early fixing version of dp returned 80 GPUs on 32
    p = load_instance("tests/data/dp_regression_3jobs.json")
    ref = solve(p, "numpy-dp")
    for fixing in (True, False):
        sol = solve(p, "dp", fixing=fixing)
        assert sol.status is Status.OPTIMAL and sol.objective == ref.objective
        assert verify(p, sol).ok
