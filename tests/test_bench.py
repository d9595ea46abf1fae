"""Benchmark API and `elasticopt bench`: custom solvers, time-outs, disagreements, files, CLI."""

from __future__ import annotations

import csv
import json
import re
import time

import numpy as np
import pytest

from elasticopt.benchmarking import (
    ROW_FIELDS,
    BenchResult,
    InstanceSpec,
    BenchRun,
    cross_check,
    family_instances,
    file_instances,
    parse_solver_arg,
    resolve_solvers,
    run_benchmark,
    size_pairs,
    summarize,
    write_results,
)
from elasticopt.cli import main
from elasticopt.errors import SolverError, UnknownSolverError, ValidationError
from elasticopt.solvers import Backend, Outcome as BackendOutcome, Solution, Status, registry

# queued jobs only: every job may be idle, so "all idle" is a feasible (poor) allocation
TINY = family_instances(["uniform"], [10], [16], [0], running_fraction=0.0)


class _TableBackend(Backend):
    """Unregistered backends: build returns the table itself."""

    exact = True

    def build(self, table, options):
        return table


class WrongOptimum(_TableBackend):
    """Claims OPTIMAL for the all-idle allocation (objective 0): a wrong proof."""

    name = "wrong-optimum"

    def run(self, model, time_limit_s, options):
        return None

    def extract(self, table, model, raw):
        return BackendOutcome(Status.OPTIMAL, choice=np.full(table.n_jobs, -1), bound=0)


class Sleeper(_TableBackend):
    """Respects the time limit: waits it out, returns LIMIT with the idle allocation."""

    name = "sleeper"

    def run(self, model, time_limit_s, options):
        time.sleep(time_limit_s if time_limit_s is not None else 0.0)
        return None

    def extract(self, table, model, raw):
        bound = int(np.where(table.valid, table.utility, 0).max(axis=1).sum())
        return BackendOutcome(Status.LIMIT, choice=np.full(table.n_jobs, -1), bound=bound, message="time limit")


class Crasher:
    """Not a Backend: a bare object whose solve raises."""

    name = "crasher"

    def solve(self, table, *, time_limit_s=None):
        raise RuntimeError("boom")


class Overbooker:
    """Returns every job on its largest option, claimed FEASIBLE: fails verification."""

    name = "overbooker"

    def solve(self, table, *, time_limit_s=None):
        alloc = {}
        for j, jid in enumerate(table.job_ids):
            o = int(np.flatnonzero(table.valid[j])[-1])
            alloc[jid] = (int(table.gpus[j, o]), int(table.batch[j, o]))
        return Solution(Status.FEASIBLE, self.name, objective=1, allocation=alloc, scale=table.scale,
                        tie_scale=table.tie_scale)


def test_custom_solver_beside_builtins_and_rows():
    res = run_benchmark(["numpy-dp", "milp", Sleeper()], TINY, repeats=2, time_limit_s=0.5)  # milp needs far less on TINY, even on a loaded machine
    solvers = [r.solver for r in res.rows]
    assert sorted(set(solvers)) == ["milp", "numpy-dp", "sleeper"]
    # every (solver, repeat), nothing dropped, except that the sleeper's warm-up reached the limit: it is its one
    # timed run (repeat 1), not repeated
    assert len(res.rows) == 3 * 2 - 1
    for r in res.rows:
        assert set(r.to_dict()) == set(ROW_FIELDS)
        assert r.n == 10 and r.G == 16 and r.options > 0 and r.dp_ops == r.options * (r.capacity + 1)
        assert r.warmup_s is not None and r.compile_s > 0 and r.verified
    dp_rows = [r for r in res.rows if r.solver == "numpy-dp"]
    assert all(r.status == "OPTIMAL" and r.agrees_with_best for r in dp_rows)
    assert all(r.dp_ops_run == r.dp_ops and r.dp_ops_per_s > 0 and r.dp_ops_fraction == pytest.approx(r.dp_ops_per_s / 1.5e9) for r in dp_rows)
    assert all(r.dp_ops_per_s is None for r in res.rows if r.solver == "milp")
    # the time-out is a LIMIT row, consistent (below the optimum), not within the limit
    slow = [r for r in res.rows if r.solver == "sleeper"]
    assert [(r.status, r.repeat) for r in slow] == [("LIMIT", 1)]
    assert slow[0].warmup_s == pytest.approx(slow[0].total_s, rel=0.5)
    assert all(r.within_limit is False and r.total_s >= 0.5 and r.agrees_with_best for r in slow)
    assert all(r.gap_to_best == 1.0 for r in slow)  # idle allocation: objective 0
    milp = [r for r in res.rows if r.solver == "milp"]
    assert {r.objective for r in milp} == {r.objective for r in dp_rows} == {res.instances[0].best_objective}
    assert res.ok and not res.disagreements


