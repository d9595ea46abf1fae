"""The cpsat, milp, pyomo and greedy backends: registry, options, time limits,
hints, export, the ``--solver all`` comparison and optional-dependency hygiene."""

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import highspy
import numpy as np
import ortools  # noqa: F401  -- CI must fail, not skip, without the solver extras
import pyomo  # noqa: F401
import pytest

from elasticopt.cli import main
from elasticopt.errors import SolverError, SolverOptionError, SolverUnavailableError
from elasticopt.generate import generate_instance
from elasticopt.models import (
    Cluster,
    Job,
    MeasuredThroughput,
    Problem,
    compile_problem,
    load_instance,
    reduce_table,
)
from elasticopt.solvers import (
    Backend,
    Outcome,
    Reason,
    Status,
    available_solvers,
    exact_solvers,
    get_backend,
    solve,
    verify,
)
from elasticopt.solvers import registry
from elasticopt.testing.cases import case

ROOT = Path(__file__).resolve().parents[1]
MIXED = ROOT / "instances" / "mixed.json"
NEW = {"cpsat": ("ortools", "cpsat"), "milp": ("highspy", "milp"), "pyomo": ("pyomo", "pyomo"),
       "scip": ("pyscipopt", "scip")}


# --- registry -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["cpsat", "milp", "scip", "pyomo", "greedy"])
def test_registered_with_metadata(name):
    cls = registry._REGISTRY[name]
    assert cls.name == name and cls.description
    assert cls.exact is (name != "greedy")
    if name in NEW:
        module, extra = NEW[name]
        assert module in cls.requires and cls.extra == extra
    assert name in available_solvers()
    assert (name in exact_solvers()) is cls.exact


def test_unknown_option_names_the_accepted_ones():
    t = compile_problem(load_instance(MIXED))
    with pytest.raises(SolverError, match="num_workers"):
        get_backend("cpsat").solve(t, workers=2)
    with pytest.raises(SolverError, match="mip_abs_gap"):
        get_backend("milp").solve(t, gap=0)


def test_milp_refuses_a_gap_that_cannot_prove_the_optimum():
    # issue 16: a bad option value raises before solving, like a bad option name (it was Status.ERROR)
    with pytest.raises(SolverOptionError, match="mip_abs_gap") as ei:
        solve(load_instance(MIXED), "milp", mip_abs_gap=1.0)
    assert "[0, 1)" in str(ei.value) and "1.0" in str(ei.value)


# --- hints --------------------------------------------------------------------------------------


@pytest.mark.parametrize("solver", ["cpsat", "milp", "scip"])
def test_hint_from_a_solution_or_a_mapping(solver):
    p = load_instance(MIXED)
    ref = solve(p, "numpy-dp")
    for hint in (ref, dict(ref.allocation), {"bert-b": (4, 128)}):
        sol = solve(p, solver, hint=hint)
        assert sol.status is Status.OPTIMAL and sol.objective == ref.objective


def test_bad_hint_is_an_error_naming_the_option():
    # issue 16: a bad option value raises before solving, like a bad option name (it was Status.ERROR)
    with pytest.raises(SolverOptionError, match="'hint'"):
        solve(load_instance(MIXED), "cpsat", hint=[1, 2, 3])


# --- time limits --------------------------------------------------------------------------------


