"""validation/sia_simulator.py on a fake checkout laid out as the real artifact (tests/integrations/fake_hosts.py)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from fake_hosts import sia_checkout

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "validation" / "sia_simulator.py"
_spec = importlib.util.spec_from_file_location("sia_simulator", SCRIPT)
ss = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ss)  # type: ignore[union-attr]
hr = sys.modules["host_runs"]


def _rows(out: str, workload: str) -> dict[str, list[str]]:
    rows = {}
    for line in out[out.index(f"### {workload}"):].splitlines()[4:]:
        if not line.startswith("| "):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = cells
    return rows


def test_help_runs():
    out = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "--simulator" in out.stdout and "run_experiment.sh" in out.stdout


def test_a_relative_checkout_to_a_table_drop_in_and_sias_own(tmp_path, monkeypatch, capsys):
    """The --help command: the drop-in passes Sia's isinstance dispatch (a subclass of the checkout's SiaPolicy),
    Sia's own policy runs unreplaced, both on the first 8 jobs, with the run_experiment.sh settings."""
    sim = sia_checkout(tmp_path)
    monkeypatch.chdir(tmp_path)
    rc = ss.main(["--simulator", "sia-simulator", "--python", sys.executable, "--out", str(tmp_path / "o")])
    res = capsys.readouterr()
    out = res.out
    assert rc == 0, res.err
    rows = _rows(out, "saturn-workload-1-first8")
    assert set(rows) == {"elasticopt", "sia"}
    for name in rows:
        log = hr.read_log(tmp_path / "o" / name / "saturn-workload-1-first8.log")
        s = hr.summarize(log)
        assert rows[name][1] == "8/8" and float(rows[name][2]) == pytest.approx(s["mean_jct_s"], abs=0.5)
        assert int(rows[name][7]) > 0  # optimize calls timed
    stdout = (tmp_path / "o" / "elasticopt" / "saturn-workload-1-first8.stdout").read_text()
    assert "unsupported policy" not in stdout
    assert float(rows["sia"][-1]) == pytest.approx(1.0)
    assert not any(p.suffix == ".log" for p in sim.rglob("*"))  # nothing written into the checkout
    assert "Policy calls over all workloads: elasticopt:" in out and "; sia:" in out
    # each drop-in call's own split by the service, beside its wall time; none for Sia's own policy
    calls = hr.read_calls(tmp_path / "o" / "elasticopt" / "saturn-workload-1-first8.calls.json")
    split = hr.read_service(tmp_path / "o" / "elasticopt" / "saturn-workload-1-first8.service.json")
    assert len(split) == len(calls) and all(t and {"compile_s", "solve_s", "total_s"} <= set(t) for t in split)
    assert all(1000 * t["total_s"] <= ms for t, ms in zip(split, calls))
    own = hr.read_service(tmp_path / "o" / "sia" / "saturn-workload-1-first8.service.json")
    assert own and set(own) == {None}
    assert "\nelasticopt: " in out and "\nsia: " in out


def test_slow_calls_are_put_down_to_their_largest_part():
    """Hand-checked: 5 calls over 100 ms, each split by the service's own timings (seconds)."""
    t = lambda comp, solve, total: {"compile_s": comp, "solve_s": solve, "total_s": total}  # noqa: E731
    calls = [5.0, 400.0, 300.0, 250.0, 200.0, 180.0, 150.0]
    split = [t(0, .004, .005), t(.35, .01, .39), t(0, .2, .25), t(0, .01, .2), t(0, .01, .02), t(.05, .05, .15),
             None]
    line = hr.slow_calls_line("eo", calls, split)
    # 400: table 350; 300: solve 200; 250: service 190; 200: outside 180; 180: no part reaches 90; 150: no split
    assert line == ("eo: 6 calls over 100 ms (the largest part of each: 1 table, 1 solve, 1 service, 1 outside, "
                    "1 mixed, 1 no split)\n")
    assert hr.slow_calls_line("eo", [5.0], [None]) == "eo: no call over 100 ms\n"
    runs = {"eo": [((400.0,), (t(.35, 0, .36),)), ((300.0, 1.0), ())], "own": [((1.0,), ())]}
    assert hr.slow_calls_text(runs) == ("eo: 2 calls over 100 ms (the largest part of each: 1 table, 1 no split)\n"
                                        "own: no call over 100 ms\n")