def test_limit_without_warmup_is_run_every_repeat():
    res = run_benchmark(["numpy-dp", Sleeper()], TINY, repeats=2, warmup=False, time_limit_s=0.2)
    slow = [r for r in res.rows if r.solver == "sleeper"]
    assert [(r.status, r.repeat) for r in slow] == [("LIMIT", 1), ("LIMIT", 2)]
    assert len([r for r in res.rows if r.solver == "numpy-dp"]) == 2


def test_wrong_optimum_is_a_loud_disagreement():
    res = run_benchmark(["numpy-dp", WrongOptimum()], TINY, repeats=1)
    assert not res.ok and res.proven_disagree
    assert any("PROVEN OPTIMA DISAGREE" in d for d in res.disagreements)
    wrong = next(r for r in res.rows if r.solver == "wrong-optimum")
    right = next(r for r in res.rows if r.solver == "numpy-dp")
    assert wrong.verified  # the allocation itself is valid: only the cross-check catches it
    assert wrong.agrees_with_best is False and "claims OPTIMAL 0" in wrong.disagreement
    assert right.agrees_with_best is True and right.objective == res.instances[0].best_objective > 0
    summ = {s.solver: s for s in summarize(res)}
    assert summ["wrong-optimum"].disagree == 1 and summ["numpy-dp"].disagree == 0


def test_errors_and_verification_failures_are_rows():
    res = run_benchmark(["numpy-dp", Crasher(), Overbooker()], TINY, repeats=2, warmup=False)
    assert len(res.rows) == 6
    crash = [r for r in res.rows if r.solver == "crasher"]
    assert [r.status for r in crash] == ["ERROR", "ERROR"] and "RuntimeError: boom" in crash[0].message
    assert all(r.warmup_s is None for r in res.rows)
    over = [r for r in res.rows if r.solver == "overbooker"]
    assert all(not r.verified and "GPUs" in r.verify_errors for r in over)
    assert not res.ok and len(res.errors) == 2 and len(res.verification_failures) == 2


def _o(label, status, objective, bound=None, verified=True, repeat=1):
    sol = Solution(status, label, objective=objective, bound=bound, allocation={"a": None} if objective is not None else {})
    return BenchRun(label, repeat, sol, 0.01, verified)


def test_cross_check_rules():
    ok = cross_check([_o("dp", Status.OPTIMAL, 100, 100), _o("greedy", Status.FEASIBLE, 90),
                      _o("cpsat", Status.LIMIT, 95, 120)])
    assert ok.best_objective == 100 and not ok.disagreements
    assert ok.per_outcome[("greedy", 1)] == (True, "")
    above = cross_check([_o("dp", Status.OPTIMAL, 100, 100), _o("milp", Status.LIMIT, 110, 130)])
    assert above.disagreements and above.per_outcome[("milp", 1)][0] is False
    low_bound = cross_check([_o("dp", Status.OPTIMAL, 100, 100), _o("milp", Status.LIMIT, 90, 95)])
    assert low_bound.per_outcome[("milp", 1)][0] is False and "bound 95" in low_bound.disagreements[0]
    inf = cross_check([_o("dp", Status.OPTIMAL, 100, 100), _o("x", Status.INFEASIBLE, None)])
    assert inf.proven_disagree and inf.per_outcome[("x", 1)][0] is False
    # an unverified objective never becomes the best known one
    bad = cross_check([_o("dp", Status.OPTIMAL, 100, 100), _o("y", Status.OPTIMAL, 200, verified=False)])
    assert bad.best_objective == 100 and bad.proven_disagree
    none = cross_check([_o("greedy", Status.FEASIBLE, 90), _o("e", Status.ERROR, None)])
    assert none.best_objective is None and not none.disagreements
    assert none.per_outcome[("greedy", 1)] == (None, "")


