"""The dp on several GPU types: the type split and the restricted-table incumbent (docs/design.md §3).

Integer objectives only, against brute force over the option table and the
plain multi-type DP (``numpy-dp``; ``dp:fixing=false,split=false``).
"""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elasticopt.generate import generate_instance
from elasticopt.models import compile_problem
from elasticopt.models.table import OptionTable
from elasticopt.solvers import Status, solve, verify
from elasticopt.solvers.dp.integer_bound import exact_bound
from elasticopt.solvers.dp.lagrangian_bound import LagArrays, lagrangian_bound
from elasticopt.solvers.dp.type_split import combine, coupled_rows, restricted, split_incumbent, type_groups
from elasticopt.solvers.registry import get_backend

S = 8  # utilities are multiples of S plus small offsets: ties within and across types are frequent


@st.composite
def typed_tables(draw, max_jobs: int = 6, max_width: int = 3, max_types: int = 3, max_cap: int = 5):
    """A random option table on 2-3 GPU types (a type may have 0 GPUs), with many exact ties."""
    T = draw(st.integers(2, max_types))
    n = draw(st.integers(1, max_jobs))
    K = draw(st.integers(1, max_width))
    caps = np.array([draw(st.integers(0, max_cap)) for _ in range(T)], dtype=np.int64)
    gpus = np.array([[draw(st.integers(1, 3)) for _ in range(K)] for _ in range(n)], dtype=np.int64)
    gtype = np.array([[draw(st.integers(0, T - 1)) for _ in range(K)] for _ in range(n)], dtype=np.int64)
    # u = S k (rate S: tied with idle at λ = S) or a nearby value
    util = gpus * S + np.array([[draw(st.sampled_from([0, 0, -1, 1, -S, 3])) for _ in range(K)]
                                for _ in range(n)], dtype=np.int64)
    # option 0 mostly valid (a job with no option at all: idle, or infeasible where it must run)
    valid = np.array([[draw(st.booleans()) or (o == 0 and draw(st.integers(0, 7)) > 0) for o in range(K)]
                      for _ in range(n)])
    idle = np.array([draw(st.integers(0, 4)) > 0 for _ in range(n)])
    z = np.zeros((n, K))
    return OptionTable(
        job_ids=tuple(f"j{i}" for i in range(n)), capacity=int(caps.sum()), scale=1, tie_scale=1,
        gpus=gpus, batch=np.ones((n, K), dtype=np.int64), utility=util, value=z.copy(), samples_per_s=z.copy(),
        valid=valid, idle_allowed=idle, current_option=np.full(n, -1, dtype=np.int64),
        gpu_type=gtype, packed=np.zeros((n, K), dtype=bool), types=tuple(f"t{t}" for t in range(T)),
        capacities=caps)


def brute(table: OptionTable) -> int | None:
    """Best integer objective over every choice that fits each type (None: none fits)."""
    per_job = []
    for j in range(table.n_jobs):
        c = [int(o) for o in np.flatnonzero(table.valid[j])]
        if table.idle_allowed[j]:
            c.append(-1)
        per_job.append(c)
    best = None
    caps = np.asarray(table.capacities)
    for combo in itertools.product(*per_job):
        ch = np.array(combo, dtype=np.int64)
        if (table.gpus_by_type(ch) <= caps).all():
            v = table.objective_of(ch)[0]
            best = v if best is None or v > best else best
    return None if best is None else int(best)


def run_dp(table: OptionTable, **options) -> tuple[Status, int | None, np.ndarray | None, dict]:
    b = get_backend("dp")
    opts = b.check_options(options)
    out = b.extract(table, None, b.run(b.build(table, opts), None, opts))
    return out.status, (None if out.choice is None else int(table.objective_of(out.choice)[0])), out.choice, out.stats


def check(table: OptionTable, status, value, choice) -> None:
    ref = brute(table)
    if ref is None:
        assert status is Status.INFEASIBLE
        return
    assert status is Status.OPTIMAL and value == ref
    assert (table.gpus_by_type(choice) <= np.asarray(table.capacities)).all()
    rows = np.flatnonzero(choice >= 0)
    assert table.valid[rows, choice[rows]].all() and (table.idle_allowed | (choice >= 0)).all()


