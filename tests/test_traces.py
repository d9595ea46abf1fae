"""Whole traces and other schedulers' workload files (scheduling/traces.py), and checkpointed replays.

Fixtures are small hand-written files in each format (Philly's CSV, Gavel's
two trace layouts, Sia's / Pollux's CSV); the figures are checked by hand.
"""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from elasticopt.errors import InstanceError
from elasticopt.scheduling import SimulationConfig, simulate
from elasticopt.scheduling.checkpoint import Checkpointer, fingerprint, load_checkpoint
from elasticopt.scheduling.traces import load_any, read_gavel_trace, read_philly

PHILLY = """timestamp,duration,num_gpus,gpu_time,cluster
2017-10-09 07:01:55,66.0,1,66.0,11cb48
2017-10-09 06:13:03,2951.0,4,11804.0,6214e9
2017-10-09 06:13:03,120.0,12,1440.0,6214e9
2017-10-09 08:13:03,600.0,2,1200.0,6214e9
"""


def test_philly_rows_keep_arrival_gpus_and_duration(tmp_path):
    p = tmp_path / "philly.csv"
    p.write_text(PHILLY)
    jobs = read_philly(p, seed=3)
    # arrival order (ties in file order), seconds after the first submission (06:13:03)
    assert [j.id for j in jobs] == ["philly-00001", "philly-00002", "philly-00000", "philly-00003"]
    assert [j.arrival_s for j in jobs] == [0.0, 0.0, 48 * 60 + 52.0, 2 * 3600.0]
    # GPUs as traced; 12 has no batch divisible for the t4 profiles' ranges here -> the power of two below
    assert [j.submitted_gpus for j in jobs] == [4, 8, 1, 2]
    for j, d in zip(jobs, (2951.0, 120.0, 66.0, 600.0)):  # the traced duration on the submitted (k, b)
        assert j.total_samples / j.throughput.samples_per_s(j.submitted_gpus, j.submitted_batch) == pytest.approx(d)
    assert [(j.throughput.name, j.submitted_batch) for j in read_philly(p, seed=3)] == \
        [(j.throughput.name, j.submitted_batch) for j in jobs]  # same seed, same jobs
    assert load_any(p, seed=3)[0].id == "philly-00001"  # recognised by its header