def test_all_jobs_of_several_workloads_and_published_logs(tmp_path, capsys):
    sim = sia_checkout(tmp_path)
    rc = ss.main(["--simulator", str(sim), "--python", sys.executable, "--workloads", "saturn/*.csv", "--jobs", "0",
                  "--policies", "sia", "--out", str(tmp_path / "o")])
    assert rc == 0
    capsys.readouterr()
    rc = ss.main(["--simulator", str(sim), "--python", sys.executable, "--workloads", "saturn/workload-2.csv",
                  "--jobs", "0", "--policies", "sia", "--reuse", "--published", str(tmp_path / "o" / "sia"),
                  "--out", str(tmp_path / "o")])
    out = capsys.readouterr().out
    assert rc == 0
    rows = _rows(out, "saturn-workload-2")
    assert rows["sia"][1] == "12/12" and rows["published"][2:7] == rows["sia"][2:7]
    # the first 4 jobs are not the published workload: its log (as the artifact's directory mode names it) is
    # left out, not compared
    pub = tmp_path / "o" / "sia"
    (pub / "workload-2.log").write_bytes((pub / "saturn-workload-2.log").read_bytes())
    rc = ss.main(["--simulator", str(sim), "--python", sys.executable, "--workloads", "saturn/workload-2.csv",
                  "--jobs", "4", "--policies", "sia", "--published", str(tmp_path / "o" / "sia"),
                  "--out", str(tmp_path / "cut")])
    out = capsys.readouterr().out
    assert rc == 0 and set(_rows(out, "saturn-workload-2-first4")) == {"sia"}, out


def test_bad_inputs_are_clear_errors(tmp_path, capsys):
    sim = sia_checkout(tmp_path)
    assert ss.main(["--simulator", str(tmp_path), "--python", sys.executable]) == 2
    assert "multi_simulator.py" in capsys.readouterr().err
    assert ss.main(["--simulator", str(sim), "--python", sys.executable, "--workloads", "x/*.csv"]) == 2
    assert "nothing matches" in capsys.readouterr().err
    assert ss.main(["--simulator", str(sim), "--python", sys.executable, "--policies", "pollux"]) == 2
    assert "unknown ['pollux']" in capsys.readouterr().err


def test_dropin_options_reach_the_drop_in(tmp_path, capsys):
    sim = sia_checkout(tmp_path)
    base = ["--simulator", str(sim), "--python", sys.executable, "--jobs", "3", "--policies", "elasticopt",
            "--out", str(tmp_path / "o")]
    assert ss.main(base + ["--dropin-options", '{"p_fairness": 2}']) == 2  # over the host's -0.5: refused
    assert "p_fairness must be <= 1, got 2" in capsys.readouterr().err
    assert ss.main(base + ["--dropin-options", "[1]"]) == 2
    assert "expected a JSON object" in capsys.readouterr().err
    assert ss.main(base + ["--dropin-options", '{"sia_configs": false}']) == 0


def test_runs_at_once_and_the_summary_against_sias_own(tmp_path, capsys):
    sim = sia_checkout(tmp_path)
    rc = ss.main(["--simulator", str(sim), "--python", sys.executable, "--workloads", "saturn/*.csv",
                  "--parallel", "4", "--out", str(tmp_path / "o")])
    out = capsys.readouterr().out
    assert rc == 0, out
    summary = out[out.index("### Mean JCT over the workloads"):]
    ratios = []
    for line in (x for x in summary.splitlines() if x.startswith("| saturn-")):
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows = _rows(out, cells[0])
        assert cells[1:3] == [rows["elasticopt"][2], rows["sia"][2]]
        ratios.append(float(rows["elasticopt"][2]) / float(rows["sia"][2]))
    assert len(ratios) == len(list((sim / "workloads" / "saturn").glob("*.csv")))
    assert f"elasticopt / sia: at or below on {sum(r <= 1 for r in ratios)} of {len(ratios)} workloads" in summary


