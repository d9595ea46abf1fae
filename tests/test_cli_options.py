"""The command line (issue 16): NAME:key=value solver options, -v/-q logging, a closed pipe,
the objective shown before the scaled integer, and one check of backend options."""

import contextlib
import io
import logging
import subprocess
import sys

import pytest

from elasticopt.benchmarking import resolve_solvers
from elasticopt.cli import configure_logging, main
from elasticopt.errors import SolverError, SolverOptionError, ValidationError
from elasticopt.models import load_instance
from elasticopt.solvers import get_backend, solve
from elasticopt.solvers.options import parse_solver_arg


@pytest.fixture(autouse=True)
def _reset_logging():
    yield
    configure_logging(0, 0)


def test_solve_accepts_solver_options(capsys):
    assert main(["solve", "instances/tiny.json", "--solver", "cpsat:num_workers=2,seed=3", "--json"]) == 0
    assert '"solver": "cpsat"' in capsys.readouterr().out
    assert main(["solve", "instances/tiny.json", "--solver", "dp:fixing=false"]) == 0


@pytest.mark.parametrize("arg, words", [
    ("cpsat:num_workers=-2", ["num_workers", "an integer in 0..1024", "-2"]),
    ("cpsat:num_workers=two", ["num_workers", "'two'"]),
    ("milp:mip_abs_gap=1", ["mip_abs_gap", "[0, 1)"]),
    ("milp:presolve=maybe", ["presolve", "'choose'"]),
    ("dp:fixing=3", ["fixing", "true or false"]),
    ("dp:bogus=1", ["unknown option 'bogus'", "fixing"]),
    ("dp:fixing", ["NAME:key=value"]),
    # taken before: a negative max_cells answered every instance LIMIT; a seed past 32 bits was an ERROR
    # (CP-SAT) or an OverflowError (SCIP) from the library
    ("dp:max_cells=-5", ["max_cells", "an integer >= 1"]),
    ("numpy-dp:max_cells=0", ["max_cells", "an integer >= 1"]),
    ("cpsat:seed=1000000000000", ["seed", "0..2**31 - 1"]),
    ("scip:seed=1000000000000", ["seed", "0..2**31 - 1"]),
    ("milp:seed=-1", ["seed", "0..2**31 - 1"]),
    ("cpsat:num_workers=1000000000000", ["num_workers", "0..1024"]),
    ("milp:threads=0", ["threads", "1..1024"]),
])
def test_bad_solver_options_exit_2_before_loading(capsys, arg, words):
    assert main(["solve", "no-such-file.json", "--solver", arg]) == 2
    err = capsys.readouterr().err
    for w in words:
        assert w in err, err
    assert "no-such-file" not in err  # the option is checked before the file is read


@pytest.mark.parametrize("solver, options", [
    ("milp", {"threads": 0}), ("milp", {"mip_abs_gap": -0.5}), ("milp", {"seed": 1.5}),
    ("cpsat", {"linearization_level": 7}), ("cpsat", {"log_search_progress": "yes"}),
    ("numpy-dp", {"fixing": None}), ("pyomo", {"tee": 1}), ("pyomo", {"solver_options": "mip_rel_gap=0"}),
    ("cpsat", {"hint": [1, 2]}), ("milp", {"hint": "a:1x32"}),
])
def test_bad_option_values_raise_like_bad_names(solver, options):
    p = load_instance("instances/tiny.json")
    for bad in (options, {"no_such_option": 1}):
        with pytest.raises(SolverOptionError):
            solve(p, solver, **bad)
        with pytest.raises(SolverOptionError):  # the benchmark runner uses the same check
            resolve_solvers([(solver, bad)])


def test_option_errors_are_solver_errors_and_values_are_checked_once():
    assert issubclass(SolverOptionError, SolverError)
    assert get_backend("milp").check_options({"threads": 2})["threads"] == 2
    assert get_backend("milp").check_options({})["mip_abs_gap"] == 0.5


def test_one_solver_grammar():
    assert parse_solver_arg("cpsat") == ("cpsat", {})
    assert parse_solver_arg("cpsat:num_workers=8,log_search_progress=true") == (
        "cpsat", {"num_workers": 8, "log_search_progress": True})
    assert parse_solver_arg("pyomo:solver_name=appsi_highs") == ("pyomo", {"solver_name": "appsi_highs"})
    for bad in ("", ":x=1", "cpsat:", "cpsat:num_workers"):
        with pytest.raises(ValidationError):
            parse_solver_arg(bad)
    from elasticopt.benchmarking import solvers as bench_solvers

    assert bench_solvers.parse_solver_arg is parse_solver_arg


