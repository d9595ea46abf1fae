"""``elasticopt simulate``: tidy results across policies and seeds, full names in a pipe, vector plots."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd


def test_simulate_seeds_tidy_table_and_plots(tmp_path):
    wl = tmp_path / "wl.csv"
    gen = [sys.executable, "-m", "elasticopt", "simulate", "--generate", str(wl), "--gpus", "8", "--jobs", "10",
           "--load", "2", "--duration-max-s", "3600", "--seed", "4"]
    assert subprocess.run(gen, capture_output=True, text=True).returncode == 0
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "elasticopt", "simulate", str(wl), "--gpus", "8", "--solver", "numpy-dp",
           "--policy", "elastic-goodput", "--policy", "fixed-batch", "--policy", "tiresias", "--seeds", "1,2",
           "--noise", "0.2", "--progress", "goodput", "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True)  # stdout is a pipe, not a terminal
    assert r.returncode == 0, r.stderr
    for name in ("elastic-goodput", "fixed-batch", "tiresias"):
        assert name in r.stdout  # not cut to "ela…"
    table = pd.read_csv(out / "results.csv")
    assert len(table) == 6 and set(table["seed"]) == {1, 2} and set(table["progress"]) == {"goodput"}
    assert {"policy", "completed", "jct_mean_s", "rescales_per_job", "restart_s_per_job"} <= set(table.columns)
    assert (table["completed"] == 10).all()
    # the seeds draw different throughput noise: some result differs
    e = table[table["policy"] == "elastic-goodput"].set_index("seed")["jct_mean_s"]
    assert e[1] != e[2]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["seeds"] == [1, 2] and set(summary["metrics_by_seed"]) == {"1", "2"}
    for stem in ("jct_cdf", "timeline"):
        for ext in ("png", "pdf", "svg"):
            assert (out / f"{stem}.{ext}").stat().st_size > 0
    assert (out / "timeline.pdf").read_bytes()[:4] == b"%PDF"


def test_simulate_bad_seeds_is_a_clear_error(tmp_path):
    wl = tmp_path / "wl.csv"
    subprocess.run([sys.executable, "-m", "elasticopt", "simulate", "--generate", str(wl), "--gpus", "4",
                    "--jobs", "3"], check=True, capture_output=True)
    r = subprocess.run([sys.executable, "-m", "elasticopt", "simulate", str(wl), "--gpus", "4", "--seeds", "a,b"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "--seeds" in r.stderr and "Traceback" not in r.stderr


def _small_workload(tmp_path):
    wl = tmp_path / "wl.csv"
    subprocess.run([sys.executable, "-m", "elasticopt", "simulate", "--generate", str(wl), "--gpus", "4",
                    "--jobs", "3"], check=True, capture_output=True)
    return wl


def test_unknown_solver_is_an_error_even_for_a_policy_without_one(tmp_path):
    # the policy "static" takes no solver: the option used to be dropped silently, exit 0
    wl = _small_workload(tmp_path)
    r = subprocess.run([sys.executable, "-m", "elasticopt", "simulate", str(wl), "--gpus", "4", "--policy", "static",
                        "--solver", "bogus"], capture_output=True, text=True)
    assert r.returncode == 2 and "bogus" in r.stderr and "Traceback" not in r.stderr


def test_solver_options_reach_the_policy_and_bad_ones_fail_first(tmp_path):
    wl = _small_workload(tmp_path)
    base = [sys.executable, "-m", "elasticopt", "simulate", str(wl), "--gpus", "4", "--policy", "elastic"]
    ok = subprocess.run(base + ["--solver", "dp:fixing=false"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run(base + ["--solver", "dp:no_such_option=1"], capture_output=True, text=True)
    assert bad.returncode == 2 and "no_such_option" in bad.stderr and "Traceback" not in bad.stderr


def test_bad_numbers_of_a_simulation_exit_2_naming_them_and_write_no_workload(tmp_path):
    """Each was an internal error (exit 4), or worse: ``--generate --duration-scale nan`` wrote a workload whose
    arrivals were NaN, ``--noise nan`` ran as exact belief, ``--checkpoint-every-s -1`` ran."""
    from elasticopt.cli import main

    wl = tmp_path / "wl.csv"
    assert main(["simulate", "--generate", str(wl), "--gpus", "8", "--jobs", "4", "--load", "1"]) == 0
    cases = [
        (["--generate", str(tmp_path / "g.csv"), "--gpus", "8", "--jobs", "4", "--duration-scale", "nan"],
         "duration_scale: expected a finite number > 0"),
        (["--generate", str(tmp_path / "g.csv"), "--gpus", "8", "--jobs", "4", "--duration-scale", "-1"],
         "duration_scale: expected a finite number > 0"),
        (["--generate", str(tmp_path / "g.csv"), "--gpus", "8", "--jobs", "4", "--duration-max-s", "-1"],
         "duration_max_s: expected a finite number of seconds > 0"),
        (["--generate", str(tmp_path / "g.csv"), "--gpus", "8", "--jobs", "4", "--seed", "-1"],
         "seed: expected an integer >= 0"),
        (["--cluster", "sia-64", "--jobs", "4", "--duration-scale", "0"], "duration_scale: expected a finite number > 0"),
        ([str(wl), "--gpus", "8", "--noise", "nan"], "throughput_noise: expected a finite number >= 0"),
        ([str(wl), "--gpus", "8", "--seed", "-1"], "seed: expected an integer >= 0"),
        ([str(wl), "--gpus", "8", "--checkpoint", str(tmp_path / "ck"), "--checkpoint-every-s", "-1"],
         "--checkpoint-every-s: expected a finite number of wall seconds >= 0"),
    ]
    for argv, words in cases:
        r = subprocess.run([sys.executable, "-m", "elasticopt", "simulate", *argv, "--quiet"], capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 2 and words in r.stderr and "internal error" not in r.stderr, (argv, r.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wl.csv"]  # no workload, no checkpoint written
