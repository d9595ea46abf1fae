"""The dp honours ``time_limit_s`` (issue 21): it stops between job chunks and inside the windowed DP.

Stopped, it returns ``LIMIT`` with ``Reason.TIME_LIMIT``: the Lagrangian incumbent and bound where fixing ran
(verified, bound >= objective), no allocation where it did not.
"""

from __future__ import annotations

import time

import numpy as np

from elasticopt.generate import generate_instance
from elasticopt.models import compile_problem
from elasticopt.models.reductions import reduce_table
from elasticopt.solvers import Reason, Status, capabilities, solve, verify
from elasticopt.solvers.dp.jax_backend import CHUNKS, CLOCK_OPS, timed_plan
from elasticopt.solvers.dp.windowed import window_dp


def test_the_dp_declares_a_time_limit_and_an_incumbent():
    caps = capabilities("dp")
    assert caps.time_limit and caps.incumbent


def test_timed_plan_keeps_the_padded_jobs_and_bounds_each_chunk():
    plan = [512, 512, 64, 8, 8]
    assert timed_plan(plan, 10**6, None) == plan
    for ops in (1, 10**4, 10**5, 10**6, 10**7, 10**9):
        fine = timed_plan(plan, ops, 0.0)
        assert sum(fine) == sum(plan)
        assert all(c in CHUNKS for c in fine)
        assert all(c * ops <= CLOCK_OPS or c == CHUNKS[-1] for c in fine)


def test_the_plain_dp_stops_at_the_time_limit():
    """mck-strongly 2000 x 10^6 without fixing: the plain DP fills 2000 x 10^6 states (many seconds here)."""
    problem = generate_instance("mck-strongly", 2000, 1_000_000, 0)
    solve(problem, "dp", fixing=False, time_limit_s=0.01)  # compiles the kernels
    t = time.perf_counter()
    sol = solve(problem, "dp", fixing=False, time_limit_s=0.05)
    wall = time.perf_counter() - t
    assert sol.status is Status.LIMIT and sol.reason is Reason.TIME_LIMIT
    assert sol.objective is None
    assert sol.solve_s < 1.0, sol.solve_s  # one chunk of ~CLOCK_OPS operations past the limit at most
    assert wall < 2.0, wall
    assert verify(problem, sol).ok


def test_stopped_with_fixing_it_returns_the_incumbent_and_the_bound():
    problem = generate_instance("mck-weakly", 2000, 200_000, 0)
    full = solve(problem, "dp", window=False)
    sol = solve(problem, "dp", window=False, time_limit_s=1e-6)
    assert full.status is Status.OPTIMAL
    assert sol.status is Status.LIMIT and sol.reason is Reason.TIME_LIMIT
    assert sol.objective is not None and sol.bound is not None
    assert sol.objective <= full.objective <= sol.bound
    assert verify(problem, sol).ok


def test_the_windowed_dp_looks_at_the_clock():
    problem = generate_instance("mck-weakly", 100, 25_000, 1, R=1000)
    table = reduce_table(compile_problem(problem))
    past = time.perf_counter() - 1.0
    # λ = 0 keeps every state: 100 jobs x 25,001 states, far past one look at the clock
    assert window_dp(table, 0, 1, -(1 << 50), 1 << 40, past)[0] == "time"
    status, best, choice, _ = window_dp(table, 0, 1, -(1 << 50), 1 << 40, None)
    assert status == "found"
    assert best == solve(problem, "numpy-dp").objective
    assert np.all(choice >= -1)


def test_the_run_gets_what_the_build_left_of_the_limit():
    """The limit covers build, run and placement: a slow build leaves the run less (at least MIN_RUN_S)."""
    import time as _time

    from elasticopt.models import compile_problem, load_instance
    from elasticopt.solvers.base import MIN_RUN_S
    from elasticopt.solvers.greedy import Greedy

    seen = []

    class SlowBuild(Greedy):
        def build(self, table, options):
            _time.sleep(0.3)
            return super().build(table, options)

        def run(self, model, time_limit_s, options):
            seen.append(time_limit_s)
            return super().run(model, time_limit_s, options)

    table = compile_problem(load_instance("instances/tiny.json"))
    SlowBuild().solve(table, time_limit_s=1.0)
    SlowBuild().solve(table, time_limit_s=0.1)  # the build alone takes longer
    SlowBuild().solve(table)
    assert 0.5 < seen[0] <= 0.7 and seen[1] == MIN_RUN_S and seen[2] is None