def test_rows_written_to_csv_and_json(tmp_path):
    res = run_benchmark(["numpy-dp", "greedy"], TINY + family_instances(["ladder"], [6], [8]), repeats=2)
    paths = write_results(res, tmp_path / "out", plots=False)
    assert sorted(p.name for p in paths) == ["instances.csv", "performance_profile.csv", "results.json", "rows.csv",
                                             "solvers.csv"]
    with open(tmp_path / "out" / "rows.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(res.rows) == 2 * 2 * 2 and tuple(rows[0]) == ROW_FIELDS
    assert {r["instance"] for r in rows} == {i.name for i in res.instances}
    assert [int(r["objective"]) for r in rows] == [r.objective for r in res.rows]
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    assert doc["format"] == "elasticopt-bench/1" and doc["ok"] is True
    assert doc["rows"] == [r.to_dict() for r in res.rows]
    assert {s["solver"] for s in doc["summary"]} == {"numpy-dp", "greedy"}
    assert doc["settings"]["repeats"] == 2 and "numpy" in doc["environment"]["packages"]
    assert not list((tmp_path / "out").glob(".*.tmp"))  # atomic writes leave no temp files


def test_cli_tiny_family_exit_0(tmp_path, capsys):
    out = tmp_path / "bench"
    rc = main(["bench", "--family", "uniform", "--jobs", "8", "--gpus", "8", "--repeats", "1",
               "--time-limit-s", "20", "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "agree" in text and "DISAGREE" not in text
    # output that is not a terminal (a log file) gets a line per solve instead of the live bar
    assert re.search(r"^\[1/\d+\] uniform-n8-g8-s0 \S+ warm-up: OPTIMAL [0-9.]+ m?s$", text, re.M), text
    for name in ("rows.csv", "results.json", "time_vs_n.png", "time_vs_G.png"):
        assert (out / name).stat().st_size > 0
    assert (out / "time_vs_n.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    doc = json.loads((out / "results.json").read_text())
    installed = {s["label"] for s in doc["settings"]["solvers"]}
    assert {"dp", "numpy-dp"} <= installed and {r["solver"] for r in doc["rows"]} == installed


def test_cli_disagreement_exit_3(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(registry._REGISTRY, "wrong-optimum", WrongOptimum)
    rc = main(["bench", "--solver", "numpy-dp", "wrong-optimum", "--family", "uniform", "--jobs", "6",
               "--gpus", "8", "--family-option", "running_fraction=0", "--repeats", "1", "--no-plots",
               "--out", str(tmp_path)])
    text = capsys.readouterr().out
    assert rc == 3 and "PROVEN OPTIMA DISAGREE" in text


def test_cli_bad_input_exit_2(capsys):
    assert main(["bench", "--family", "uniform", "--jobs", "8"]) == 2
    assert main(["bench", "--solver", "no-such-solver", "--family", "uniform", "--jobs", "8", "--gpus", "8"]) == 2
    assert "no-such-solver" in capsys.readouterr().err


def test_sizes_paired_or_crossed():
    assert size_pairs([200, 1000], [256, 1024]) == [(200, 256), (1000, 1024)]
    assert size_pairs([200, 1000], [256]) == [(200, 256), (1000, 256)]
    assert size_pairs([1, 2], [3, 4], cross=True) == [(1, 3), (1, 4), (2, 3), (2, 4)]
    with pytest.raises(ValidationError, match="--cross"):
        size_pairs([1, 2, 3], [4, 5])
    specs = family_instances(["paper", "ladder"], [5, 6], [8, 16], seeds=[0, 1])
    assert len(specs) == 2 * 2 * 2 and len({s.name for s in specs}) == 8
    with pytest.raises(ValidationError):
        family_instances(["nope"], [5], [8])


def test_solver_specs_and_files(tmp_path):
    assert parse_solver_arg("cpsat:num_workers=8,log=true") == ("cpsat", {"num_workers": 8, "log": True})
    specs = resolve_solvers([("numpy-dp", {}), WrongOptimum()])
    assert [s.label for s in specs] == ["numpy-dp", "wrong-optimum"]
    with pytest.raises(UnknownSolverError):
        resolve_solvers(["no-such-solver"])
    with pytest.raises(SolverError, match="unknown option"):
        resolve_solvers(["numpy-dp:bogus=1"])
    with pytest.raises(ValidationError, match="distinct"):
        resolve_solvers([WrongOptimum(), WrongOptimum()])
    with pytest.raises(ValidationError):
        resolve_solvers([object()])
    from elasticopt.models import save_instance

    for i, spec in enumerate(TINY * 2):
        save_instance(spec.load(), tmp_path / f"i{i}.json")
    files = file_instances([str(tmp_path / "*.json")])
    assert [f.path for f in files] == [str(tmp_path / "i0.json"), str(tmp_path / "i1.json")]
    res = run_benchmark("numpy-dp", files, repeats=1, warmup=False)
    assert isinstance(res, BenchResult) and {r.family for r in res.rows} == {"i0", "i1"}
    with pytest.raises(ValidationError):
        file_instances([str(tmp_path / "*.nothing")])
    with pytest.raises(ValidationError):
        run_benchmark("numpy-dp", [InstanceSpec("a", path=str(tmp_path / "i0.json"))] * 2)


class Interrupter:
    """Solves fine once, then the user presses Ctrl-C."""

    name = "interrupter"

    def __init__(self):
        self.calls = 0

    def solve(self, table, *, time_limit_s=None):
        self.calls += 1
        if self.calls > 1:
            raise KeyboardInterrupt
        return Solution(Status.FEASIBLE, self.name, objective=0, objective_value=0.0,
                        allocation={j: None for j in table.job_ids}, scale=table.scale, tie_scale=table.tie_scale)


def test_ctrl_c_keeps_partial_results():
    res = run_benchmark(["numpy-dp", Interrupter()], TINY + family_instances(["ladder"], [6], [8]),
                        repeats=3, warmup=False)
    assert res.settings["interrupted"] is True
    assert len(res.instances) == 1  # the second instance never started
    assert [(r.solver, r.repeat) for r in res.rows] == [("numpy-dp", 1), ("interrupter", 1), ("numpy-dp", 2)]
    assert res.ok


def test_order_grouped_runs_each_solver_back_to_back():
    seen = []
    res = run_benchmark(["numpy-dp", "greedy"], TINY, repeats=2, warmup=False, order="grouped",
                        progress=lambda ev: seen.append(ev.solver) if ev.phase == "start" else None)
    assert seen == ["numpy-dp", "numpy-dp", "greedy", "greedy"]
    assert res.settings["order"] == "grouped"
    seen.clear()
    run_benchmark(["numpy-dp", "greedy"], TINY, repeats=2, warmup=False,
                  progress=lambda ev: seen.append(ev.solver) if ev.phase == "start" else None)
    assert seen == ["numpy-dp", "greedy", "numpy-dp", "greedy"]
    with pytest.raises(ValidationError, match="order"):
        run_benchmark(["numpy-dp"], TINY, order="random")


def test_end_to_end_benchmark_runs():
    # the script the #12 figures come from keeps working (its figures are printed, not asserted)
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_end_to_end.py"
    out = subprocess.run([sys.executable, str(script), "--repeats", "1", "--skip-big"], capture_output=True,
                         text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("milp / dp end to end") == 2 and "'dp': ('OPTIMAL'" in out.stdout
