"""A hard time limit: backends whose libraries overrun their limit run in a forked process killed at the deadline.

solvers/isolation.py; docs/design.md §3. The backends here ignore their limit on purpose (sleeping, crashing,
starting a process of their own), so only the kill can end them.
"""

import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elasticopt import solve
from elasticopt.generate import generate_instance
from elasticopt.models import compile_problem
from elasticopt.solvers import Backend, Capabilities
from elasticopt.solvers.isolation import kill_grace_s
from elasticopt.solvers.solution import Reason, Status


class _Stubborn(Backend):
    """Sleeps ``sleep_s`` whatever its limit, then answers every job idle; declares it overruns."""

    name = "fake-stubborn"
    exact = False
    capabilities = Capabilities(time_limit=True, time_limit_overruns=True)
    default_options = {"sleep_s": 30.0, "crash": "", "pid_file": "", "own_pid_file": ""}

    def build(self, table, options):
        return table

    def run(self, model, time_limit_s, options):
        if options["own_pid_file"]:
            Path(options["own_pid_file"]).write_text(str(os.getpid()))
        if options["pid_file"]:  # a process of its own, as Pyomo starts cbc or glpk
            child = subprocess.Popen(["sleep", "60"])
            Path(options["pid_file"]).write_text(str(child.pid))
        if options["crash"] == "segv":
            import faulthandler

            faulthandler.disable()  # pytest's dump of this child's stack would only be noise
            os.kill(os.getpid(), signal.SIGSEGV)
        if options["crash"] == "exit":
            os._exit(3)
        if options["crash"] == "raise":
            raise KeyboardInterrupt  # not an Exception: Backend.solve does not catch it, the child reports it
        time.sleep(options["sleep_s"])
        return None

    def extract(self, table, model, raw):
        from elasticopt.solvers.base import Outcome

        return Outcome(Status.FEASIBLE, choice=np.full(table.n_jobs, -1))


@pytest.fixture(scope="module")
def small_table():
    return compile_problem(generate_instance("uniform", 10, 16, 0, running_fraction=0.0))  # every job may idle


def test_a_solve_that_ignores_its_limit_is_killed_at_limit_plus_grace(small_table):
    limit = 0.3
    t0 = time.perf_counter()
    sol = _Stubborn().solve(small_table, time_limit_s=limit)  # sleeps 30 s
    wall = time.perf_counter() - t0
    assert sol.status is Status.LIMIT and sol.reason is Reason.TIME_LIMIT and not sol.allocation
    assert "killed" in sol.message and "time limit of 0.3 s" in sol.message
    assert limit + kill_grace_s(limit) <= wall < limit + kill_grace_s(limit) + 2.0
    assert sol.stats["isolation"] == "fork" and sol.stats["killed_at_s"] >= limit + kill_grace_s(limit)


def test_isolated_answer_is_the_in_process_answer_timed_inside_the_child(small_table):
    sol = _Stubborn().solve(small_table, time_limit_s=5.0, sleep_s=0.0)
    assert sol.status is Status.FEASIBLE and sol.objective == 0
    assert sol.stats["isolation"] == "fork"
    assert 0 <= sol.stats["isolated_call_s"] < 5.0 and sol.stats["isolation_overhead_s"] >= 0
    inproc = _Stubborn().solve(small_table, time_limit_s=5.0, sleep_s=0.0, isolate=False)
    assert inproc.status is Status.FEASIBLE and "isolation" not in inproc.stats


@pytest.mark.parametrize("crash, expect", [("segv", "SIGSEGV"), ("exit", "exit code 3"),
                                           ("raise", "KeyboardInterrupt")])
def test_a_child_that_dies_or_raises_is_an_error_naming_why(small_table, crash, expect):
    sol = _Stubborn().solve(small_table, time_limit_s=5.0, crash=crash)
    assert sol.status is Status.ERROR and sol.reason is Reason.ERROR
    assert expect in sol.message and sol.solver == "fake-stubborn"


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2]
    except FileNotFoundError:
        return "gone"