@settings(max_examples=150, deadline=None)
@given(typed_tables())
def test_dp_with_split_and_fixing_equals_brute_force(table):
    check(table, *run_dp(table)[:3])


@settings(max_examples=150, deadline=None)
@given(typed_tables())
def test_split_dp_alone_equals_brute_force_and_the_plain_dp(table):
    """Every job in the core (no fixing): only the split; and the plain multi-type DP agrees."""
    status, value, choice, _ = run_dp(table, fixing=False)
    check(table, status, value, choice)
    plain = run_dp(table, fixing=False, split=False)
    assert plain[0] is status and plain[1] == value


@settings(max_examples=100, deadline=None)
@given(typed_tables(max_jobs=7))
def test_restricted_incumbent_is_feasible_and_never_above_the_optimum(table):
    if not (table.valid.any(axis=1) | table.idle_allowed).all():
        return
    lag = LagArrays(table)
    _, lam, _ = lagrangian_bound(table, lag=lag)
    ev = exact_bound(table, lam)
    if ev is None:
        return
    sub = restricted(table, ev.scores)
    assert not (sub.valid & ~table.valid).any()  # a restriction: only options of table
    b = get_backend("dp")
    opts = b.check_options({})
    inc = split_incumbent(table, ev.scores, lambda t: b._solve_inner(t, opts, None))
    ref = brute(table)
    if inc is not None:
        assert ref is not None and (table.gpus_by_type(inc) <= np.asarray(table.capacities)).all()
        assert table.objective_of(inc)[0] <= ref
        assert ev.floor >= ref  # (the exact bound bounds it)


@settings(max_examples=100, deadline=None)
@given(typed_tables(max_jobs=8))
def test_type_groups_partition_the_rows(table):
    x, groups, none = type_groups(table)
    rows = np.sort(np.concatenate([x, none] + groups))
    assert (rows == np.arange(table.n_jobs)).all()
    assert coupled_rows(table)[x].all()
    for t, g in enumerate(groups):
        assert (np.where(table.valid[g], table.gpu_type[g], t) == t).all()


def test_combine_by_hand():
    """F_X on a 2x3 box (types of 1 and 2 GPUs), f_0 and f_1: the best split is p = (1, 0)."""
    fx = np.array([0, 5, 6, 4, 9, 10])  # F_X[p0, p1] row-major, dims (2, 3)
    f0 = np.array([0, 3])  # G_0 = 1
    f1 = np.array([0, 1, 7])  # G_1 = 2
    best, p = combine(fx, (2, 3), np.array([1, 2]), [f0, f1], -(1 << 60))
    # p = (0, 0): 0 + 3 + 7 = 10; (1, 0): 4 + 0 + 7 = 11; (1, 2): 10 + 0 + 0 = 10; (0, 1): 5 + 3 + 1 = 9
    assert (best, p) == (11, 3)


def _table(T, caps, rows, idle=None):
    """rows: per job a list of (gpus, type, utility)."""
    n, K = len(rows), max(len(r) for r in rows)
    gpus = np.ones((n, K), dtype=np.int64)
    ty = np.zeros((n, K), dtype=np.int64)
    u = np.zeros((n, K), dtype=np.int64)
    valid = np.zeros((n, K), dtype=bool)
    for j, r in enumerate(rows):
        for o, (k, t, v) in enumerate(r):
            gpus[j, o], ty[j, o], u[j, o], valid[j, o] = k, t, v, True
    z = np.zeros((n, K))
    idle = np.ones(n, dtype=bool) if idle is None else np.asarray(idle)
    return OptionTable(job_ids=tuple(f"j{i}" for i in range(n)), capacity=int(sum(caps)), scale=1, tie_scale=1,
                       gpus=gpus, batch=np.ones((n, K), dtype=np.int64), utility=u, value=z.copy(),
                       samples_per_s=z.copy(), valid=valid, idle_allowed=idle,
                       current_option=np.full(n, -1, dtype=np.int64), gpu_type=ty,
                       packed=np.zeros((n, K), dtype=bool), types=tuple(f"t{t}" for t in range(T)),
                       capacities=np.asarray(caps, dtype=np.int64))


