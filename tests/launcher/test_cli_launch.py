"""``elasticopt launch`` with the fake worker: jobs file, records, launcher killed and restarted."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from launcher_helpers import FAKE

from elasticopt.errors import InstanceError
from elasticopt.launcher.jobsfile import EXAMPLES, load_jobs
from elasticopt.launcher.journal import replay
from elasticopt.launcher.recovery import job_history, open_since_s
from elasticopt.scheduling import JobHistory
from elasticopt.scheduling.records import read_jobs_csv

RATES = [[1, 64, 2000.0], [1, 128, 2200.0], [2, 128, 3800.0], [2, 256, 4000.0]]


def job(jid, total, arrival=0.0, rate=4000, **kw):
    return {"id": jid, "arrival_s": arrival, "total_samples": total, "batch_min": 64, "batch_max": 256,
            "max_local": 128, "gpus_max": 2, "throughput": RATES, "args": ["--rate", str(rate)], **kw}  # fmt: skip


def write(path: Path, jobs: list[dict]) -> Path:
    path.write_text(json.dumps({"format": "elasticopt-jobs/1",
                                "defaults": {"script": "example:fake", "mode": "python", "checkpoint_every_s": 0.2},
                                "jobs": jobs}))  # fmt: skip
    return path


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "elasticopt.cli.launch", *args]


def test_jobs_file_format(tmp_path):
    f = write(tmp_path / "jobs.json", [job("a", 1000), job("b", 2000, arrival=5, script="train.py", args=["-x", 1])])
    a, b = load_jobs(f)
    assert a.payload["script"] == str(EXAMPLES["example:fake"]) and a.payload["mode"] == "python"
    assert b.payload["script"] == str(tmp_path / "train.py") and b.payload["args"] == ["-x", "1"]
    assert b.arrival_s == 5 and b.total_samples == 2000 and a.throughput.samples_per_s(2, 128) == 3800.0
    bad = write(tmp_path / "bad.json", [job("a", 1000, mode="mpirun")])
    with pytest.raises(InstanceError, match=r"jobs\[0\]\.mode"):
        load_jobs(bad)
    bad.write_text(json.dumps({"format": "elasticopt-jobs/1", "jobs": [job("a", 1000)]}))
    with pytest.raises(InstanceError, match=r"jobs\[0\]\.script"):
        load_jobs(bad)
    with pytest.raises(InstanceError, match=r"jobs\[1\]\.id"):
        load_jobs(write(tmp_path / "dup.json", [job("a", 1000), job("a", 1000)]))


def test_launch_writes_simulator_records_and_reports_failures(tmp_path):
    f = write(tmp_path / "jobs.json", [
        job("a", 6000), job("b", 3000, arrival=0.5),
        job("broken", 1000, args=["--crash-at-start"]), job("missing", 1000, script="nope.py"),
    ])  # fmt: skip
    out = tmp_path / "run"
    res = subprocess.run(cli(str(f), "--cpu-slots", "2", "--out", str(out), "--tick-s", "1"),
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert res.returncode == 1, res.stderr  # some job failed
    assert "job broken failed" in res.stderr and "log.txt" in res.stderr
    recs = {r.job_id: r for r in read_jobs_csv(out / "jobs.csv")}
    assert {k: r.status for k, r in recs.items()} == {"a": "completed", "b": "completed",
                                                      "broken": "failed", "missing": "failed"}
    assert recs["a"].samples_done == 6000 and recs["a"].completion_s > recs["a"].first_start_s >= 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["metrics"]["completed"] == 2 and summary["mode"] == "launcher"
    assert summary["jobs"]["a"]["measured_samples_per_s"]  # observed throughput is kept
    assert (out / "timeline.csv").read_text().startswith("time_s,gpus_in_use")
    workload = json.loads((out / "workload.json").read_text())
    assert workload["format"] == "elasticopt-workload/1" and len(workload["jobs"]) == 4


def test_launcher_killed_and_restarted_finds_its_jobs(tmp_path):
    f = write(tmp_path / "jobs.json", [
        job("quick", 500, submitted_gpus=1, submitted_batch=64),
        job("long1", 24000, rate=2000, submitted_gpus=1, submitted_batch=64),
        job("long2", 24000, rate=2000, submitted_gpus=1, submitted_batch=64),
    ])  # fmt: skip
    out = tmp_path / "run"
    cmd = cli(str(f), "--cpu-slots", "3", "--out", str(out), "--policy", "static", "--quiet")
    launcher = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        state = replay(out / "journal.jsonl")
        if state.jobs.get("quick") and state.jobs["quick"].completed_at and all(
            (out / "jobs" / j / "gen-0001" / "status.json").exists() for j in ("long1", "long2")
        ):
            break
        assert time.monotonic() < deadline and launcher.poll() is None
        time.sleep(0.05)
    launcher.send_signal(signal.SIGKILL)
    launcher.wait(10)
    pids = {j: state.jobs[j].open_generation["pid"] for j in ("long1", "long2")}
    for pid in pids.values():
        os.kill(pid, 0)  # the jobs outlive their launcher
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    state = replay(out / "journal.jsonl")
    for j in ("long1", "long2"):  # adopted: the same generation ran to the end, nothing lost
        assert state.jobs[j].generation == 1 and state.jobs[j].completed_at is not None
        assert state.jobs[j].lost_samples == 0
    assert state.jobs["quick"].generation == 1  # not run again
    with open(out / "jobs.csv") as fh:
        rows = {r["job_id"]: r for r in csv.DictReader(fh)}
    assert {r["status"] for r in rows.values()} == {"completed"}
    # the second launcher's autoscaler adopted the jobs with their history: complete records
    recs = {r.job_id: r for r in read_jobs_csv(out / "jobs.csv")}
    events = [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()]
    resumed_s = next(ev["time"] for ev in events if ev.get("resumed")) - state.t0
    for j in ("long1", "long2"):
        r = recs[j]
        assert r.first_start_s == pytest.approx(state.jobs[j].first_start_s, abs=1e-3)
        assert 0 <= r.first_start_s < resumed_s < r.completion_s
        assert (r.starts, r.rescales, r.final_gpus, r.final_batch) == (1, 0, 1, 64)
        assert r.gpu_s == pytest.approx(r.completion_s - r.first_start_s, abs=0.5)  # 1 GPU since its first start
    q = recs["quick"]  # finished under the first launcher: rebuilt from the journal
    assert 0 <= q.first_start_s < q.completion_s < resumed_s and q.samples_done == 500
    assert 0 < q.gpu_s <= q.completion_s - q.first_start_s + 1e-3
    assert (q.starts, q.final_gpus, q.final_batch) == (1, 1, 64)


def test_journal_keeps_what_adopted_records_need(tmp_path):
    t0 = 1000.0
    lines = [
        {"event": "session", "t0": t0, "time": t0},
        {"event": "generation_start", "job_id": "a", "generation": 1, "gpus": 2, "batch": 128, "started_at": 1010.0},
        {"event": "stop_requested", "job_id": "a", "generation": 1, "reason": "preempt"},
        {"event": "generation_end", "job_id": "a", "generation": 1, "reason": "stopped", "time": 1030.0},
        {"event": "generation_start", "job_id": "a", "generation": 2, "gpus": 1, "batch": 64, "started_at": 1050.0},
        {"event": "stop_requested", "job_id": "a", "generation": 2, "reason": "rescale"},
        {"event": "generation_end", "job_id": "a", "generation": 2, "reason": "stopped", "time": 1060.0},
        {"event": "generation_start", "job_id": "a", "generation": 3, "gpus": 2, "batch": 64, "started_at": 1061.0},
        {"event": "generation_end", "job_id": "a", "generation": 3, "reason": "crashed", "time": 1065.0},
        {"event": "generation_start", "job_id": "a", "generation": 4, "gpus": 2, "batch": 64, "started_at": 1066.0},
    ]  # fmt: skip
    path = tmp_path / "journal.jsonl"
    path.write_text("".join(json.dumps(ev) + "\n" for ev in lines))
    state = replay(path)
    h = job_history(state, "a")
    assert h == JobHistory(first_start_s=10.0, gpu_s=2 * 20 + 1 * 10 + 2 * 4, starts=2, rescales=1, stops=1,
                           last_alloc=(2, 64))  # fmt: skip
    assert open_since_s(state, "a") == 66.0  # the open generation: the autoscaler accrues it from here
    with open(path, "a") as fh:
        fh.write(json.dumps({"event": "completed", "job_id": "a", "time": 1070.0, "samples_done": 9}) + "\n")
    state = replay(path)
    assert job_history(state, "a").gpu_s == 58 + 2 * 4 and open_since_s(state, "a") is None
    assert job_history(state, "never") == JobHistory()


def test_launcher_imports_without_torch():
    code = ("import sys, elasticopt.launcher.torchrun, elasticopt.launcher.driver, elasticopt.cli.launch, "
            "elasticopt.launcher.examples.fake_job; assert 'torch' not in sys.modules, 'torch imported'")  # fmt: skip
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    assert Path(FAKE).exists()


@pytest.mark.parametrize("solver, word", [("bogus", "bogus"), ("dp:no_such_option=1", "no_such_option")])
def test_bad_solver_fails_before_any_job_starts(tmp_path, solver, word):
    f = write(tmp_path / "jobs.json", [job("a", 1000)])
    out = tmp_path / "run"
    res = subprocess.run(cli(str(f), "--cpu-slots", "1", "--out", str(out), "--policy", "static", "--solver", solver),
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert res.returncode == 2 and word in res.stderr and "Traceback" not in res.stderr
    assert not (out / "jobs.csv").exists()


@pytest.mark.parametrize("flag, value, words", [
    ("--tick-s", "nan", "tick_s: expected a finite number of seconds > 0"),
    ("--tick-s", "-1", "tick_s: expected a finite number of seconds > 0"),
    ("--restart-cost-s", "nan", "restart_cost_s: expected a finite number of seconds >= 0"),
    ("--stop-timeout-s", "-1", "stop_timeout_s: expected a finite number of seconds >= 0"),
    ("--max-restarts", "-1", "max_restarts: expected an integer >= 0"),
])
def test_bad_launch_settings_fail_before_any_job_starts(tmp_path, flag, value, words):
    """LaunchConfig had no checks: these ran (a NaN tick, a negative stop timeout) or failed deep in a run."""
    f = write(tmp_path / "jobs.json", [job("a", 1000)])
    out = tmp_path / "run"
    res = subprocess.run(cli(str(f), "--cpu-slots", "1", "--out", str(out), "--quiet", flag, value),
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert res.returncode == 2 and words in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert not out.exists()


def test_solver_options_reach_the_policy(tmp_path):
    f = write(tmp_path / "jobs.json", [job("a", 2000)])
    out = tmp_path / "run"
    res = subprocess.run(cli(str(f), "--cpu-slots", "2", "--out", str(out), "--tick-s", "1",
                             "--solver", "dp:fixing=false"), capture_output=True, text=True, timeout=120)  # fmt: skip
    assert res.returncode == 0, res.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["solver_options"] == {"fixing": False} and summary["metrics"]["completed"] == 1
