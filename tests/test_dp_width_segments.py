"""The dp's jobs grouped by option count, each group at its own kernel width (solvers/dp/jax_kernels.py
``width_segments``, ``JaxDP._segmented``): exact against the numpy DP and brute force on every generator family,
with and without a time limit's split chunks, and the grouping's own rules."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elasticopt.generate import FAMILIES, generate_instance
from elasticopt.solvers import Status, solve, verify
from elasticopt.solvers.dp import jax_backend, jax_kernels
from elasticopt.solvers.dp.jax_kernels import COMPILE_OPS, bucket, chunk_plan, width_segments
from elasticopt.testing.brute import brute_force
from elasticopt.testing.strategies import problems, tiny_problems


def every_bucket(counts, width, length):
    """A grouping forced on every table: one group per bucket of the option counts (the cost model's choice
    aside, so that small tables take the grouped path too)."""
    b = np.minimum([bucket(max(int(c), 1), 1, 4) for c in counts], width)
    groups = [(int(w), np.flatnonzero(b == w)) for w in sorted(set(b.tolist()))]
    return groups if len(groups) > 1 else None


@pytest.fixture
def grouped(monkeypatch):
    """The forced grouping for the whole test (the same for every generated input: safe to share)."""
    monkeypatch.setattr(jax_backend, "width_segments", every_bucket)


def _dp_grouped_used(problem) -> bool:
    """Whether the plain one-type DP ran on grouped arrays (two groups or more)."""
    from elasticopt.models import compile_problem

    table = compile_problem(problem)
    if table.n_types != 1 or not table.n_jobs:
        return False
    counts = (table.valid & (table.gpus <= table.capacity)).sum(axis=1)
    return len(every_bucket(counts, bucket(max(table.width, 1), 1, 4), 8)) > 1


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(problems(max_jobs=25, max_gpus=40, max_options=9))
def test_grouped_dp_equals_the_numpy_dp(grouped, problem):
    a = solve(problem, "numpy-dp")
    b = solve(problem, "dp", fixing=False, window=False)
    assert a.status is b.status and a.objective == b.objective, b.message
    assert verify(problem, b).ok


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tiny_problems())
def test_grouped_dp_equals_brute_force(grouped, problem):
    best = brute_force(problem)
    sol = solve(problem, "dp", fixing=False, window=False)
    assert verify(problem, sol).ok
    if best is None:
        assert sol.status is Status.INFEASIBLE
    else:
        assert sol.status is Status.OPTIMAL and sol.objective == best


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("seed", [0, 1])
def test_grouped_dp_on_every_family(grouped, monkeypatch, family, seed):
    """Every generator family, grouped, with the chunks a time limit splits (CLOCK_OPS made small) and without:
    the numpy DP's optimum."""
    problem = generate_instance(family, 60, 96, seed)
    want = solve(problem, "numpy-dp")
    got = solve(problem, "dp", fixing=False, window=False)
    assert got.status is want.status and got.objective == want.objective
    assert verify(problem, got).ok
    monkeypatch.setattr(jax_kernels, "CLOCK_OPS", 1 << 10)
    timed = solve(problem, "dp", fixing=False, window=False, time_limit_s=60)
    assert timed.status is want.status and timed.objective == want.objective


def test_grouping_is_used_by_the_tests():
    """The forced grouping really splits the test tables (a family with varied option counts)."""
    assert _dp_grouped_used(generate_instance("ladder", 60, 96, 0))


@settings(max_examples=200, deadline=None)
@given(counts=st.lists(st.integers(0, 40), min_size=1, max_size=3000), length=st.sampled_from([1088, 1 << 17, 1 << 20]))
def test_width_segments_partition_the_jobs_at_a_width_that_fits_them(counts, length):
    counts = np.asarray(counts)
    width = bucket(max(int(counts.max()), 1), 1, 4)
    segs = width_segments(counts, width, length)
    if segs is None:
        return
    rows = np.concatenate([r for _, r in segs])
    assert sorted(rows.tolist()) == list(range(counts.size))  # every job once
    ws = [w for w, _ in segs]
    assert ws == sorted(set(ws)) and ws[-1] <= width
    for w, r in segs:
        assert (np.maximum(counts[r], 1) <= w).all()


def test_width_segments_keep_one_width_where_a_group_saves_less_than_a_compile():
    """A scheduling loop's table (1,000 jobs, 1,024 GPUs) is never grouped; a ladder-like 10^4 x 10^6 one is."""
    rng = np.random.default_rng(0)
    small = rng.integers(1, 16, size=1000)
    assert width_segments(small, 16, 1088) is None
    uniform = np.full(10_000, 16)
    assert width_segments(uniform, 16, 1 << 20) is None
    big = rng.integers(1, 16, size=10_000)
    segs = width_segments(big, 16, 1 << 20)
    assert segs is not None and len(segs) > 1
    grouped = sum(sum(chunk_plan(r.size, w << 20)) * w for w, r in segs)
    assert grouped < 0.9 * sum(chunk_plan(10_000, 16 << 20)) * 16
    assert COMPILE_OPS > 0