def test_the_kill_reaches_processes_the_solver_started(small_table, tmp_path):
    pid_file = tmp_path / "pid"
    sol = _Stubborn().solve(small_table, time_limit_s=0.2, pid_file=str(pid_file))
    assert sol.status is Status.LIMIT
    pid = int(pid_file.read_text())
    for _ in range(50):  # the kill is asynchronous; a zombie (Z) waits for its reaper, it does not run
        if _state(pid) in ("gone", "Z"):
            break
        time.sleep(0.05)
    assert _state(pid) in ("gone", "Z"), f"the solver's own process {pid} outlived the kill"


def test_isolation_is_automatic_only_for_backends_that_overrun_with_a_limit():
    problem = generate_instance("mck-strongly", 50, 400, 0)
    assert solve(problem, "milp", time_limit_s=30).stats["isolation"] == "fork"
    assert "isolation" not in solve(problem, "milp").stats  # no limit: nothing to enforce
    assert "isolation" not in solve(problem, "milp", time_limit_s=30, isolate=False).stats
    assert "isolation" not in solve(problem, "cpsat", time_limit_s=30).stats  # CP-SAT stops at its limit
    assert "isolation" not in solve(problem, "dp", time_limit_s=30).stats


def test_without_fork_the_solve_runs_in_process_and_says_so(small_table, monkeypatch):
    import elasticopt.solvers.isolation as isolation

    monkeypatch.setattr(isolation, "fork_available", lambda: False)
    sol = _Stubborn().solve(small_table, time_limit_s=5.0, sleep_s=0.0)
    assert sol.status is Status.FEASIBLE and "soft limit" in sol.stats["isolation"]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(family=st.sampled_from(["paper", "mck-strongly", "hetero", "placement"]), seed=st.integers(0, 10_000))
def test_isolated_milp_proves_the_in_process_optimum(family, seed):
    problem = generate_instance(family, 12, 64, seed)
    iso = solve(problem, "milp", time_limit_s=60)
    inproc = solve(problem, "milp", time_limit_s=60, isolate=False)
    assert iso.stats["isolation"] == "fork"
    assert iso.status is inproc.status
    assert iso.objective == inproc.objective  # integer objectives: ties between allocations are legitimate


def test_bench_times_an_isolated_solve_inside_the_child():
    # the child's own timing of its call is the row's total: starting the process is the harness's cost
    from elasticopt.benchmarking import family_instances, run_benchmark
    from elasticopt.solvers.solution import Solution

    class Reported:
        name = "reported"

        def solve(self, table, *, time_limit_s=None):
            time.sleep(0.3)  # the parent's wall time, not what the row reports
            return Solution(Status.LIMIT, "reported", stats={"isolated_call_s": 0.123}, reason=Reason.TIME_LIMIT,
                            solve_s=0.1)

    res = run_benchmark([Reported()], family_instances(["uniform"], [10], [16], [0]), repeats=1, warmup=False,
                        time_limit_s=5, lp_relaxation=False)
    (row,) = res.rows
    assert row.total_s == 0.123
    real = run_benchmark(["milp"], family_instances(["mck-strongly"], [50], [400], [0]), repeats=1,
                         time_limit_s=30, lp_relaxation=False)
    (row,) = real.rows
    assert row.status == "OPTIMAL" and row.verified and 0 < row.total_s < 30


def _in_pool_worker(table):
    sol = _Stubborn().solve(table, time_limit_s=5.0, sleep_s=0.0)
    return sol.status.name, sol.stats["isolation"]


@pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")  # jax's, on this test's own Pool
def test_a_daemonic_pool_worker_solves_in_process(small_table):
    # a multiprocessing.Pool's workers are daemonic and may not have children: no fork there, a soft limit
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(1) as pool:
        status, how = pool.apply(_in_pool_worker, (small_table,))
    assert status == "FEASIBLE" and "daemonic" in how


def test_ctrl_c_in_the_caller_kills_the_solver_and_interrupts(small_table, tmp_path):
    # the child is in its own process group (a terminal's Ctrl-C reaches only the caller, not SCIP's own
    # SIGINT handler); the caller's KeyboardInterrupt kills it on the way out
    import threading

    own = tmp_path / "own"
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(KeyboardInterrupt):
            _Stubborn().solve(small_table, time_limit_s=30.0, own_pid_file=str(own))
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert time.perf_counter() - t0 < 10
    pid = int(own.read_text())
    assert _state(pid) in ("gone", "Z"), f"the solver process {pid} outlived the interrupt"
