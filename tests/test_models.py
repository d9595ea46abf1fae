"""The shared model: validation, compile (hand-computed utilities), reductions."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from elasticopt.errors import ValidationError
from elasticopt.models import Cluster, Job, MeasuredThroughput, Problem, Running, compile_problem, reduce_table
from elasticopt.solvers import solve
from elasticopt.models.reductions import compile_reduced
from elasticopt.testing.strategies import general_problems, problems

S = 1 << 20


def mt(*rows):
    return MeasuredThroughput.from_rows(rows)


def test_cluster_validation():
    with pytest.raises(ValidationError, match=r"cluster.gpus: expected an integer >= 0, found -1"):
        Cluster(-1)
    with pytest.raises(ValidationError, match="cluster.gpus_per_node"):
        Cluster(4, 0)


def test_job_validation_names_field_rule_and_value():
    tp = mt((1, 32, 10.0))
    with pytest.raises(ValidationError, match=r"job 'x'.batch_max: expected an integer >= batch_min \(64\), found 32"):
        Job("x", tp, 64, 32, 32)
    with pytest.raises(ValidationError, match=r"job 'x'.weight: expected a finite number > 0, found -1"):
        Job("x", tp, 32, 32, 32, weight=-1)
    with pytest.raises(ValidationError, match=r"job.id"):
        Job("", tp, 32, 32, 32)
    with pytest.raises(ValidationError, match=r"samples/s finite and > 0"):
        mt((1, 32, -5.0))


def test_problem_validation():
    j = Job("a", mt((1, 32, 10.0)), 32, 32, 32)
    with pytest.raises(ValidationError, match=r"jobs\[1\].id: expected a unique id"):
        Problem(Cluster(4), (j, j))
    with pytest.raises(ValidationError, match="objective: expected one of speedup, throughput, completion"):
        Problem(Cluster(4), (j,), objective="fastest")
    with pytest.raises(ValidationError, match=r"jobs\[0\].remaining_samples"):
        Problem(Cluster(4), (j,), objective="completion")
    with pytest.raises(ValidationError, match="priority"):
        Problem(Cluster(4), (j,), priority=("zz",))


def test_options_rules():
    # (3, 96) infeasible: 96/3 = 32 > max_local 16 ; (2, 33) not divisible ; (8, 128) above gpus_max
    tp = mt((1, 16, 10.0), (2, 32, 18.0), (2, 33, 18.0), (3, 96, 30.0), (4, 64, 30.0), (8, 128, 50.0))
    j = Job("a", tp, 16, 128, 16, gpus_max=4)
    assert [(k, b) for k, b, _ in j.options()] == [(1, 16), (2, 32), (4, 64)]
    assert [(k, b) for k, b, _ in j.options(gpus_cap=2)] == [(1, 16), (2, 32)]


def test_compile_speedup_by_hand():
    # best per-GPU rate R = 100 (k=1); v = T / R
    a = Job("a", mt((1, 32, 100.0), (2, 64, 180.0), (4, 128, 300.0)), 32, 128, 32)
    t = compile_problem(Problem(Cluster(4), (a,)))
    assert t.scale == S and t.tie_scale == 1
    assert t.gpus[0].tolist() == [1, 2, 4]
    assert t.utility[0].tolist() == [S, round(1.8 * S), 3 * S]
    assert t.idle_allowed.tolist() == [True]


def test_compile_throughput_completion_weight_penalty():
    tp = mt((1, 32, 100.0), (2, 64, 180.0))
    a = Job("a", tp, 32, 64, 32, running=Running(1, 32), remaining_samples=1000.0, weight=2.0)
    t = compile_problem(Problem(Cluster(4), (a,), objective="throughput", rescale_penalty=10.0))
    assert t.value[0].tolist() == [200.0, 350.0]  # 2*100 ; 2*180 - 10 (not current)
    assert t.current_option.tolist() == [0]
    assert t.idle_allowed.tolist() == [False]
    t = compile_problem(Problem(Cluster(4), (a,), objective="completion", allow_preemption=True))
    assert np.allclose(t.value[0], [0.2, 0.36])
    assert t.idle_allowed.tolist() == [True]


def test_scale_lowered_for_large_totals():
    jobs = tuple(Job(f"j{i}", mt((1, 1, 1e9)), 1, 1, 1) for i in range(8))
    t = compile_problem(Problem(Cluster(8), jobs, objective="throughput"))
    assert t.scale < S
    assert t.scale & (t.scale - 1) == 0  # a power of two
    assert int(t.utility.max(axis=1).sum()) < 2**52


def test_priority_bonus_breaks_ties_only():
    tp = mt((1, 8, 5.0))
    jobs = tuple(Job(f"j{i}", tp, 8, 8, 8) for i in range(3))
    p = Problem(Cluster(2), jobs, priority=("j2", "j0", "j1"))
    sol = solve(p, "numpy-dp")
    assert {j for j, a in sol.allocation.items() if a} == {"j2", "j0"}
    sol = solve(Problem(Cluster(2), jobs, priority=("j1", "j2", "j0")), "dp")
    assert {j for j, a in sol.allocation.items() if a} == {"j1", "j2"}
    # a larger value still beats a better rank
    better = Job("j0", mt((1, 8, 5.0), (2, 16, 10.5)), 8, 16, 8)  # 2.1 on 2 GPUs > 1 + 1
    p2 = Problem(Cluster(2), (better, jobs[1]), priority=("j1", "j0"))
    assert solve(p2, "dp").allocation["j0"] == (2, 16)


def test_reductions_by_hand():
    # k=2 has two batches: keep the better; k=4 is not above k=2 -> dropped
    tp = mt((1, 32, 100.0), (2, 64, 150.0), (2, 32, 170.0), (4, 128, 160.0))
    a = Job("a", tp, 32, 128, 32)
    t = compile_problem(Problem(Cluster(16), (a,), objective="throughput"))
    r = reduce_table(t)
    assert [(k, b) for k, b, _ in r.options_of(0)] == [(1, 32), (2, 32)]
    assert r.capacity == 2  # clipped to the most GPUs the job can use
    assert r.stats["options_before"] == 4 and r.stats["options_after"] == 2


def test_reductions_keep_current_batch_on_ties():
    tp = mt((2, 32, 100.0), (2, 64, 100.0))
    a = Job("a", tp, 32, 64, 32, running=Running(2, 64))
    r = reduce_table(compile_problem(Problem(Cluster(4), (a,), objective="throughput")))
    assert [(k, b) for k, b, _ in r.options_of(0)] == [(2, 64)]
    assert r.current_option.tolist() == [0]


@given(problems(max_jobs=7, max_gpus=12))
def test_reductions_leave_the_optimum_unchanged(problem):
    t = compile_problem(problem)
    ref = solve(t, "numpy-dp", reduce=False)
    for flags in ({}, {"best_batch": False}, {"dominance": False}, {"clip_capacity": False}):
        red = solve(reduce_table(t, **flags), "numpy-dp", reduce=False)
        assert red.status == ref.status
        assert red.objective == ref.objective


def _assert_same_table(a, b):
    from elasticopt.models.table import OPTION_ARRAYS

    for name in OPTION_ARRAYS + ("idle_allowed", "current_option", "capacities"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y), name
    for name in ("job_ids", "capacity", "scale", "tie_scale", "running_ids", "types", "pools"):
        assert getattr(a, name) == getattr(b, name), name
    assert dict(a.stats) == dict(b.stats)


@given(st.one_of(problems(), general_problems(max_jobs=6, max_types=3, max_nodes=4, max_per_node=8)))
def test_compile_reduced_is_compile_then_reduce(problem):
    # the one-pass path solve() takes equals the two steps, array by array (or fails the same way)
    try:
        two = reduce_table(compile_problem(problem))
    except ValidationError as exc:
        with pytest.raises(ValidationError) as got:
            compile_reduced(problem)
        assert str(got.value) == str(exc)
        return
    _assert_same_table(compile_reduced(problem), two)


def test_compile_is_unchanged_when_the_block_cache_is_cleared(monkeypatch):
    # the shared option blocks are dropped when the cache is full: a compile that fills it gets the same table
    from elasticopt.generate import generate_instance
    from elasticopt.models import options

    problem = generate_instance("paper", 60, 64, 3)
    ref = compile_problem(problem)
    monkeypatch.setattr(options, "_CACHE_MAX", 2)
    options._CACHE.clear()
    for _ in range(2):  # the first compile fills the cache past its limit, the second starts from empty
        _assert_same_table(compile_problem(problem), ref)


@given(general_problems())
def test_keep_drops_exactly_the_options_a_job_limit_drops(problem):
    """``compile_problem(problem, keep=...)`` = the problem whose jobs' limits drop the same options:
    a mask k <= 2 is the table of gpus_max = min(gpus_max, 2) (problems without running jobs)."""
    import dataclasses

    from hypothesis import assume

    assume(all(j.running is None for j in problem.jobs))  # (a Running above the limit: another table's case)
    capped = dataclasses.replace(problem, jobs=tuple(
        dataclasses.replace(j, gpus_max=2 if j.gpus_max is None else min(j.gpus_max, 2)) for j in problem.jobs
        if j.gpus_min <= 2))
    assume(len(capped.jobs) == len(problem.jobs) and problem.jobs)
    a = compile_problem(problem, keep=lambda rows: rows.gpus <= 2)
    b = compile_problem(capped)
    for name in ("gpus", "batch", "utility", "value", "samples_per_s", "valid", "gpu_type", "packed",
                 "current_option", "idle_allowed"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert (a.scale, a.tie_scale, a.stats) == (b.scale, b.tie_scale, b.stats)
    assert np.array_equal(compile_reduced(problem, keep=lambda rows: rows.gpus <= 2).utility,
                          compile_reduced(capped).utility)