def test_objective_value_is_shown_before_the_scaled_integer(capsys):
    assert main(["solve", "instances/tiny.json"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if "solver" in line and "status" in line)
    assert header.index("objective") < header.index("integer") < header.index("bound")
    row = next(line for line in out.splitlines() if "OPTIMAL" in line)
    assert row.index("275.0000") < row.index(str(275 * 2**20))


def test_verbose_and_quiet(capsys):
    assert main(["solve", "instances/tiny.json"]) == 0
    assert "INFO" not in capsys.readouterr().err
    assert main(["-v", "solve", "instances/tiny.json"]) == 0
    assert logging.getLogger("elasticopt").getEffectiveLevel() == logging.INFO
    assert main(["-vv", "solve", "instances/tiny.json"]) == 0
    assert logging.getLogger("elasticopt").getEffectiveLevel() == logging.DEBUG
    assert main(["-q", "solve", "instances/tiny.json"]) == 0
    assert logging.getLogger("elasticopt").getEffectiveLevel() == logging.ERROR


def test_verbose_writes_info_to_stderr():
    r = subprocess.run([sys.executable, "-m", "elasticopt", "-v", "solve", "instances/tiny.json", "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0
    assert "INFO elasticopt.cli.solve: instances/tiny.json: 2 jobs, 4 GPUs" in r.stderr
    assert r.stdout.startswith("{")  # logging never reaches stdout
    r = subprocess.run([sys.executable, "-m", "elasticopt", "-q", "solve", "instances/tiny.json", "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr == ""


class _ClosedPipe(io.StringIO):
    def write(self, s):
        raise BrokenPipeError(32, "Broken pipe")


def test_closed_stdout_in_process(monkeypatch):
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    assert main(["solve", "instances/tiny.json", "--json"]) == 141


def test_json_piped_into_head_ends_without_traceback():
    # ~300 kB of JSON: more than a pipe holds, so the writer meets the closed pipe
    p = subprocess.Popen([sys.executable, "-m", "elasticopt", "solve", "instances/paper-large.json", "--json",
                          "--solver", "all"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.readline().strip() == b"{"
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=300) == 141, err
    assert "Traceback" not in err and "BrokenPipe" not in err


def test_status_maps_name_real_library_statuses():
    import highspy
    from ortools.sat.python import cp_model

    from elasticopt.solvers import Status
    from elasticopt.solvers import cpsat, milp

    assert set(milp.STATUS_MAP) <= set(highspy.HighsModelStatus.__members__)
    assert milp.STATUS_MAP["kOptimal"] is Status.OPTIMAL and milp.STATUS_MAP["kTimeLimit"] is Status.LIMIT
    names = {cp_model.CpSolver().status_name(s) for s in cp_model.CpSolverStatus.__members__.values()}
    assert set(cpsat.STATUS_MAP) == names


def test_bench_shows_the_objective_value_before_the_integer(tmp_path, capsys):
    assert main(["bench", "--solver", "numpy-dp", "--instances", "instances/tiny.json", "--repeats", "1",
                 "--no-plots", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"best proven objective 275.000000 (integer {275 * 2**20})" in " ".join(out.split())  # rich wraps


@pytest.mark.parametrize("argv,words", [
    # each was an internal error (exit 4) or was taken silently before
    (["serve", "--http", "--port", "99999"], "argument --port: expected a port number 0..65535"),
    (["serve", "--http", "--port", "-1"], "argument --port: expected a port number 0..65535"),
    (["generate", "--family", "paper", "--jobs", "3", "--gpus", "8", "--seed", "-1", "-o", "{tmp}/g.json"],
     "seed: expected an integer >= 0, found -1"),
    (["bench", "--instances", "instances/tiny.json", "--repeats", "1", "--time-limit-s", "-1"],
     "--time-limit-s: expected a number of seconds > 0"),
    (["simulate", "--cluster", "sia-64", "--jobs", "5", "--load", "-1"], "load: expected a number > 0"),
    (["simulate", "--gpus", "8", "--jobs", "0", "--generate", "{tmp}/w.csv"], "jobs: expected an integer >= 1"),
    # named time_limit_s / default_time_limit_s (the API's words), after the file was loaded and compiled
    (["solve", "instances/tiny.json", "--time-limit-s", "nan"],
     "--time-limit-s: expected a number of seconds > 0, found nan (leave --time-limit-s out"),
    (["serve", "--stdio", "--time-limit-s", "-3"], "--time-limit-s: expected a number of seconds > 0, found -3.0"),
    # generation options beside a workload file were taken and ignored
    (["simulate", "instances/tiny.json", "--gpus", "8", "--duration-scale", "2"],
     "--duration-scale: expected no --duration-scale beside a workload file"),
    (["simulate", "--trace", "philly", "--jobs", "50"], "the jobs of --trace philly are simulated as they are"),
    (["simulate", "w.csv", "--gpus", "8", "--networks", "t4/resnet18"], "--networks: expected no --networks"),
    # --family-option without the family it goes to was ignored
    (["bench", "--instances", "instances/tiny.json", "--family-option", "options=3"],
     "--family-option: expected --family F beside it"),
    (["bench", "--suite", "reference", "--family-option", "options=3"], "suite 'reference' generates with its own options"),
])
def test_bad_numbers_on_the_command_line_exit_2_naming_the_argument(tmp_path, capsys, argv, words):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    with pytest.raises(SystemExit) if "--port" in argv else contextlib.nullcontext() as raised:
        code = main(argv)
    code = raised.value.code if raised is not None else code  # argparse exits 2 itself
    err = capsys.readouterr().err
    assert code == 2 and words in err and "internal error" not in err, err
    assert not list(tmp_path.iterdir())  # nothing written

