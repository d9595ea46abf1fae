"""``elasticopt sweep``: spec parsing and its errors, the statistics, and runs that resume after kill -9 or go on Ray.

The run tests share one small spec (6 cells of 12 jobs on 8 GPUs, numpy-dp):
the table of an uninterrupted in-process run is the reference; a CLI run
killed with SIGKILL (its whole process group) after its first cell and run
again, and the same spec on a two-node Ray cluster started here, must give the
same table, wall-time columns aside.
"""

from __future__ import annotations

import csv
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elasticopt.cli import main
from elasticopt.errors import InstanceError
from elasticopt.sweep import TIMING_COLUMNS, compare, load_spec, parse_spec, run_sweep, t_interval, write_report
from elasticopt.sweep.spec import DEFAULTS, cell_key

SMALL = """
name = "tiny"
description = "the tests' sweep"
[grid]
policy = ["elastic", "fixed-batch", "static"]
seed = [0, 1]
load = 1.5
cluster = 8
jobs = 12
solver = "numpy-dp"
duration_max_s = 3600
"""


def _spec(tmp_path: Path, text: str = SMALL) -> Path:
    p = tmp_path / "spec.toml"
    p.write_text(text)
    return p


def _table(out: Path) -> list[dict]:
    with open(out / "results.csv", newline="") as fh:
        return [{k: v for k, v in r.items() if k not in TIMING_COLUMNS} for r in csv.DictReader(fh)]


# --- spec --------------------------------------------------------------------------------------------


def test_grid_axes_and_variants_expand_to_unique_cells(tmp_path):
    spec = parse_spec({"grid": {"policy": ["elastic", "fixed-batch"], "seed": [0, 1, 2], "load": 2},
                       "variant": [{"seed": 0, "restart_cost_s": [0, 300]}, {"seed": [0, 1]}]}, "x.toml")
    # 2 x 3 in the grid; the first variant adds 2 x 2; the second only repeats grid cells
    assert len(spec.cells) == 6 + 4
    assert spec.axes == ("policy", "seed", "restart_cost_s")
    first = spec.cells[0].as_dict()
    assert first == {**DEFAULTS, "policy": "elastic", "seed": 0, "load": 2.0}
    assert len({c.key for c in spec.cells}) == 10
    assert cell_key({**first, "restart_cost_s": 30}) == cell_key({**first, "restart_cost_s": 30.0})


_AXES = {"policy": st.sampled_from(["elastic", "fixed-batch", "static", "greedy"]),
         "seed": st.integers(0, 50), "load": st.sampled_from([0.5, 1, 2, 8]),
         "restart_cost_s": st.sampled_from([0, 30, 300.0]), "progress": st.sampled_from(["samples", "goodput"])}


@given(st.fixed_dictionaries({}, optional={k: st.lists(v, min_size=1, max_size=3) for k, v in _AXES.items()}))
def test_a_grid_is_the_product_of_its_distinct_axis_values(grid):
    spec = parse_spec({"grid": grid}, "g.toml")
    distinct = [len({float(x) if isinstance(x, (int, float)) else x for x in vals}) for vals in grid.values()]
    assert len(spec.cells) == math.prod(distinct)
    assert len({c.key for c in spec.cells}) == len(spec.cells)
    assert set(spec.axes) == {k for k, n in zip(grid, distinct) if n > 1}
    for c in spec.cells:
        p = c.as_dict()
        assert all(p[k] in grid[k] for k in grid) and c.key == cell_key(p)


@pytest.mark.parametrize("doc, where, expected", [
    ({"grid": {"load": [1, -2]}}, "grid.load[1]", "a number > 0"),
    ({"grid": {"lod": 1}}, "grid.lod", "a parameter"),
    ({"grid": {"seed": []}}, "grid.seed", "a non-empty list"),
    ({"grid": {}, "variant": [{"progress": "effective"}]}, "variant[0].progress", '"samples" or "goodput"'),
    ({"grid": {}, "report": {"confidence": 1.5}}, "report.confidence", "a number in (0, 1)"),
    ({}, "grid", "a [grid] table"),
    ({"grid": {}, "extra": 1}, "extra", "one of the top-level keys"),
])
def test_spec_errors_name_file_key_expected_and_found(doc, where, expected):
    with pytest.raises(InstanceError) as e:
        parse_spec(doc, "specs/x.toml")
    msg = str(e.value)
    assert msg.startswith(f"specs/x.toml: {where}: expected ") and expected in msg and "found" in msg