def test_philly_errors_name_the_row(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text(PHILLY.replace("2017-10-09 08:13:03", "yesterday"))
    with pytest.raises(InstanceError, match=r"bad.csv: row 5.timestamp: expected a date and time.*'yesterday'"):
        read_philly(p)
    p.write_text(PHILLY.replace("66.0,1,66.0", "0,1,66.0"))
    with pytest.raises(InstanceError, match=r"row 2: expected a finite duration > 0"):
        read_philly(p)


# Gavel's parse_trace layout (10 fields) and its traces/msr layout (7 fields)
GAVEL_10 = ("ResNet-50 (batch size 32)\tpython3 main.py -b 32\timage_classification/imagenet\t--num_minibatches\t1"
            "\t1000\t2\t1\t-1.000000\t0\n"
            "Transformer (batch size 64)\tpython3 train.py\ttranslation\t-step\t1\t500\t1\t1\t-1.000000\t3600.5\n")
GAVEL_7 = "LM (batch size 20)\tcd %s && python3 main.py\t--steps\t1\t2000\t120.000000\t4\n"


def test_gavel_trace_layouts(tmp_path, caplog):
    p = tmp_path / "small.trace"
    p.write_text(GAVEL_10)
    a, b = read_gavel_trace(p)  # K80 by default
    assert (a.arrival_s, a.submitted_gpus, a.total_samples, a.throughput.name) == (0.0, 2, 1000 * 32 * 2,
                                                                                  "k80/resnet50")
    assert (b.arrival_s, b.submitted_gpus, b.total_samples) == (3600.5, 1, 500 * 64)
    assert [j.total_samples for j in load_any(p)] == [a.total_samples, b.total_samples]  # by its suffix
    q = tmp_path / "msr.trace"
    q.write_text(GAVEL_7)
    (c,) = read_gavel_trace(q, gpu_type="v100")
    assert (c.arrival_s, c.submitted_gpus, c.total_samples, c.throughput.name) == (120.0, 4, 2000 * 20 * 4, "v100/lm")
    p.write_text("A3C (batch size 4)\tx\ty\tz\t1\t10\t1\t1\t-1\t0\n" + GAVEL_10)
    with pytest.raises(InstanceError, match=r"small.trace: line 1.job_type: expected a model with a fitted profile"):
        read_gavel_trace(p)
    skipped: dict = {}
    assert len(read_gavel_trace(p, skipped=skipped)) == 2 and skipped == {"A3C": 1}
    with caplog.at_level("WARNING"):
        assert len(load_any(p)) == 2
    assert "read 2 jobs; left out 1 of models without a fitted K80 profile (A3C: 1)" in caplog.text
    p.write_text("ResNet-50 (batch size 32)\tonly\tthree\n")
    with pytest.raises(InstanceError, match=r"line 1: expected 10 tab-separated fields"):
        read_gavel_trace(p)


def test_sia_workload_csv(tmp_path):
    p = tmp_path / "workload-1.csv"  # Sia's sia-simulator/workloads/*: Pollux's columns
    p.write_text("name,time,application,num_replicas,batch_size\ncifar10-0,107,cifar10,1,128\n"
                 "bert-2,811.66189,bert,2,24\n")
    jobs = load_any(p)
    assert [(j.id, j.arrival_s, j.throughput.name) for j in jobs] == [("cifar10-0", 107.0, "t4/cifar10"),
                                                                     ("bert-2", 811.66189, "t4/bert")]


DATA = os.environ.get("ELASTICOPT_DATA")


@pytest.mark.skipif(DATA is None and not os.environ.get("CI"), reason="ELASTICOPT_DATA not set (CI sets it)")
def test_the_whole_philly_trace_is_read():
    jobs = read_philly("philly")
    assert len(jobs) == 82_247 and jobs[0].arrival_s == 0.0
    assert max(j.arrival_s for j in jobs) == pytest.approx(108.896875 * 86400, abs=1)
    assert sum(j.submitted_gpus == 1 for j in jobs) == 76_627  # as traced


def test_resumed_simulation_ends_as_an_uninterrupted_one(tmp_path):
    from elasticopt.scheduling.workload_generator import generate_workload

    jobs = generate_workload(30, 16, 2.0, seed=1)
    cfg = SimulationConfig(gpus=16, throughput_noise=0.1)  # the noise factors travel in the checkpoint too
    ref = simulate(jobs, "elastic", cfg, policy_options={"solver": "numpy-dp"})
    key = fingerprint(jobs, cfg, "elastic")
    saver = Checkpointer(tmp_path / "ck.pkl", key)
    seen = []

    class Crash(Exception):
        pass

    def save_then_crash(state):
        seen.append(state["finished"])
        if len(seen) == 25:
            saver(state)
            raise Crash

    with pytest.raises(Crash):
        simulate(jobs, "elastic", cfg, policy_options={"solver": "numpy-dp"}, checkpoint=save_then_crash,
                 checkpoint_every_s=0.0)
    state = load_checkpoint(tmp_path / "ck.pkl", key)
    assert 0 < state["finished"] < 30
    res = simulate(jobs, "elastic", cfg, resume=state)
    assert res.records == ref.records and res.timeline == ref.timeline
    assert [d.actions for d in res.decisions] == [d.actions for d in ref.decisions]
    with pytest.raises(InstanceError, match="ck.pkl: key: expected the checkpoint of this run"):
        load_checkpoint(tmp_path / "ck.pkl", fingerprint(jobs, cfg, "fixed-batch"))


TIMING = {"decision_s_mean", "decision_s_p95", "decision_s_max", "solver_s_mean", "wall_s"}


def _rows(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return [{k: v for k, v in r.items() if k not in TIMING} for r in csv.DictReader(fh)]


def test_cli_trace_replay_killed_resumes_from_its_checkpoint(tmp_path):
    trace = tmp_path / "trace.csv"
    rows = ["timestamp,duration,num_gpus,gpu_time,cluster"]
    for i in range(120):  # 120 jobs, one every 2 minutes, on a 16-GPU cluster
        rows.append(f"2017-10-09 {6 + i // 30:02d}:{(2 * i) % 60:02d}:00,{600 + 37 * (i % 11)},{1 + (i % 3 == 0)},0,x")
    trace.write_text("\n".join(rows) + "\n")
    base = [sys.executable, "-m", "elasticopt", "simulate", "--trace", str(trace), "--gpus", "16",
            "--policy", "elastic", "--policy", "fixed-batch", "--solver", "numpy-dp"]
    ref = subprocess.run(base + ["--out", str(tmp_path / "ref")], capture_output=True, text=True, timeout=120)
    assert ref.returncode == 0, ref.stderr
    ck = tmp_path / "ck"
    cmd = base + ["--checkpoint", str(ck), "--checkpoint-every-s", "0.05", "--out", str(tmp_path / "out")]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and proc.poll() is None and not list(ck.glob("elastic-*.state.pkl")):
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert list(ck.glob("elastic-*.state.pkl")) and not list(ck.glob("*.result.pkl"))  # killed mid-run
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert len(list(ck.glob("*.result.pkl"))) == 2 and not list(ck.glob("*.state.pkl"))
    assert _rows(tmp_path / "out" / "results.csv") == _rows(tmp_path / "ref" / "results.csv")


def test_bench_simulator_trace_prints_the_whole_trace_figures(tmp_path):
    trace = tmp_path / "philly.csv"
    trace.write_text(PHILLY)
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, str(root / "benchmarks" / "bench_simulator.py"), "--trace", str(trace),
                          "--gpus", "16", "--solver", "numpy-dp", "--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    import json

    doc = json.loads(out.stdout)
    w = doc["with_hysteresis"]
    assert doc["jobs"] == 4 and doc["gpus"] == 16 and "without_hysteresis" not in doc
    assert w["completed"] == 4 and w["decisions"] >= 4
    assert {"simulate_wall_s", "simulate_cpu_s", "decision_ms_median", "solver_ms_median", "rescales_per_job"} <= set(w)
    assert doc["peak_rss_mib"] > 0 and "whole-trace wall <= 600 s" in doc["targets"]