def test_record_keeps_the_drop_ins_requests_and_a_replay_answers_them(tmp_path, capsys):
    """``--record``: one request per timed call in ``<log>.requests.jsonl``, the restart table of
    ``--dropin-options`` inside them; fed back to ``elasticopt serve --stdio`` every one is answered."""
    import json

    sim = sia_checkout(tmp_path)
    rc = ss.main(["--simulator", str(sim), "--python", sys.executable, "--jobs", "4", "--policies", "elasticopt",
                  "--out", str(tmp_path / "o"), "--record",
                  "--dropin-options", '{"restart_penalties_s": {"cifar": 500}}'])
    assert rc == 0, capsys.readouterr().err
    base = tmp_path / "o" / "elasticopt" / "saturn-workload-1-first4"
    kept = base.with_suffix(".requests.jsonl").read_bytes()
    reqs = [json.loads(x) for x in kept.splitlines()]
    assert len(reqs) == len(hr.read_calls(base.with_suffix(".calls.json"))) > 0
    assert all(r["format"] == "elasticopt-request/1" for r in reqs)
    out = subprocess.run([sys.executable, "-m", "elasticopt", "serve", "--stdio", "--no-warm-up"], input=kept,
                         capture_output=True, timeout=600)
    answers = [json.loads(x) for x in out.stdout.splitlines()]
    assert out.returncode == 0 and len(answers) == len(reqs) and all(a["ok"] for a in answers)
    # run again into the same folder: the record is the new run's, not appended to the old one
    assert ss.main(["--simulator", str(sim), "--python", sys.executable, "--jobs", "4", "--policies", "elasticopt",
                    "--out", str(tmp_path / "o"), "--record",
                    "--dropin-options", '{"restart_penalties_s": {"cifar": 500}}']) == 0
    assert base.with_suffix(".requests.jsonl").read_bytes().count(b"\n") == len(reqs)


def test_perturbed_arrivals_a_paired_copy_per_seed(tmp_path, capsys):
    """``--perturb-arrivals S --seeds 1,2``: each workload runs as one copy per seed, the same copy for both
    policies, its arrivals within S of the original's, other cells as they were; the summary covers the copies."""
    sim = sia_checkout(tmp_path)
    rc = ss.main(["--simulator", str(sim), "--python", sys.executable, "--jobs", "5", "--perturb-arrivals", "30",
                  "--seeds", "1,2", "--out", str(tmp_path / "o")])
    out = capsys.readouterr().out
    assert rc == 0, out
    src = (sim / "workloads" / "saturn" / "workload-1.csv").read_text().splitlines()[:6]
    for seed in (1, 2):
        tag = f"saturn-workload-1-first5-arrivals30s-seed{seed}"
        assert set(_rows(out, tag)) == {"elasticopt", "sia"}
        copy = (tmp_path / "o" / "workloads" / f"{tag}.csv").read_text().splitlines()
        assert copy[0] == src[0] and len(copy) == len(src)
        before = {r.split(",")[0]: r.split(",") for r in src[1:]}
        for row in (r.split(",") for r in copy[1:]):
            assert row[2:] == before[row[0]][2:] and abs(float(row[1]) - float(before[row[0]][1])) <= 30
    summary = out[out.index("### Mean JCT over the workloads"):]
    assert "at or below on" in summary and "of 2 workloads" in summary
    assert ss.main(["--simulator", str(sim), "--python", sys.executable, "--perturb-arrivals", "30",
                    "--seeds", "a"]) == 2
    assert "--seeds 'a': expected comma-separated integers" in capsys.readouterr().err