def test_cli_reports_a_bad_spec_without_traceback(tmp_path, capsys):
    bad = _spec(tmp_path, '[grid]\npolicy = "elastic"\nseed = "zero"\n')
    assert main(["sweep", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: grid.seed: expected an integer >= 0, found 'zero'" in err and "Traceback" not in err
    broken = _spec(tmp_path, "[grid\n")
    assert main(["sweep", str(broken)]) == 2
    assert "(syntax): expected valid TOML" in capsys.readouterr().err


@pytest.mark.parametrize("grid, key", [('policy = ["elastic", "no-such-policy"]', "policy"),
                                       ('solver = "dp:no_option=1"', "solver"),
                                       ('cluster = "sia"', "cluster"), ('workload = "missing.csv"', "workload")])
def test_unusable_values_fail_before_any_cell_runs(tmp_path, grid, key):
    spec = load_spec(_spec(tmp_path, f"[grid]\njobs = 5\n{grid}\n"))
    with pytest.raises(InstanceError, match=rf"spec.toml: {key}: expected .*found"):
        run_sweep(spec, tmp_path / "out")
    assert not list((tmp_path / "out" / "cells").glob("*.json"))


def test_list_checks_the_cells_as_the_run_does(tmp_path, capsys):
    """``sweep --list`` listed a spec whose policy does not exist as if it could run."""
    bad = _spec(tmp_path, '[grid]\njobs = 5\npolicy = ["elastic", "no-such-policy"]\n')
    assert main(["sweep", str(bad), "--out", str(tmp_path / "o"), "--list"]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: policy: expected a registered policy" in err and "no-such-policy" in err
    good = _spec(tmp_path, '[grid]\njobs = 5\npolicy = ["elastic", "static"]\n')
    assert main(["sweep", str(good), "--out", str(tmp_path / "o"), "--list"]) == 0
    assert "2 cells, 0 done, 2 to run" in capsys.readouterr().out


def test_admission_control_reaches_the_simulation(tmp_path):
    """admission_deadline_s / queue_limit: the cell runs what `simulate` runs with them (its drops included)."""
    from elasticopt.scheduling import SimulationConfig, simulate
    from elasticopt.sweep.cells import cell_workload, run_cell

    spec = parse_spec({"grid": {"policy": "fixed-batch", "cluster": 8, "load": 8, "jobs": 40, "seed": 1,
                                "solver": "numpy-dp", "duration_max_s": 3600,
                                "admission_deadline_s": [0, -1], "queue_limit": [0, 2]}}, "a.toml")
    cells = [c.as_dict() for c in spec.cells]
    rows = {(p["admission_deadline_s"], p["queue_limit"]): run_cell(p)["row"] for p in cells}
    assert len(rows) == 4
    jobs = list(cell_workload(cells[0]))
    for (deadline, limit), row in rows.items():
        ref = simulate(jobs, "fixed-batch", SimulationConfig(
            gpus=8, seed=1, admission_deadline_s=None if deadline < 0 else deadline, queue_limit=limit or None),
            policy_options={"solver": "numpy-dp"}).metrics
        assert (row["dropped"], row["completed"]) == (ref.dropped, ref.completed)
    assert rows[(-1.0, 0)]["dropped"] == 0 and rows[(0.0, 0)]["dropped"] > 0  # the load overflows 8 GPUs
    with pytest.raises(InstanceError, match="grid.admission_deadline_s: expected a number >= 0"):
        parse_spec({"grid": {"admission_deadline_s": -5}}, "a.toml")
    with pytest.raises(InstanceError, match="grid.queue_limit: expected an integer >= 1"):
        parse_spec({"grid": {"queue_limit": 1.5}}, "a.toml")


# --- statistics (hand-checked) -----------------------------------------------------------------------


def test_t_interval_by_hand():
    mean, sd, hw = t_interval([1.0, 2.0, 3.0], 0.95)
    # t_{0.975, 2} = 4.302653; sd = 1; half-width = 4.302653 / sqrt(3)
    assert (mean, sd) == (2.0, 1.0) and math.isclose(hw, 4.302653 / math.sqrt(3), rel_tol=1e-6)
    assert t_interval([5.0]) == (5.0, None, None)


def test_compare_pairs_by_seed():
    base = {k: DEFAULTS[k] for k in DEFAULTS}
    rows = [{**base, "policy": p, "seed": s, "completed": c, "completed_by_last_arrival": c, "jct_mean_s": j}
            for p, s, c, j in [("elastic", 0, 10, 100.0), ("fixed-batch", 0, 5, 400.0),
                               ("elastic", 1, 8, 300.0), ("fixed-batch", 1, 8, 150.0)]]
    (c,) = compare(rows, "elastic", "fixed-batch")
    assert c["seeds"] == 2 and c["done_ratio_mean"] == (2.0 + 1.0) / 2 and c["jct_ratio_mean"] == (4.0 + 0.5) / 2
    assert c["done_ge_every_seed"] is True and c["jct_le_every_seed"] is False
    assert "jct_both_ratio_mean" not in c  # no per-job JCTs given


def test_compare_over_the_jobs_both_completed_by_hand():
    base = {k: DEFAULTS[k] for k in DEFAULTS}
    rows = [{**base, "cell": f"{p}-{s}", "policy": p, "seed": s, "completed": c, "completed_by_last_arrival": c,
             "jct_mean_s": j} for p, s, c, j in [("elastic", 0, 3, 200.0), ("fixed-batch", 0, 2, 150.0),
                                                  ("elastic", 1, 2, 100.0), ("fixed-batch", 1, 2, 100.0)]]
    by_job = {"elastic-0": {"a": 100.0, "b": 100.0, "c": 400.0},  # c: a long job fixed-batch dropped
              "fixed-batch-0": {"a": 150.0, "b": 150.0},
              "elastic-1": {"a": 50.0, "b": 150.0}, "fixed-batch-1": {"a": 60.0, "d": 140.0}}
    (c,) = compare(rows, "elastic", "fixed-batch", jct_by_job=by_job)
    # own means: elastic 200 > 150 in seed 0; over the jobs both completed: seed 0 (a, b) 100 vs 150,
    # seed 1 (a) 50 vs 60: ratios 1.5 and 1.2; seed means 75 <= 105
    assert c["jct_le_every_seed"] is False
    assert math.isclose(c["jct_both_ratio_mean"], (1.5 + 1.2) / 2)
    assert c["jct_both_le_every_seed"] is True and c["jct_both_le_seed_mean"] is True


# --- runs ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The small spec run uninterrupted, in this process."""
    d = tmp_path_factory.mktemp("ref")
    spec = load_spec(_spec(d))
    res = run_sweep(spec, d / "out", workers=1)
    assert res.ran == 6 and res.already_done == 0
    doc = write_report(spec, d / "out", plots=False)
    assert doc["finished"] == 6
    return spec, _table(d / "out")


def test_report_files_and_plots(reference, tmp_path):
    spec, rows = reference
    assert [r["policy"] for r in rows] == ["elastic", "elastic", "fixed-batch", "fixed-batch", "static", "static"]
    assert {r["jobs_in_workload"] for r in rows} == {"12"}
    out = tmp_path / "out"
    run_sweep(spec, out)
    doc = write_report(spec, out)
    for stem in ("jct_cdf", "by_load"):
        for fmt in ("png", "pdf", "svg"):
            assert (out / "plots" / f"{stem}.{fmt}").stat().st_size > 0
    summary = {s["policy"]: s for s in doc["summary"]}
    assert summary["elastic"]["seeds"] == 2 and summary["elastic"]["completed_mean"] == 12
    assert (out / "results.parquet").is_file() == _has_pyarrow()
    md = (out / "summary.md").read_text()
    assert "elastic vs fixed-batch (paired by seed)" in md and "95% Student-t interval" in md


def _has_pyarrow() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def test_killed_sweep_resumes_to_the_same_table(reference, tmp_path):
    spec_path = _spec(tmp_path)
    # the 6 cells take ~0.5 s: on a loaded machine this process may wake only after the last one is written,
    # so an attempt that could not kill the sweep mid-way is made again (a fresh output folder each time)
    for attempt in range(5):
        out = tmp_path / f"out{attempt}"
        cmd = [sys.executable, "-m", "elasticopt", "sweep", str(spec_path), "--out", str(out), "--workers", "1",
               "--no-plots"]
        proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        cells = out / "cells"
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None and len(list(cells.glob("*.json"))) < 1:
            time.sleep(0.005)
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # kill -9 of the sweep and anything it started
        except ProcessLookupError:  # it had ended already: the attempt is made again
            pass
        proc.wait()
        partial = len(list(cells.glob("*.json")))
        if proc.returncode == -signal.SIGKILL and partial < 6:
            break
    assert proc.returncode == -signal.SIGKILL and 1 <= partial < 6, (partial, proc.stderr.read().decode())
    for f in cells.glob("*.json"):  # a cell file is whole or absent (a kill mid-write leaves only a temp file)
        assert json.loads(f.read_text())["format"] == "elasticopt-sweep-cell/1"
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert f"{partial} already done, {6 - partial} run now" in again.stderr
    assert _table(out) == reference[1]


def test_ray_cluster_gives_the_same_table(reference, tmp_path):
    if os.environ.get("CI"):
        import ray  # noqa: F401 -- on CI a missing Ray must fail, not skip
    else:
        pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        spec = load_spec(_spec(tmp_path))
        res = run_sweep(spec, tmp_path / "out", address=cluster.address)
        assert res.ran == 6 and res.backend.startswith("ray")
        write_report(spec, tmp_path / "out", plots=False)
        pids = {json.loads(p.read_text())["pid"] for p in (tmp_path / "out" / "cells").glob("*.json")}
        assert os.getpid() not in pids  # the cells ran in Ray workers, not in this driver
        assert _table(tmp_path / "out") == reference[1]
    finally:
        cluster.shutdown()


def test_plot_names_keep_every_axis_value():
    from elasticopt.sweep.report import _slug

    # a dot would read as a suffix and two scenarios would write the same file
    assert _slug((("restart_cost_s", 30.0), ("submitted_batch", "max"))) == "restart_cost_s=30-submitted_batch=max"
    assert _slug((("noise", 0.1), ("cluster", "t4:6x4,a100:2x8"))) == "noise=0p1-cluster=t4_6x4_a100_2x8"
