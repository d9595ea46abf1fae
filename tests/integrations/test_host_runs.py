"""validation/host_runs.py and host_workloads.py: running many host simulations at once, and the summary over workloads (hand-checked)."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "validation"))

import host_runs as hr  # noqa: E402
import host_workloads as hw  # noqa: E402

from elasticopt.errors import ElasticoptError  # noqa: E402


def test_runs_at_once_every_task_runs_and_failures_are_raised_together(capsys):
    started, both = [], threading.Barrier(2, timeout=30)  # each of the first two waits for the other to start
    done = []

    def waits(name):
        def run():
            started.append(name)
            both.wait()  # raises BrokenBarrierError (a test failure) unless the two run at the same time
            done.append(name)
        return run

    def fails():
        raise ElasticoptError("simulator.py exited with 1 (its output: /x/a.stdout)")

    tasks = [("a on w1", waits("a")), ("b on w1", waits("b")), ("c on w2", fails), ("d on w2", lambda: done.append("d"))]
    with pytest.raises(ElasticoptError) as err:
        hr.run_all(tasks, 2, "tool")
    assert sorted(done) == ["a", "b", "d"]  # the failure stopped nothing else
    assert "1 of 4 runs failed" in str(err.value) and "c on w2: simulator.py exited with 1" in str(err.value)
    assert "--reuse" in str(err.value)
    assert "tool: a on w1 ..." in capsys.readouterr().err
    order = []
    hr.run_all([(str(i), lambda i=i: (order.append(i), time.sleep(0.01))) for i in range(4)], 1, "tool")
    assert order == [0, 1, 2, 3]  # one at a time, in order
    with pytest.raises(ElasticoptError, match="--parallel 0: expected at least 1"):
        hr.run_all([], 0, "tool")


def _row(mean):
    return {"mean_jct_s": mean, "finished": 3, "submitted": 3}


def test_summary_table_hand_checked():
    per = [("w1", [("elasticopt", _row(90.0)), ("host", _row(100.0))]),
           ("w2", [("elasticopt", _row(110.0)), ("host", _row(100.0)), ("published", _row(120.0))]),
           ("w3", [("elasticopt", _row(50.0)), ("host", _row(50.0))])]
    text = hr.summary_table(per, "elasticopt", ["host", "published", "absent"])
    lines = text.splitlines()
    assert lines[2] == "| workload | elasticopt s | host s | elasticopt / host | published s | elasticopt / published |"
    assert lines[4] == "| w1 | 90 | 100 | 0.900 | n/a | n/a |"
    assert lines[5] == "| w2 | 110 | 100 | 1.100 | 120 | 0.917 |"
    g = math.exp((math.log(0.9) + math.log(1.1) + math.log(1.0)) / 3)
    assert f"elasticopt / host: at or below on 2 of 3 workloads; ratios 0.900-1.100, geometric mean {g:.3f}" in text
    assert "elasticopt / published: at or below on 1 of 1 workloads; ratios 0.917-0.917" in text
    assert hr.summary_table(per, "other", ["host"]) == "" and hr.summary_table(per, "elasticopt", ["x"]) == ""


def test_mean_of_draws_hand_checked():
    a = {"mean_jct_s": 100.0, "median_jct_s": 50.0, "p99_jct_s": 300.0, "makespan_s": 1000.0, "restarts": 2.0,
         "finished": 10, "submitted": 10}
    b = dict(a, mean_jct_s=120.0, restarts=4.0, finished=9)
    m = hr.mean_of_draws([a, b], [[1.0, 2.0], [3.0]])
    assert m["mean_jct_s"] == 110.0 and m["restarts"] == 3.0 and m["median_jct_s"] == 50.0
    assert m["finished"] == 9 and m["submitted"] == 10
    assert m["calls"] == 3 and m["call_median_ms"] == 2.0 and m["call_max_ms"] == 3.0


def test_draw_logs_are_named_beside_the_first():
    assert hr.draw_log(Path("o/pollux/w.log"), 1) == Path("o/pollux/w.log")
    assert hr.draw_log(Path("o/pollux/w.log"), 3) == Path("o/pollux/w.draw3.log")


def test_perturb_arrivals_moves_each_arrival_within_its_bound_and_keeps_the_rest(tmp_path):
    """Hand-checked: integers stay integers, decimals get one; never below 0; rows sorted by arrival; the same
    seed the same file, another seed another; a time that is not a number is a clear error."""
    src = tmp_path / "w.csv"
    src.write_text("name,time,application\na-0,0,cifar10\nb-1,5,bert\nc-2,100,yolov3\nd-3,100,ncf\n")
    one = hw.perturb_arrivals(src, tmp_path / "one.csv", 20.0, seed=7)
    lines = one.read_text().splitlines()
    assert lines[0] == "name,time,application" and len(lines) == 5
    rows = [line.split(",") for line in lines[1:]]
    times = {name: float(t) for name, t, _ in rows}
    assert all(t == int(t) and t >= 0 for t in times.values()) and [float(r[1]) for r in rows] == sorted(times.values())
    assert {(n, a) for n, _, a in rows} == {("a-0", "cifar10"), ("b-1", "bert"), ("c-2", "yolov3"), ("d-3", "ncf")}
    for name, was in (("a-0", 0), ("b-1", 5), ("c-2", 100), ("d-3", 100)):
        assert abs(times[name] - was) <= 20.5  # rounded to the second
    assert hw.perturb_arrivals(src, tmp_path / "again.csv", 20.0, seed=7).read_text() == one.read_text()
    assert hw.perturb_arrivals(src, tmp_path / "other.csv", 20.0, seed=8).read_text() != one.read_text()
    dec = tmp_path / "d.csv"
    dec.write_text("name,time\nx,90.0\n")
    assert hw.perturb_arrivals(dec, tmp_path / "d2.csv", 1.0, seed=1).read_text().splitlines()[1].count(".") == 1
    bad = tmp_path / "bad.csv"
    bad.write_text("name,time\nx,soon\n")
    with pytest.raises(ElasticoptError, match=r"row 2, column 'time': expected a number of seconds, found 'soon'"):
        hw.perturb_arrivals(bad, tmp_path / "b2.csv", 1.0, seed=1)
    with pytest.raises(ElasticoptError, match="no 'arrival' column to perturb"):
        hw.perturb_arrivals(bad, tmp_path / "b3.csv", 1.0, seed=1, column="arrival")


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie (a container's init may not reap an orphan at once)."""
    out = subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True).stdout.strip()
    return bool(out) and not out.startswith("Z")