def mck(kind: str, n: int, G: int, seed: int, items: int = 10) -> Problem:
    """Pisinger-style multiple-choice knapsack: weight w ~ U[1, R] GPUs, profit w + 10
    ("strongly" correlated) or w + U[-10, 10] ("weakly"), R = 2G/n so the capacity binds.
    Built here (not by the generator) so the hardness the tests rely on stays fixed."""
    rng = np.random.default_rng(seed)
    R = max(2, 2 * G // n)
    jobs = []
    for j in range(n):
        w = rng.integers(1, R + 1, size=items)
        p = w + 10 if kind == "strongly" else np.maximum(1, w + rng.integers(-10, 11, size=items))
        pts = {(int(wi), int(wi) * (i + 1)): float(pi) for i, (wi, pi) in enumerate(zip(w, p))}
        jobs.append(Job(f"c{j}", MeasuredThroughput(pts), 1, 10**6, 10**6))
    return Problem(Cluster(G, 1), tuple(jobs), objective="throughput")


@pytest.fixture(scope="module")
def hard():
    """Instances that no backend proves within a fraction of a second here
    (CP-SAT spends seconds in presolve on the weakly correlated one)."""
    out = {}
    for fam, n, G in (("mck-weakly", 1000, 1024), ("mck-strongly", 2000, 2048)):
        p = mck(fam.split("-")[1], n, G, 3)
        t = reduce_table(compile_problem(p))
        out[fam] = (p, t, get_backend("numpy-dp").solve(t).objective)
    return out


def _check_limited(problem, sol, optimum, limit_s, elapsed_s, slack_s):
    assert sol.status in (Status.LIMIT, Status.OPTIMAL), (sol.status, sol.message)
    assert elapsed_s < limit_s + slack_s
    rep = verify(problem, sol)
    assert rep.ok, rep.errors
    if sol.objective is not None:
        assert sol.objective <= optimum
        if sol.status is Status.OPTIMAL:
            assert sol.objective == optimum
    if sol.bound is not None:
        assert sol.bound >= optimum  # a bound is a proof: never below the optimum


@pytest.mark.parametrize(
    "solver, family, limit_s",
    [("cpsat", "mck-weakly", 0.2), ("milp", "mck-strongly", 0.01), ("pyomo", "mck-strongly", 0.01),
     ("scip", "mck-strongly", 0.05)],
)
def test_tiny_limit_returns_limit_without_raising(hard, solver, family, limit_s):
    p, t, opt = hard[family]
    t0 = time.perf_counter()
    sol = get_backend(solver).solve(t, time_limit_s=limit_s)
    elapsed = time.perf_counter() - t0
    _check_limited(p, sol, opt, limit_s, elapsed, slack_s=5.0)
    assert sol.status is Status.LIMIT, "the instance should be too hard for this limit"
    assert sol.message and sol.reason is Reason.TIME_LIMIT


@pytest.mark.parametrize("solver", ["cpsat", "milp", "scip", "pyomo"])
def test_limit_keeps_best_solution_and_a_valid_bound(hard, solver):
    p, t, opt = hard["mck-strongly"]
    t0 = time.perf_counter()
    sol = get_backend(solver).solve(t, time_limit_s=0.3)
    _check_limited(p, sol, opt, 0.3, time.perf_counter() - t0, slack_s=8.0)


def test_limit_with_a_start_solution_returns_an_allocation(hard):
    p, t, opt = hard["mck-weakly"]
    g = get_backend("greedy").solve(t)
    t0 = time.perf_counter()
    sol = get_backend("milp").solve(t, time_limit_s=0.001, hint=g)
    _check_limited(p, sol, opt, 0.001, time.perf_counter() - t0, slack_s=5.0)
    assert sol.objective is not None and sol.objective >= g.objective


# --- greedy -------------------------------------------------------------------------------------


def test_greedy_gives_must_run_jobs_their_smallest_option_first():
    p = case("no-preemption").problem
    sol = solve(p, "greedy")
    assert sol.status is Status.FEASIBLE and sol.allocation["r"] == (2, 2)
    assert solve(case("infeasible").problem, "greedy").status is Status.INFEASIBLE


def test_greedy_on_a_paper_instance_is_close_and_fast():
    p = generate_instance("paper", 300, 256, 1)
    ref, sol = solve(p, "numpy-dp"), solve(p, "greedy")
    assert sol.status is Status.FEASIBLE and verify(p, sol).ok
    assert 0.9 * ref.objective <= sol.objective <= ref.objective


# --- pyomo: solver choice and export ------------------------------------------------------------


def test_missing_pyomo_solver_is_a_clear_error():
    with pytest.raises(SolverError) as err:
        solve(load_instance(MIXED), "pyomo", solver_name="no-such-solver")
    msg = str(err.value)
    assert "no-such-solver" in msg and "appsi_highs" in msg and "Traceback" not in msg


def test_pyomo_with_the_contrib_highs_solver():
    p = load_instance(MIXED)
    assert solve(p, "pyomo", solver_name="highs").objective == solve(p, "numpy-dp").objective


@pytest.mark.parametrize("fmt", ["lp", "mps"])
def test_export_is_readable_by_outside_solvers(tmp_path, capsys, fmt):
    out = tmp_path / f"mixed.{fmt}"
    assert main(["export", str(MIXED), "--format", fmt, "-o", str(out)]) == 0
    assert "binaries" in capsys.readouterr().out
    assert not [f for f in os.listdir(tmp_path) if f != out.name]  # no temp file left behind
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.readModel(str(out))
    h.setOptionValue("mip_rel_gap", 0.0)
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    ref = solve(load_instance(MIXED), "numpy-dp")
    assert round(h.getInfo().objective_function_value) == ref.objective


def test_export_format_from_suffix(tmp_path):
    out = tmp_path / "m.mps"
    assert main(["export", str(MIXED), "-o", str(out), "--no-reduce"]) == 0
    assert "ROWS" in out.read_text()


# --- solve --solver all -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["mixed.json", "paper-medium.json"])
def test_solver_all_every_exact_backend_optimal_and_equal(name, capsys):
    path = ROOT / "instances" / name
    if not path.exists():
        pytest.fail(f"{path} missing")
    rc = main(["solve", str(path), "--solver", "all", "--json"])
    doc = json.loads(capsys.readouterr().out)
    sols = doc["solutions"]
    assert {s["solver"] for s in sols} >= {"numpy-dp", "dp", "cpsat", "milp", "scip", "pyomo"}
    assert all(s["status"] == "optimal" for s in sols), [(s["solver"], s["status"], s["message"]) for s in sols]
    assert len({s["objective"] for s in sols}) == 1
    assert doc["agree"] and rc == 0


class _WrongBackend(Backend):
    """Claims that running jobs on their smallest option, the queue idle, is optimal."""

    name = "fake-wrong"
    exact = True

    def build(self, table, options):
        return table

    def run(self, model, time_limit_s, options):
        return None

    def extract(self, table, model, raw):
        import numpy as np

        choice = np.full(table.n_jobs, -1)
        for j in np.flatnonzero(~table.idle_allowed):
            opts = np.flatnonzero(table.valid[j])
            choice[j] = opts[np.argmin(table.gpus[j, opts])]
        return Outcome(Status.OPTIMAL, choice=choice)


def test_solver_all_exit_3_when_proven_optima_disagree(monkeypatch, capsys):
    monkeypatch.setitem(registry._REGISTRY, "fake-wrong", _WrongBackend)
    assert "fake-wrong" in exact_solvers()
    assert main(["solve", str(MIXED), "--solver", "all"]) == 3
    assert "DISAGREE" in capsys.readouterr().out
    monkeypatch.undo()
    assert "fake-wrong" not in registry.registered_solvers()


def test_solver_all_json_is_clean_in_a_fresh_process():
    """HiGHS's start-up banner must not reach stdout (it would corrupt --json)."""
    r = subprocess.run(
        [sys.executable, "-m", "elasticopt", "solve", str(MIXED), "--solver", "all", "--json"],
        capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["agree"]


# --- optional dependencies ----------------------------------------------------------------------


@pytest.mark.parametrize("module, gone", [("ortools", {"cpsat"}), ("highspy", {"milp", "pyomo"}), ("pyomo", {"pyomo"}),
                                          ("pyscipopt", {"scip"})])
def test_missing_library_names_the_extra(monkeypatch, module, gone):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == module else real(name, *a))
    monkeypatch.setitem(sys.modules, module, None)  # not installed, even where an earlier test imported it
    avail = set(available_solvers())
    assert not (gone & avail) and {"numpy-dp", "greedy"} <= avail
    for name in gone:
        with pytest.raises(SolverUnavailableError, match=rf"elasticopt\[{registry._REGISTRY[name].extra}\]"):
            get_backend(name)
        with pytest.raises(SolverUnavailableError, match=module):
            solve(load_instance(MIXED), name)


def test_package_imports_without_solver_libraries():
    code = (
        "import sys\n"
        "for m in ('ortools', 'highspy', 'pyomo', 'pyscipopt'): sys.modules[m] = None\n"
        "import elasticopt\n"
        "from elasticopt.solvers import available_solvers, get_backend, registered_solvers, solve\n"
        "from elasticopt.errors import SolverUnavailableError\n"
        "from elasticopt.models import load_instance\n"
        "a = available_solvers()\n"
        "assert not {'cpsat', 'milp', 'pyomo', 'scip'} & set(a), a\n"
        "assert {'cpsat', 'milp', 'pyomo', 'scip', 'greedy'} <= set(registered_solvers())\n"
        f"p = load_instance({str(MIXED)!r})\n"
        "assert solve(p, 'numpy-dp').status.name == 'OPTIMAL'\n"
        "assert solve(p, 'greedy').status.name == 'FEASIBLE'\n"
        "try:\n"
        "    get_backend('cpsat')\n"
        "except SolverUnavailableError as e:\n"
        "    assert 'elasticopt[cpsat]' in str(e), e\n"
        "else:\n"
        "    raise SystemExit('cpsat should be unavailable')\n"
        "print('ok')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_bounds_are_integers_not_below_the_objective():
    p = load_instance(MIXED)
    for name in ("cpsat", "milp", "scip", "pyomo"):
        sol = solve(p, name)
        assert isinstance(sol.bound, int) and sol.bound == sol.objective
        assert math.isclose(sol.objective_value, solve(p, "numpy-dp").objective_value)


def test_milp_presolve_auto_is_off_with_node_variables():
    # HiGHS's MIP presolve is pathological on the node-assignment model and ignores the time limit there
    # (docs/design.md §3): "auto" switches it off exactly when the formulation has node variables
    from elasticopt.solvers.common import presolve_setting

    assert presolve_setting("auto", True) == "off" and presolve_setting("auto", False) == "choose"
    assert presolve_setting("on", True) == "on"
    milp = get_backend("milp")
    for family, node_vars in (("placement", True), ("paper", False)):
        table = reduce_table(compile_problem(generate_instance(family, 20, 32, 0)))
        model = milp.build(table, milp.check_options({}))
        assert bool(model.form.node_cols) is node_vars
        assert model.highs.getOptionValue("presolve")[1] == ("off" if node_vars else "choose")
