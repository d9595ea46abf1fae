"""validation/pollux_simulator.py: argument handling, results files, and the runner on a fake checkout."""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("pollux_simulator", ROOT / "validation" / "pollux_simulator.py")
ps = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ps)  # type: ignore[union-attr]

FAKE_POLLUX = """
class PolluxPolicy:
    def optimize(self, *args):
        raise RuntimeError("the host's own policy was called: the drop-in was not installed")
"""

# A toy simulator with the artifact's calling convention (not Pollux's code): it imports
# PolluxPolicy from pollux, calls optimize every interval, writes summary.json.
FAKE_SIMULATOR = """
import argparse, csv, json, os
from pollux import PolluxPolicy

class Info:
    def __init__(self, age, restarts):
        self.speedup_fn = lambda nodes, k: k ** 0.8 / (1 + 0.2 * (nodes - 1))
        self.min_replicas, self.max_replicas, self.preemptible = 0, 4, True
        self.age, self.num_restarts, self.creation_timestamp = age, restarts, 0

class Node:
    def __init__(self):
        self.resources, self.preemptible = {"nvidia.com/gpu": 2}, False

p = argparse.ArgumentParser()
p.add_argument("workload"); p.add_argument("--policy"); p.add_argument("--output")
a = p.parse_args()
assert a.policy == "pollux"
jobs = {r["name"]: {"t": float(r["time"]), "work": 600.0, "done": None, "restarts": 0}
        for r in csv.DictReader(open(a.workload))}
policy, allocs, now = PolluxPolicy(), {}, 0.0
nodes = {0: Node(), 1: Node()}
while any(j["done"] is None for j in jobs.values()):
    live = {n: j for n, j in jobs.items() if j["t"] <= now and j["done"] is None}
    infos = {n: Info(now - j["t"], j["restarts"]) for n, j in live.items()}
    if infos:
        new, _ = policy.optimize(infos, nodes, {n: allocs.get(n, []) for n in infos}, nodes[0])
        for n in infos:
            if allocs.get(n) and new.get(n) != allocs.get(n):
                jobs[n]["restarts"] += 1
        allocs = new
    for n, j in live.items():
        k = len(allocs.get(n, []))
        j["work"] -= 60.0 * (k ** 0.8 if k else 0.0)
        if j["work"] <= 0:
            j["done"] = now + 60.0
    now += 60.0
os.makedirs(a.output, exist_ok=True)
json.dump({"jcts": {n: j["done"] - j["t"] for n, j in jobs.items()},
           "num_restarts": {n: j["restarts"] for n, j in jobs.items()}}, open(a.output + "/summary.json", "w"))
"""


@pytest.fixture
def checkout(tmp_path):
    sim = tmp_path / "simulator"
    (sim / "workloads").mkdir(parents=True)
    (sim / "pollux.py").write_text(FAKE_POLLUX)
    (sim / "simulator.py").write_text(textwrap.dedent(FAKE_SIMULATOR))
    rows = "\n".join(f"job-{i},{60 * i},cifar10,1,128" for i in range(5))
    (sim / "workloads" / "w1.csv").write_text("name,time,application,num_replicas,batch_size\n" + rows + "\n")
    return sim


def test_runs_the_host_simulator_with_the_drop_in_and_prints_the_table(checkout, tmp_path, capsys):
    pub = tmp_path / "published"
    pub.mkdir()
    (pub / "w1.csv").write_text("name,jct,num_restarts\n" + "\n".join(f"job-{i},3600,1" for i in range(5)) + "\n")
    rc = ps.main(["--simulator", str(checkout), "--python", sys.executable, "--published", str(pub),
                  "--out", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert rc == 0, out
    summary = json.loads((tmp_path / "out" / "w1" / "summary.json").read_text())
    assert len(summary["jcts"]) == 5
    row = next(line for line in out.splitlines() if line.startswith("| w1 "))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "5" and cells[5] == "1.000" and cells[7] == "1.00"
    ours = ps.summarize(ps.load_results(tmp_path / "out" / "w1"))
    assert float(cells[2]) == pytest.approx(ours["mean_jct_h"], abs=5e-4)
    assert (tmp_path / "out" / "table.md").read_text().splitlines()[2] == row


def test_bad_checkout_and_bad_interpreter_are_clear_errors(checkout, tmp_path, capsys):
    assert ps.main(["--simulator", str(tmp_path), "--python", sys.executable]) == 2
    assert "simulator.py" in capsys.readouterr().err
    assert ps.main(["--simulator", str(checkout), "--python", str(tmp_path / "no-python")]) == 2
    assert "cannot run it" in capsys.readouterr().err
    assert ps.main(["--simulator", str(checkout), "--python", sys.executable, "--workloads", "none-*.csv"]) == 2
    assert "no workload matches" in capsys.readouterr().err


def test_results_files_json_and_csv_and_the_figures(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "summary.json").write_text(json.dumps({"jcts": {"x": 3600, "y": 7200, "z": 10800},
                                                             "restarts": {"x": 0, "y": 2, "z": 1}}))
    (tmp_path / "b.csv").write_text("job,submission_time,completion_time\nx,0,3600\ny,100,7300\nz,0,10800\n")
    a, b = ps.summarize(ps.load_results(tmp_path / "a")), ps.summarize(ps.load_results(tmp_path / "b.csv"))
    assert a["mean_jct_h"] == pytest.approx(2.0) and b["mean_jct_h"] == pytest.approx(2.0)
    assert a["restarts"] == pytest.approx(1.0) and b["restarts"] != b["restarts"]  # nan: not recorded
    xs = list(np.random.default_rng(0).uniform(0, 1e5, 101))
    assert ps.percentile(xs, 99) == pytest.approx(np.percentile(xs, 99))
    (tmp_path / "bad.json").write_text("[1]")
    with pytest.raises(ps.ElasticoptError, match="jcts"):
        ps.load_results(tmp_path / "bad.json")