def test_a_stopped_runner_stops_its_hosts_and_the_services_they_started(tmp_path):
    """SIGTERM to a runner (``kill``, ``timeout``): the running host and the process it started (the drop-in's
    service) stop with it, and the queued run never starts.  Before, both ran on after the runner was gone."""
    sim = tmp_path / "sim"
    sim.mkdir()
    (sim / "fakehost.py").write_text("")
    (sim / "sim.py").write_text(textwrap.dedent("""\
        import os, subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])  # the service
        with open(sys.argv[1] + ".tmp", "w") as fh:
            fh.write(f"{os.getpid()} {child.pid}")
        os.replace(sys.argv[1] + ".tmp", sys.argv[1])
        time.sleep(300)
    """))
    runner = textwrap.dedent(f"""\
        import sys
        sys.path.insert(0, {str(Path(hr.__file__).parent)!r})
        from functools import partial
        from pathlib import Path
        import host_runs as hr
        tmp = Path({str(tmp_path)!r})
        def run(k):
            hr.run_host(hr.HostRun(simulator=tmp / "sim", python=sys.executable, script="sim.py",
                                   args=(str(tmp / f"pids{{k}}"),), module="fakehost", cls="Policy", dropin=None,
                                   command=(), timed=(), stdout=tmp / f"out{{k}}.txt", calls=tmp / f"calls{{k}}.json"))
        hr.run_all([("one", partial(run, 1)), ("two", partial(run, 2))], 1, "test")
    """)
    proc = subprocess.Popen([sys.executable, "-c", runner])
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "pids1").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the host did not start"
            time.sleep(0.05)
        pids = [int(x) for x in (tmp_path / "pids1").read_text().split()]
        assert all(_alive(p) for p in pids)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM
        deadline = time.monotonic() + 30
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(p) for p in pids), "the host or its service outlived the runner"
        assert not (tmp_path / "pids2").exists()  # the queued run was not started
    finally:
        proc.kill()
        for p in locals().get("pids", ()):
            if _alive(p):
                os.kill(p, signal.SIGKILL)


def test_the_stop_handler_neither_re_enters_nor_waits_on_its_own_lock(capsys):
    """A second SIGTERM during the first one's handler (``timeout`` forwarding its TERM beside a ``kill``) used to
    re-enter the handler inside its lock: the runner hung for ever, its host running on (seen with the Gavel
    runner).  Now the second returns at once, and the handler takes the lock even where the main thread holds it."""
    with hr.hosts_stopped_on_signal():
        with hr._LIVE_LOCK, pytest.raises(SystemExit) as first:  # the main thread holds the lock: no deadlock
            hr._stop_hosts(signal.SIGTERM, None)
        assert first.value.code == 128 + signal.SIGTERM
        assert hr._stop_hosts(signal.SIGTERM, None) is None  # the repeated signal: nothing more to do
    assert "stopped by SIGTERM: 0 running simulation(s) stopped" in capsys.readouterr().err
    with hr.hosts_stopped_on_signal():  # a new run handles a signal again
        with pytest.raises(SystemExit):
            hr._stop_hosts(signal.SIGINT, None)


def test_the_service_a_drop_in_starts_imports_what_the_runner_imports(monkeypatch, tmp_path):
    """The drop-in starts the service from inside the host, whose PYTHONPATH is the host's: the default command
    carries the runner's own PYTHONPATH (or none), so the service is the elasticopt the runner runs.  Run as
    the drop-in runs it, with the host's PYTHONPATH in its environment."""
    assert hr.serve_command("my-serve --stdio --x 'a b'") == ["my-serve", "--stdio", "--x", "a b"]
    probe = ["-c", "import os, sys; print(os.environ.get('PYTHONPATH')); print(sys.path[1])"]
    host_env = dict(os.environ, PYTHONPATH=str(tmp_path / "host-checkout"))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "runner"))
    cmd = hr.serve_command()
    assert cmd[-5:] == [sys.executable, "-m", "elasticopt", "serve", "--stdio"]
    out = subprocess.run(cmd[:-4] + probe, env=host_env, capture_output=True, text=True, check=True).stdout.split()
    assert out == [str(tmp_path / "runner")] * 2
    monkeypatch.delenv("PYTHONPATH")
    out = subprocess.run(hr.serve_command()[:-4] + probe, env=host_env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[0] == "None" and str(tmp_path) not in out[1]