def test_tie_across_types_must_run():
    """The hetero pattern: a job that must run scores the same on 1 GPU of type 0 and 4 of type 1; type 0 is
    better used by the others (1 GPU at 10 each), so the optimum puts it on type 1 (13 + 3 x 10 = 43)."""
    rows = [[(1, 0, 1), (4, 1, 13)]] + [[(1, 0, 10)]] * 3
    table = _table(2, [3, 4], rows, idle=[False, True, True, True])
    status, value, choice, _ = run_dp(table)
    assert status is Status.OPTIMAL and value == 43 == brute(table)
    assert choice[0] == 1


def test_a_type_with_zero_gpus():
    rows = [[(1, 0, 5), (1, 1, 9)], [(2, 1, 9), (1, 2, 4)], [(1, 2, 4)]]
    table = _table(3, [2, 0, 1], rows)
    status, value, choice, _ = run_dp(table)
    assert status is Status.OPTIMAL and value == brute(table) == 9


def test_everything_fixed_by_the_bound():
    """Every job on 1 GPU at the same rate, more jobs than GPUs: the bound alone proves the optimum."""
    rows = [[(1, 0, 10), (2, 0, 20)], [(1, 1, 10)], [(1, 1, 10)], [(1, 0, 10)]]
    table = _table(2, [2, 1], rows)
    status, value, _, stats = run_dp(table)
    assert status is Status.OPTIMAL and value == 30 == brute(table)
    assert stats["dp_jobs"] == 0


def test_infeasible_must_run_jobs():
    rows = [[(2, 0, 10), (3, 1, 9)], [(2, 0, 10), (3, 1, 9)]]  # both need the 2 GPUs of type 0
    table = _table(2, [2, 2], rows, idle=[False, False])
    assert run_dp(table)[0] is Status.INFEASIBLE and brute(table) is None


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_hetero_family_equals_the_plain_dp(seed):
    problem = generate_instance("hetero", 30, 48, seed)
    table = compile_problem(problem)
    a, b = run_dp(table), run_dp(table, fixing=False, split=False)
    assert a[0] is b[0] and a[1] == b[1]
    ref = solve(problem, "numpy-dp")
    dp = solve(problem, "dp")
    assert dp.status is ref.status and dp.objective == ref.objective
    assert verify(problem, dp).ok


def test_hetero_1000_jobs_equals_milp_with_a_small_coupled_part():
    """Past the plain multi-type DP's state space (1000 jobs x 257^2 x 385 states): milp's optimum."""
    problem = generate_instance("hetero", 1000, 1024, 0)
    dp = solve(problem, "dp")
    ref = solve(problem, "milp")
    assert dp.status is Status.OPTIMAL is ref.status and dp.objective == ref.objective
    assert verify(problem, dp).ok


def test_hetero_10000_jobs_time_limit_and_optimum():
    """n=10,000 (the plain multi-type DP refused 9,265 jobs x 3.47e7 states): under a tiny limit the answer is
    LIMIT/time_limit with the Lagrangian incumbent (never state_space); without one, OPTIMAL with a small
    coupled part, within the Lagrangian bound."""
    from elasticopt.solvers import Reason

    problem = generate_instance("hetero", 10_000, 1024, 0)
    limited = solve(problem, "dp", time_limit_s=0.01)
    assert limited.status in (Status.LIMIT, Status.OPTIMAL)
    if limited.status is Status.LIMIT:
        assert limited.reason is Reason.TIME_LIMIT and limited.objective is not None
    assert verify(problem, limited).ok
    dp = solve(problem, "dp")
    assert dp.status is Status.OPTIMAL and verify(problem, dp).ok
    assert dp.stats["coupled_jobs"] < 200 and dp.objective <= dp.stats["lagrangian_bound"]
    assert dp.objective >= limited.objective
