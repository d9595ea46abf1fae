"""validation/blox_simulator.py on a fake Blox checkout laid out like msr-fiddle/blox c8851b2 (simulator_simple.py,
las_scheduler.py, schedulers/, placement/placement.py, blox/deployment/grpc_stubs/*_pb2.py).  The fake is a toy
with Blox's calling convention (not Blox's code): two processes (here sharing a file instead of gRPC), the loop
builds ``schedulers.Las(args)`` and ``placement.JobPlacement(args)``, calls ``schedule`` twice per round around
pruning finished jobs, and writes ``{prefix}_{start}_{stop}_Las_load_{load}_job_stats.json`` ({job: [submit, end]})."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "validation" / "blox_simulator.py"
_spec = importlib.util.spec_from_file_location("blox_simulator", SCRIPT)
bs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bs)  # type: ignore[union-attr]

FAKE_SIMULATOR = '''
import argparse, json, random, time
p = argparse.ArgumentParser()
p.add_argument("--sim-type"); p.add_argument("--cluster-job-log", default="")
p.add_argument("--jobs-per-hour", type=int, default=5); p.add_argument("--start-job-track", type=int, default=3000)
p.add_argument("--end-job-track", type=int, default=4000); p.add_argument("--scheduler", default="Fifo")
p.add_argument("--exp-prefix"); p.add_argument("--simulator-rpc-port", type=int, default=50050)
a = p.parse_args()
assert a.sim_type == "trace-synthetic"
json.load(open(a.cluster_job_log))  # the Philly trace: JSON
rng = random.Random(1)
jobs, t = {}, 0.0
for j in range(a.end_job_track + 5):
    t += rng.expovariate(a.jobs_per_hour / 3600.0)
    jobs[j] = {"submit_time": t, "num_GPUs": rng.choice([1, 2, 4]), "work": rng.uniform(600, 6000)}
json.dump({"jobs": jobs, "track": [a.start_job_track, a.end_job_track], "load": a.jobs_per_hour},
          open("sim_%d.json" % a.simulator_rpc_port, "w"))
import socket
server = socket.socket()  # listens on the simulator's port, as Blox's gRPC server does
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", a.simulator_rpc_port))
server.listen(8)
while True:
    time.sleep(1)
'''

FAKE_SCHEDULERS = '''
class Las:
    def __init__(self, args):
        self.args = args
    def schedule(self, job_state, cluster_state):
        order = sorted(job_state.active_jobs.items(), key=lambda kv: kv[1]["attained"])
        return {"job_order": order, "run_all_jobs": False}

class Fifo(Las):
    def schedule(self, job_state, cluster_state):
        order = sorted(job_state.active_jobs.items(), key=lambda kv: kv[1]["submit_time"])
        return {"job_order": order, "run_all_jobs": False}
'''

FAKE_PLACEMENT = '''
class JobPlacement:
    def __init__(self, args):
        pass
    def place(self, job_state, cluster_state, new_job_schedule):
        df = cluster_state.gpu_df
        free = list(df.loc[~df["IN_USE"], "GPU_ID"])
        running = {}
        for row in df.itertuples():
            if row.IN_USE:
                running.setdefault(row.JOB_IDS, []).append(row.GPU_ID)
        launch, suspend, keep = {}, [], set()
        for jid, job in new_job_schedule["job_order"]:
            if jid in running:
                keep.add(jid)
                continue
            if len(free) >= job["num_GPUs"]:
                launch[jid], free = free[:job["num_GPUs"]], free[job["num_GPUs"]:]
        return suspend, launch
'''

FAKE_LOOP = '''
import argparse, json, os, time
import pandas as pd
import schedulers
from placement import placement

class JobState:
    def __init__(self):
        self.active_jobs = {}

class ClusterState:
    def __init__(self, nodes, g):
        rows = [{"GPU_ID": n * g + i, "Local_GPU_ID": i, "Node_ID": n, "IP_addr": "", "IN_USE": False, "JOB_IDS": None}
                for n in range(nodes) for i in range(g)]
        self.gpu_df = pd.DataFrame(rows)
        self.server_map = {n: {"numGPUs": g} for n in range(nodes)}

p = argparse.ArgumentParser()
p.add_argument("--simulate", action="store_true"); p.add_argument("--load", type=int)
p.add_argument("--exp-prefix"); p.add_argument("--simulator-rpc-port", type=int, default=50050)
p.add_argument("--round-duration", type=int, default=300)
args = p.parse_args()
path = "sim_%d.json" % args.simulator_rpc_port
for _ in range(100):
    if os.path.exists(path):
        break
    time.sleep(0.1)
sim = json.load(open(path))
jobs = {int(k): v for k, v in sim["jobs"].items()}
start, stop = sim["track"]
policy, place = schedulers.Las(args), placement.JobPlacement(args)
js, cs, now, stats = JobState(), ClusterState(2, 4), 0.0, {}
while not all(j in stats for j in range(start, stop + 1)):  # Blox's JobState: START..STOP inclusive
    for j, v in jobs.items():
        if v["submit_time"] <= now and j not in js.active_jobs and j not in stats:
            js.active_jobs[j] = {"submit_time": v["submit_time"], "num_GPUs": v["num_GPUs"], "attained": 0.0,
                                 "left": v["work"]}
    policy.schedule(js, cs)
    for j in [j for j, v in js.active_jobs.items() if v["left"] <= 0]:  # prune_jobs
        stats[j] = [js.active_jobs.pop(j)["submit_time"], now]
        cs.gpu_df.loc[cs.gpu_df["JOB_IDS"] == j, ["IN_USE", "JOB_IDS"]] = [False, None]
    schedule = policy.schedule(js, cs)
    suspend, launch = place.place(js, cs, schedule)
    for j in suspend:
        cs.gpu_df.loc[cs.gpu_df["JOB_IDS"] == j, ["IN_USE", "JOB_IDS"]] = [False, None]
    for j, ids in launch.items():
        rows = cs.gpu_df["GPU_ID"].isin(ids)
        assert not cs.gpu_df.loc[rows, "IN_USE"].any()
        cs.gpu_df.loc[rows, ["IN_USE", "JOB_IDS"]] = [True, j]
    for row in cs.gpu_df.itertuples():
        if row.IN_USE:
            v = js.active_jobs[row.JOB_IDS]
            v["left"] -= args.round_duration / v["num_GPUs"] * v["num_GPUs"] ** 0.9
            v["attained"] += args.round_duration
    now += args.round_duration
for part in ("Las", "Las_accept_all"):  # Blox writes both names
    with open("%s_%d_%d_%s_load_%s_job_stats.json" % (args.exp_prefix, start, stop, part, float(args.load)), "w") as fh:
        json.dump({str(k): v for k, v in stats.items()}, fh)
'''


def fake_blox(root: Path, stubs: bool = True) -> Path:
    (root / "schedulers").mkdir(parents=True)
    (root / "placement").mkdir()
    (root / "blox" / "deployment" / "grpc_stubs").mkdir(parents=True)
    (root / "simulator_simple.py").write_text(FAKE_SIMULATOR)
    (root / "las_scheduler.py").write_text(FAKE_LOOP)
    (root / "schedulers" / "__init__.py").write_text(FAKE_SCHEDULERS)
    (root / "placement" / "__init__.py").write_text("from .placement import *\n")
    (root / "placement" / "placement.py").write_text(FAKE_PLACEMENT)
    if stubs:
        (root / "blox" / "deployment" / "grpc_stubs" / "rm_pb2.py").write_text("")
    return root


SERVE = f"{sys.executable} -m elasticopt serve --stdio --no-warm-up"


def test_help_runs():
    out = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "--blox" in out.stdout and "--cluster-job-log" in out.stdout


@pytest.mark.parametrize("relative, order", [(False, None), (True, "arrival")])
def test_from_the_help_command_to_a_table(tmp_path, relative, order, capsys, monkeypatch):
    fake_blox(tmp_path / "blox")
    (tmp_path / "cluster_job_log").write_text("[]")
    monkeypatch.chdir(tmp_path)
    blox = "blox" if relative else str(tmp_path / "blox")
    rc = bs.main(["--blox", blox, "--python", sys.executable, "--cluster-job-log", "cluster_job_log",
                  "--track", "0:8", "--serve", SERVE, "--out", str(tmp_path / "out")]
                 + (["--dropin-order", order] if order else []))
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    for name in ("| elasticopt | 9/9 |", "| Las | 9/9 |", "| Fifo | 9/9 |", "elasticopt / best host policy",
                 "calls over every workload"):
        assert name in cap.out, cap.out
    stats = json.loads((tmp_path / "out" / "load_1" / "elasticopt.job_stats.json").read_text())
    assert set(stats) >= {str(j) for j in range(9)}
    calls = json.loads((tmp_path / "out" / "load_1" / "elasticopt.calls.json").read_text())["calls_ms"]
    assert len(calls) >= 2 and len(calls) % 2 == 0  # two schedule calls per round, each timed
    assert not list((tmp_path / "blox").rglob("*elasticopt*")) and not list((tmp_path / "blox").rglob("*.json"))


def test_an_unknown_dropin_order_is_refused_by_argparse(tmp_path):
    with pytest.raises(SystemExit):
        bs.main(["--blox", str(tmp_path), "--python", sys.executable, "--cluster-job-log", "x",
                 "--dropin-order", "srtf"])


def test_clear_errors(tmp_path, capsys):
    (tmp_path / "log").write_text("[]")
    assert bs.main(["--blox", str(tmp_path), "--python", sys.executable, "--cluster-job-log", str(tmp_path / "log")]) == 2
    assert "expected a checkout of msr-fiddle/blox" in capsys.readouterr().err
    fake_blox(tmp_path / "nostubs", stubs=False)
    assert bs.main(["--blox", str(tmp_path / "nostubs"), "--python", sys.executable,
                    "--cluster-job-log", str(tmp_path / "log")]) == 2
    assert "run `make grpc`" in capsys.readouterr().err
    fake_blox(tmp_path / "b")
    assert bs.main(["--blox", str(tmp_path / "b"), "--python", sys.executable,
                    "--cluster-job-log", str(tmp_path / "nope")]) == 2
    assert "it is not in the Blox repository" in capsys.readouterr().err
    assert bs.main(["--blox", str(tmp_path / "b"), "--python", sys.executable, "--cluster-job-log",
                    str(tmp_path / "log"), "--track", "5:2"]) == 2
    assert "expected 0 <= START < STOP" in capsys.readouterr().err
