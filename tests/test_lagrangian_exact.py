"""The exact (rational) Lagrangian bound and its reduced-cost test, against brute force and the plain DP."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elasticopt.generate import FAMILIES, generate_instance
from elasticopt.models import compile_problem, reduce_table
from elasticopt.solvers.dp.reduced_costs import make_fixing, reduced_cost_fixing
from elasticopt.solvers.dp.integer_bound import exact_bound, exact_value
from elasticopt.solvers import Status, solve, verify
from elasticopt.testing.brute import brute_force
from elasticopt.testing.strategies import general_problems, problems, tiny_general_problems, tiny_problems


def _reference_l(table, lam: Fraction) -> Fraction:
    """L(λ) written out job by job in exact fractions (the rule, not the vectorised code)."""
    total = sum(lam * int(g) for g in table.capacities) if table.n_types == 1 else None
    assert total is not None
    for j in range(table.n_jobs):
        scores = [Fraction(int(table.utility[j, o])) - lam * int(table.gpus[j, o])
                  for o in range(table.width) if table.valid[j, o]]
        if table.idle_allowed[j]:
            scores.append(Fraction(0))
        total += max(scores)
    return total


@given(problems(max_jobs=8, max_gpus=20, max_options=5), st.integers(0, 64), st.integers(1, 9))
def test_exact_value_is_the_bound_written_in_fractions(problem, num, den):
    table = compile_problem(problem)
    ev = exact_value(table, (num * int(table.scale) // 8,), den)
    if ev is None:  # a job that must run has no option (infeasible)
        return
    assert Fraction(ev.scaled, ev.den) == _reference_l(table, Fraction(ev.num[0], den))


@given(tiny_problems(), st.floats(0, 4096.0))
def test_exact_bound_at_any_lambda_is_an_upper_bound(problem, lam_units):
    table = compile_problem(problem)
    best = brute_force(problem)
    ev = exact_bound(table, lam_units * table.scale / 64)
    if best is None or ev is None:
        return
    assert ev.floor >= best


@given(tiny_general_problems(), st.lists(st.floats(0, 64.0), min_size=3, max_size=3))
def test_exact_bound_several_types_is_an_upper_bound(problem, lam):
    table = compile_problem(problem)
    best = brute_force(problem)
    ev = exact_bound(table, np.asarray(lam[: table.n_types]) * table.scale)
    if best is None or ev is None:
        return
    assert ev.floor >= best


@given(problems(max_jobs=10, max_gpus=24, max_options=5), st.data())
def test_exact_reduced_costs_keep_every_strictly_better_allocation(problem, data):
    """With any incumbent (here: a weak one), the core keeps the optimum: plain DP on the core == plain DP."""
    table = reduce_table(compile_problem(problem))
    ref = solve(table, "numpy-dp", reduce=False)
    if ref.status is not Status.OPTIMAL or not table.n_jobs or not table.width:
        return
    lam = data.draw(st.floats(0, 2.0)) * table.scale
    ev = exact_bound(table, lam)
    if ev is None:
        return
    # a weak feasible incumbent: every job that may idle idles, the rest on their fewest GPUs if that fits
    inc = np.full(table.n_jobs, -1, dtype=np.int64)
    must = np.flatnonzero(~table.idle_allowed)
    fewest = np.argmin(np.where(table.valid, table.gpus, 1 << 40), axis=1)
    inc[must] = fewest[must]
    if table.gpus_by_type(inc).sum() > table.capacity:
        return
    inc_val, _ = table.objective_of(inc)
    keep, idle_keep = ev.keep(table, inc_val)
    fix = make_fixing(table, ev.floor, inc, inc_val, keep, idle_keep)
    core = solve(fix.core, "numpy-dp", reduce=False)
    assert core.status is Status.OPTIMAL
    assert max(core.objective + fix.fixed_utility, inc_val) == ref.objective


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dp_with_exact_fixing_equals_plain_dp_on_every_family(family, seed):
    problem = generate_instance(family, 40, 96, seed)
    plain = solve(problem, "numpy-dp", reduce=False)
    dp = solve(problem, "dp")
    assert verify(problem, dp).ok
    assert dp.status is plain.status is Status.OPTIMAL
    assert dp.objective == plain.objective


@settings(max_examples=30)
@given(st.sampled_from(["mck-strongly", "mck-subset-sum"]), st.integers(0, 10_000))
def test_correlated_families_are_proven_by_the_bound(family, seed):
    """u = S (k + c): exact fixing on the correlated families agrees with the plain DP."""
    problem = generate_instance(family, 60, 600, seed)
    dp = solve(problem, "dp")
    ref = solve(problem, "numpy-dp")
    assert dp.status is Status.OPTIMAL and dp.objective == ref.objective
    assert verify(problem, dp).ok


@pytest.mark.parametrize("family", ["mck-strongly", "mck-subset-sum"])
def test_exact_bound_proves_the_filled_incumbent(family):
    """Hand-checked: u = S (k + c) on 300 jobs, 30,000 GPUs: λ = S exactly, the greedy fill uses every GPU
    and every job, so the incumbent meets the integer bound (the float one missed it by its margin)."""
    problem = generate_instance(family, 300, 30_000, 0)
    dp = solve(problem, "dp")
    assert dp.status is Status.OPTIMAL and dp.stats["dp_jobs"] == 0
    assert dp.objective == dp.stats["lagrangian_bound"] == solve(problem, "milp").objective


@given(general_problems(max_jobs=6))
def test_dp_on_general_problems_still_equals_numpy_dp(problem):
    a = solve(problem, "numpy-dp")
    b = solve(problem, "dp")
    assert a.status is b.status
    if a.status is Status.OPTIMAL:
        assert a.objective == b.objective


@given(problems(max_jobs=10, max_gpus=30, max_options=5), st.integers(0, 4096), st.sampled_from([1, 2, 3, 16]),
       st.integers(-3, 3))
def test_window_dp_equals_the_plain_dp_for_any_lambda_and_target(problem, num, den, offset):
    """Any λ >= 0 gives valid bounds, so the windowed DP must find the optimum whenever it beats ``beat``."""
    from elasticopt.solvers.dp.windowed import window_dp

    table = reduce_table(compile_problem(problem))
    if table.n_types != 1 or not table.width or not table.n_jobs:
        return
    ref = solve(table, "numpy-dp", reduce=False)
    lam_num = num * int(table.scale) // 64
    if ref.status is not Status.OPTIMAL:
        status, best, choice, _ = window_dp(table, lam_num, den, -(1 << 50), 1 << 30)
        assert status in ("none", "skip")  # skip: a job that must run has no option (fixing never gets here)
        return
    beat = ref.objective + offset * int(table.scale)  # below, at or above the optimum
    status, best, choice, _ = window_dp(table, lam_num, den, beat, 1 << 30)
    if ref.objective > beat:
        assert status == "found" and best == ref.objective
        value, _ = table.objective_of(choice)
        assert value == best
        assert int(table.gpus_by_type(choice).sum()) <= table.capacity
        assert all(table.valid[j, c] for j, c in enumerate(choice) if c >= 0)
        assert all(table.idle_allowed[j] for j, c in enumerate(choice) if c < 0)
    else:
        assert status == "none"


@pytest.mark.parametrize("family", ["mck-weakly", "mck-uncorrelated", "mck-strongly", "mck-subset-sum"])
@pytest.mark.parametrize("seed", [0, 1])
def test_dp_equals_plain_dp_on_pisingers_hard_classes(family, seed):
    """R = 1000, G = n R / 4 (Pisinger's hard classes): dp (exact fixing, slack fill, window) == plain dp == milp."""
    problem = generate_instance(family, 100, 25_000, seed, R=1000)
    a = solve(problem, "dp")
    b = solve(problem, "dp", window=False, fixing=False)
    c = solve(problem, "milp")
    assert a.status is b.status is c.status is Status.OPTIMAL
    assert a.objective == b.objective == c.objective
    assert verify(problem, a).ok


def test_the_window_runs_and_is_small_on_a_weakly_correlated_core():
    """Hand-checked figures: mck-weakly n=100, R=1000, seed 1 leaves a core of 39 jobs; the window keeps
    57,603 states where the plain DP fills 39 x 25,001."""
    problem = generate_instance("mck-weakly", 100, 25_000, 1, R=1000)
    a = solve(problem, "dp")
    assert a.stats["dp_jobs"] == 39
    assert 0 < a.stats["window_states"] < 39 * 25_001 // 10
    assert a.objective == solve(problem, "milp").objective


@given(problems(max_jobs=10, max_gpus=30, max_options=5), st.integers(0, 64))
def test_fill_slack_keeps_feasibility_and_never_loses_value(problem, lam_units):
    from elasticopt.solvers.dp.integer_bound import fill_slack

    table = reduce_table(compile_problem(problem))
    if table.n_types != 1 or not table.width or not table.n_jobs:
        return
    ev = exact_bound(table, lam_units * table.scale / 16)
    if ev is None:
        return
    # start from the Lagrangian choice's tied fewest-GPU options where they fit, else idle where allowed
    inc = np.where(table.idle_allowed, -1, np.argmin(np.where(table.valid, table.gpus, 1 << 40), axis=1))
    if int(table.gpus_by_type(inc).sum()) > table.capacity:
        return
    before, _ = table.objective_of(inc)
    out = fill_slack(table, ev, inc)
    after, _ = table.objective_of(out)
    assert int(table.gpus_by_type(out).sum()) <= table.capacity
    assert all(table.valid[j, c] for j, c in enumerate(out) if c >= 0)
    assert all(table.idle_allowed[j] for j, c in enumerate(out) if c < 0)
    changed = np.flatnonzero(out != inc)
    for j in changed:  # only moves among tied options: every moved job ends on a choice scoring its best
        score = 0 if out[j] < 0 else int(ev.scores[j, out[j]])
        assert score == int(ev.best[j])
    assert int(table.gpus_by_type(out).sum()) >= int(table.gpus_by_type(inc).sum())
    if (out != inc).any():
        assert after > before or (after == before and ev.num[0] == 0)
