"""validation/pollux_simulator.py on a fake checkout laid out as the real artifact (tests/integrations/fake_hosts.py)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fake_hosts import pollux_checkout

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "validation" / "pollux_simulator.py"
_spec = importlib.util.spec_from_file_location("pollux_simulator", SCRIPT)
ps = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ps)  # type: ignore[union-attr]
hr = sys.modules["host_runs"]


def _rows(out: str, workload: str) -> dict[str, list[str]]:
    lines = out[out.index(f"### {workload}"):].splitlines()[4:]
    rows = {}
    for line in lines:
        if not line.startswith("| "):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = cells
    return rows


def test_help_runs():
    out = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "--simulator" in out.stdout and "results-jobload" in out.stdout


def test_a_relative_checkout_to_a_table_without_extra_options(tmp_path, monkeypatch, capsys):
    """The --help command as it is: relative --simulator, default --out (not in the checkout), the published
    results of the checkout found and read (nested summary.json), restarts and call times recorded."""
    sim = pollux_checkout(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(ps, "DEFAULT_OUT", tmp_path / "default-out")
    before = sorted(p.relative_to(sim) for p in sim.rglob("*"))
    rc = ps.main(["--simulator", "simulator", "--python", sys.executable, "--out", str(ps.DEFAULT_OUT)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert sorted(p.relative_to(sim) for p in sim.rglob("*") if "__pycache__" not in p.parts) == \
        [p for p in before if "__pycache__" not in p.parts]  # nothing written into the checkout
    for w, n in (("workload-1", 5), ("workload-2", 6)):
        rows = _rows(out, w)
        assert set(rows) == {"elasticopt", "published pollux", "published optimus", "published tiresias"}
        ours = rows["elasticopt"]
        assert ours[1] == f"{n}/{n}"
        log = hr.read_log(tmp_path / "default-out" / "elasticopt" / f"{w}.log")
        s = hr.summarize(log)
        assert float(ours[2]) == pytest.approx(s["mean_jct_s"], abs=0.5)
        assert ours[6] != "n/a" and float(ours[6]) == pytest.approx(s["restarts"], abs=0.005)
        assert int(ours[7]) > 0 and ours[8] != "n/a"  # per-call times of the drop-in
        pub = rows["published pollux"]
        assert float(pub[2]) == pytest.approx(400 + 10 * (n - 1) / 2, abs=0.5) and pub[6] == "n/a"
        assert float(pub[-1]) == pytest.approx(1.0)
        assert float(ours[-1]) == pytest.approx(s["mean_jct_s"] / float(pub[2]), abs=2e-3)
    assert "Policy calls over all workloads: elasticopt:" in out
    assert (tmp_path / "default-out" / "table.md").read_text() == out
    # the first 3 jobs are not the published workload: no published rows, no ratio to them (was 0.63 on the host)
    rc = ps.main(["--simulator", "simulator", "--python", sys.executable, "--workloads", "workload-2.csv",
                  "--jobs", "3", "--out", str(tmp_path / "cut")])
    out = capsys.readouterr().out
    assert rc == 0 and set(_rows(out, "workload-2-first3")) == {"elasticopt"}, out
    assert "published" not in out, out


def test_published_from_a_directory_mode_run_and_a_host_policy_rerun(tmp_path, capsys):
    """The artifact's directory mode (--output is a folder: <workload>.log + nested summary.json) read as
    --published; a host policy rerun next to the drop-in."""
    sim = pollux_checkout(tmp_path)
    pub = tmp_path / "mine" / "tiresias-1.0"
    pub.mkdir(parents=True)
    subprocess.run([sys.executable, "simulator.py", "--policy", "tiresias", "--output", str(pub), "workloads/"],
                   cwd=sim, check=True, capture_output=True)
    summary = json.loads((pub / "summary.json").read_text())
    assert set(summary["jcts"]) == {"workload-1", "workload-2"}  # the nested shape
    rc = ps.main(["--simulator", str(sim), "--python", sys.executable, "--published", str(tmp_path / "mine"),
                  "--policies", "elasticopt,tiresias", "--workloads", "workload-1.csv", "--out", str(tmp_path / "o")])
    out = capsys.readouterr().out
    assert rc == 0, out
    rows = _rows(out, "workload-1")
    assert set(rows) == {"elasticopt", "tiresias", "published tiresias"}
    assert rows["tiresias"][2:7] == rows["published tiresias"][2:7]  # same run, read from its log both times


def test_results_files_of_every_shape(tmp_path):
    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "summary.json").write_text(json.dumps({"jcts": {"x": 3600, "y": 7200, "z": 10800},
                                                                "restarts": {"x": 0, "y": 2, "z": 1}}))
    (tmp_path / "nested.json").write_text(json.dumps({"jcts": {"w": {"x": 3600, "y": 7200, "z": 10800}},
                                                      "avgs": {"w": 7200}, "mean": 7200}))
    (tmp_path / "b.csv").write_text("job,submission_time,completion_time\nx,0,3600\ny,100,7300\nz,0,10800\n")
    flat = hr.summarize(ps.load_results(tmp_path / "flat", "w"))
    nested = hr.summarize(ps.load_results(tmp_path / "nested.json", "w"))
    b = hr.summarize(ps.load_results(tmp_path / "b.csv", "w"))
    assert flat["mean_jct_s"] == nested["mean_jct_s"] == b["mean_jct_s"] == pytest.approx(7200)
    assert flat["restarts"] == pytest.approx(1.0) and nested["restarts"] != nested["restarts"]  # n/a
    with pytest.raises(ps.ElasticoptError, match="no 'v' among them"):
        ps.load_results(tmp_path / "nested.json", "v")
    xs = list(np.random.default_rng(0).uniform(0, 1e5, 101))
    assert hr.percentile(xs, 99) == pytest.approx(np.percentile(xs, 99))
    (tmp_path / "bad.json").write_text("[1]")
    with pytest.raises(ps.ElasticoptError, match="jcts"):
        ps.load_results(tmp_path / "bad.json", "w")


def test_bad_checkout_interpreter_and_policy_are_clear_errors(tmp_path, capsys):
    sim = pollux_checkout(tmp_path)
    assert ps.main(["--simulator", str(tmp_path), "--python", sys.executable]) == 2
    assert "simulator.py" in capsys.readouterr().err
    assert ps.main(["--simulator", str(sim), "--python", str(tmp_path / "no-python")]) == 2
    assert "cannot run it" in capsys.readouterr().err
    assert ps.main(["--simulator", str(sim), "--python", sys.executable, "--workloads", "none-*.csv"]) == 2
    assert "no workload matches" in capsys.readouterr().err
    assert ps.main(["--simulator", str(sim), "--python", sys.executable, "--policies", "fifo"]) == 2
    assert "unknown ['fifo']" in capsys.readouterr().err


def test_a_failing_host_run_names_its_log(tmp_path, capsys):
    sim = pollux_checkout(tmp_path)
    (sim / "pollux.py").write_text("raise ImportError('broken host')\n")
    assert ps.main(["--simulator", str(sim), "--python", sys.executable, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "exited with 1" in err and "broken host" in err and os.fspath(tmp_path / "o") in err


def test_draws_of_a_host_policy_in_parallel_and_the_summary_over_workloads(tmp_path, capsys):
    """--draws K: a row per draw of a host policy and their mean (the ratio's base when nothing is published);
    --parallel N runs the simulations at once; the last table: the drop-in against each reference per workload."""
    sim = pollux_checkout(tmp_path)
    out_dir = tmp_path / "o"
    argv = ["--simulator", str(sim), "--python", sys.executable, "--policies", "elasticopt,tiresias",
            "--draws", "2", "--parallel", "3", "--out", str(out_dir)]
    assert ps.main(argv) == 0
    out = capsys.readouterr().out
    for w in ("workload-1", "workload-2"):
        rows = _rows(out, w)
        mean = "tiresias (mean of 2 draws)"
        assert {"elasticopt", "tiresias draw 1", "tiresias draw 2", mean, "published pollux"} <= set(rows)
        assert (out_dir / "tiresias" / f"{w}.log").is_file() and (out_dir / "tiresias" / f"{w}.draw2.log").is_file()
        assert not (out_dir / "elasticopt" / f"{w}.draw2.log").exists()  # the drop-in runs once
        draws = [hr.summarize(hr.read_log(out_dir / "tiresias" / name)) for name in (f"{w}.log", f"{w}.draw2.log")]
        assert float(rows[mean][2]) == pytest.approx(sum(d["mean_jct_s"] for d in draws) / 2, abs=0.5)
        assert rows[mean][7] == rows["tiresias draw 1"][7] == "n/a"  # the runner times Pollux's calls only
    summary = out[out.index("### Mean JCT over the workloads"):]
    lines = [line for line in summary.splitlines() if line.startswith("| workload-")]
    assert len(lines) == 2
    ratios = []
    for line in lines:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows = _rows(out, cells[0])
        assert cells[1] == rows["elasticopt"][2] and cells[2] == rows["published pollux"][2]
        assert float(cells[3]) == pytest.approx(float(rows["elasticopt"][-1]), abs=2e-3)
        ratios.append(float(rows["elasticopt"][2]) / float(rows["published pollux"][2]))
    assert f"elasticopt / published pollux: at or below on {sum(r <= 1 for r in ratios)} of 2 workloads" in summary
    # --reuse reads every draw's log without running anything (the host is broken now)
    (sim / "simulator.py").write_text("raise SystemExit('must not run')\n")
    assert ps.main(argv + ["--reuse"]) == 0
    assert capsys.readouterr().out == out


def test_perturbed_arrivals_paired_copies_without_published_rows(tmp_path, capsys):
    """``--perturb-arrivals S --seeds 1,2``: each workload runs as one copy per seed, the same copy for every
    policy (arrivals within S of the original's, other cells as they were); a moved copy was never published,
    so its rows are the runs' own (the fake's Pollux policy refuses to run: Tiresias is the host policy here)."""
    sim = pollux_checkout(tmp_path)
    rc = ps.main(["--simulator", str(sim), "--python", sys.executable, "--workloads", "workload-1.csv",
                  "--policies", "elasticopt,tiresias", "--perturb-arrivals", "30", "--seeds", "1,2",
                  "--out", str(tmp_path / "o")])
    out = capsys.readouterr().out
    assert rc == 0, out
    src = (sim / "workloads" / "workload-1.csv").read_text().splitlines()
    copies = []
    for seed in (1, 2):
        tag = f"workload-1-arrivals30s-seed{seed}"
        rows = _rows(out, tag)
        assert set(rows) == {"elasticopt", "tiresias"}  # no published rows for a moved copy
        for name in rows:
            log = hr.read_log(tmp_path / "o" / name / f"{tag}.log")
            assert float(rows[name][2]) == pytest.approx(hr.summarize(log)["mean_jct_s"], abs=0.5)
        copy = (tmp_path / "o" / "workloads" / f"{tag}.csv").read_text().splitlines()
        assert copy[0] == src[0] and len(copy) == len(src)
        before = {r.split(",")[0]: r.split(",") for r in src[1:]}
        for row in (r.split(",") for r in copy[1:]):
            assert row[2:] == before[row[0]][2:] and abs(float(row[1]) - float(before[row[0]][1])) <= 30
        copies.append(copy)
    assert copies[0] != copies[1] and "### workload-1\n" not in out
    assert ps.main(["--simulator", str(sim), "--python", sys.executable, "--perturb-arrivals", "-1",
                    "--out", str(tmp_path / "o2")]) == 2
    assert "--perturb-arrivals -1.0: expected seconds >= 0" in capsys.readouterr().err
    assert ps.main(["--simulator", str(sim), "--python", sys.executable, "--perturb-arrivals", "30",
                    "--seeds", "x", "--out", str(tmp_path / "o2")]) == 2
    assert "--seeds 'x': expected comma-separated integers" in capsys.readouterr().err


def test_draws_and_parallel_below_one_are_clear_errors(tmp_path, capsys):
    sim = pollux_checkout(tmp_path)
    base = ["--simulator", str(sim), "--python", sys.executable, "--out", str(tmp_path / "o")]
    assert ps.main(base + ["--draws", "0"]) == 2
    assert "--draws 0: expected at least 1" in capsys.readouterr().err
    assert ps.main(base + ["--parallel", "0"]) == 2
    assert "--parallel 0: expected at least 1" in capsys.readouterr().err


def test_record_keeps_the_drop_ins_requests_only(tmp_path, capsys):
    """``--record``: the drop-in's run keeps one request per call in ``<log>.requests.jsonl``; a host policy's run
    (no service) keeps none."""
    sim = pollux_checkout(tmp_path)
    out_dir = tmp_path / "o"
    assert ps.main(["--simulator", str(sim), "--python", sys.executable, "--policies", "elasticopt,tiresias",
                    "--workloads", "workload-1.csv", "--jobs", "4", "--record", "--out", str(out_dir)]) == 0
    capsys.readouterr()
    base = out_dir / "elasticopt" / "workload-1-first4"
    reqs = [json.loads(x) for x in base.with_suffix(".requests.jsonl").read_bytes().splitlines()]
    assert len(reqs) >= len(hr.read_calls(base.with_suffix(".calls.json"))) > 0  # priced moves: more than calls
    assert all(r["format"] == "elasticopt-request/1" and r["objective"] == "values" for r in reqs)
    assert not list((out_dir / "tiresias").glob("*.requests.jsonl"))
