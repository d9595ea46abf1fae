"""The Ray backend on a multi-node Ray cluster started here: rescales across nodes, faults, the CLI.

The cluster (``ray.cluster_utils.Cluster``) is one head node without CPUs
(the driver: this test process) and three raylets of one CPU each, so a
job of k workers is spread over k nodes.  Kept small for a 2-core machine:
a few warm workers, each one job's rank at a time.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import ray
import torch
from launcher_helpers import run_until
from mlp_helpers import TOTAL, assert_same_params, gen_log, mlp_spec, reference_run, status

from elasticopt.launcher.jobsfile import EXAMPLES
from elasticopt.launcher.journal import replay
from elasticopt.launcher.protocol import list_checkpoints
from elasticopt.launcher.ray_backend import RayExecutor, cluster_pool, connect
from elasticopt.launcher.elastic import load_latest_checkpoint
from elasticopt.scheduling.executor import Phase
from elasticopt.scheduling.records import read_jobs_csv


pytestmark = pytest.mark.slow

NODES = 3


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    for _ in range(NODES):
        c.add_node(num_cpus=1)
    c.wait_for_nodes()
    connect(c.address)
    try:
        yield c
    finally:
        ray.shutdown()
        c.shutdown()


@pytest.fixture
def executor(cluster, tmp_path):
    made = []

    def make(**kw) -> RayExecutor:
        ex = RayExecutor(tmp_path / "run", cluster_pool(), **kw)
        made.append(ex)
        return ex

    yield make
    for ex in made:
        ex.shutdown(timeout_s=10, kill=True)


def _nodes(run: Path, job: str) -> dict[int, list[str]]:
    events = [json.loads(line) for line in (run / "journal.jsonl").read_text().splitlines()]
    return {e["generation"]: e["nodes"] for e in events if e.get("event") == "generation_start" and e["job_id"] == job}


def test_rescale_2_1_3_across_nodes_resumes_exactly_and_matches_uninterrupted(executor, tmp_path):
    """Generations (k, b): (2, 128) on two nodes -> (1, 128) -> (3, 192) on three, max_local 64."""
    run = tmp_path / "run"
    plan = [(2, 128), (1, 128), (3, 192)]
    ex = executor()
    ex.start(mlp_spec("j", max_local=64), *plan[0])
    at_gen2_end = tmp_path / "ckpt-gen2.pt"
    for step in (1, 2):
        run_until(ex, lambda: ex.progress("j").phase is Phase.RUNNING, timeout_s=120)
        assert ex.progress("j").generation == step
        time.sleep(0.3)  # a few steps
        ex.rescale("j", *plan[step])
        run_until(ex, lambda: ex.progress("j").generation > step, timeout_s=60)
    shutil.copy(list_checkpoints(run / "jobs" / "j")[0][1], at_gen2_end)
    run_until(ex, lambda: ex.progress("j").phase is Phase.COMPLETED, timeout_s=120)

    nodes = _nodes(run, "j")
    assert len(set(nodes[1])) == 2 and len(set(nodes[2])) == 1 and len(set(nodes[3])) == 3  # spread over nodes
    positions = []
    for gen in (1, 2):  # every generation resumes exactly at the previous one's stop position
        st = status(run, "j", gen)
        assert st["state"] == "stopped" and st["samples_done"] == st["checkpoint_samples"] > 0
        assert f"resumed=True at sample {st['samples_done']}" in gen_log(run, "j", gen + 1)
        spec = json.loads((run / "jobs" / "j" / f"gen-{gen + 1:04d}" / "spec.json").read_text())
        assert (spec["gpus"], spec["batch"]) == plan[gen]
        positions.append(st["samples_done"])
    job = ex.jobs["j"]
    assert job.account.lost_samples == 0 and job.account.restarts == 0 and len(job.account.downtimes_s) == 2
    assert "micro=(64, 64)" in gen_log(run, "j", 2) and "backend=gloo" in gen_log(run, "j", 3)
    pids = {g: {pid for log in (run / "jobs" / "j" / f"gen-{g:04d}").glob("log*.txt")
                for pid in re.findall(r"warm worker pid (\d+)", log.read_text())} for g in (1, 2, 3)}
    assert len(pids[1]) == 2 and len(pids[3]) == 3  # one process per rank
    assert pids[2] <= pids[1] <= pids[3]  # the same warm processes, generation after generation
    assert "(worker's generation 2)" in gen_log(run, "j", 2)
    final = load_latest_checkpoint(run / "jobs" / "j")
    assert TOTAL <= final["position"] < TOTAL + 192

    ref = tmp_path / "ref"  # the same job in one process, never interrupted
    assert_same_params(torch.load(at_gen2_end, weights_only=False), reference_run(ref, 128, positions[1]))
    assert_same_params(final, reference_run(ref, 192, TOTAL))


def _lost_bound(ckpt_s: float) -> float:
    return 128 / 0.03 * 1.5 * (ckpt_s + 1.0)  # generous samples/s x (a checkpoint interval + status delay)


def _running_with_checkpoint(ex: RayExecutor, run: Path, job: str, min_samples: int) -> None:
    run_until(ex, lambda: len(list_checkpoints(run / "jobs" / job)) >= 1
              and ex.progress(job).samples_done > min_samples, timeout_s=120)  # fmt: skip


def _resumed_from(run: Path, job_id: str, generation: int) -> int:
    """The checkpoint the next generation resumes from: the journal's ``generation_end`` of ``generation``.
    (Not ``job.account.checkpoint_samples`` read later: by then the new generation may have written its own,
    one step on, 0.3 s after it started -- seen under load: resumed at 2816, account at 2944.)"""
    events = [json.loads(line) for line in (run / "journal.jsonl").read_text().splitlines()]
    return next(e["checkpoint_samples"] for e in events if e.get("event") == "generation_end"
                and e.get("job_id") == job_id and e.get("generation") == generation)


def test_worker_actor_killed_restarts_from_last_checkpoint(executor, tmp_path):
    run = tmp_path / "run"
    ex = executor()
    ex.start(mlp_spec("a", max_local=128, total=128 * 80, ckpt_s=0.3), 2, 128)
    _running_with_checkpoint(ex, run, "a", 2000)
    ray.kill(ex.jobs["a"].handle.workers[1], no_restart=True)  # one rank's actor dies
    run_until(ex, lambda: ex.progress("a").generation == 2 and ex.progress("a").phase is Phase.RUNNING, timeout_s=120)
    job = ex.jobs["a"]
    assert job.account.restarts == 1
    assert f"resumed=True at sample {_resumed_from(run, 'a', 1)}" in gen_log(run, "a", 2)
    assert 0 <= job.account.lost_samples <= _lost_bound(0.3)
    run_until(ex, lambda: ex.progress("a").phase is Phase.COMPLETED, timeout_s=120)
    assert replay(run / "journal.jsonl").jobs["a"].lost_samples == job.account.lost_samples
    assert "worker died" in gen_log(run, "a", 1)


def test_ray_node_removed_job_resumes_on_the_others(cluster, executor, tmp_path):
    run = tmp_path / "run"
    ex = executor()
    ex.start(mlp_spec("n", max_local=128, total=128 * 80, ckpt_s=0.3), 2, 128)
    _running_with_checkpoint(ex, run, "n", 2000)
    gone = ex.jobs["n"].handle.nodes[1]
    victim = next(n for n in cluster.worker_nodes if n.node_id == gone)
    try:
        cluster.remove_node(victim)
        run_until(ex, lambda: ex.progress("n").generation >= 2 and ex.progress("n").phase is Phase.RUNNING,
                  timeout_s=120)  # fmt: skip
        job = ex.jobs["n"]
        assert gone in ex.pool.retired and gone not in _nodes(run, "n")[job.generation]
        assert job.account.restarts == 1 and 0 <= job.account.lost_samples <= _lost_bound(0.3)
        assert f"resumed=True at sample {_resumed_from(run, 'n', job.generation - 1)}" in gen_log(run, "n",
                                                                                                  job.generation)
        run_until(ex, lambda: ex.progress("n").phase is Phase.COMPLETED, timeout_s=120)
        assert replay(run / "journal.jsonl").jobs["n"].lost_samples == job.account.lost_samples
    finally:
        cluster.add_node(num_cpus=1)  # the next tests get three nodes again
        cluster.wait_for_nodes()


def _cli(jobs: Path, out: Path, address: str | None, *extra: str) -> list[str]:
    where = ["--address", address] if address else []
    return [sys.executable, "-m", "elasticopt.cli.launch", str(jobs), "--backend", "ray", *where,
            "--out", str(out), "--quiet", *extra]  # fmt: skip


def test_launcher_killed_and_restarted_resumes_from_checkpoint(cluster, tmp_path):
    jobs, run = tmp_path / "jobs.json", tmp_path / "run"
    mlp = mlp_spec("m", max_local=128)
    jobs.write_text(json.dumps({"format": "elasticopt-jobs/1", "jobs": [{
        "id": "m", "arrival_s": 0, "script": mlp.payload["script"], "args": mlp.payload["args"],
        "checkpoint_every_s": 1, "total_samples": 128 * 150, "batch_min": 128, "batch_max": 128,
        "max_local": 128, "gpus_max": 2, "submitted_gpus": 2, "submitted_batch": 128,
        "throughput": [[1, 128, 1000.0], [2, 128, 1900.0]]}]}))  # fmt: skip
    cmd = _cli(jobs, run, cluster.address, "--policy", "static", "--restart-cost-s", "1")
    launcher = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not (list_checkpoints(run / "jobs" / "m") and (run / "jobs/m/gen-0001/status.json").exists()):
        assert time.monotonic() < deadline and launcher.poll() is None
        time.sleep(0.05)
    time.sleep(0.5)
    launcher.send_signal(signal.SIGKILL)  # its actors die with it (Ray fate-shares them with their driver)
    launcher.wait(10)
    before = replay(run / "journal.jsonl").jobs["m"]
    assert before.open_generation is not None and before.completed_at is None
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stderr
    state = replay(run / "journal.jsonl")
    rec = state.jobs["m"]
    assert rec.completed_at is not None and rec.generation == 2
    events = [json.loads(line) for line in (run / "journal.jsonl").read_text().splitlines()]
    orphan = next(e for e in events if e.get("event") == "generation_end" and e.get("reason") == "orphaned")
    assert 0 <= orphan["lost_samples"] <= _lost_bound(1.0)  # at most a checkpoint interval
    assert f"resumed=True at sample {orphan['checkpoint_samples']}" in gen_log(run, "m", 2)
    (r,) = read_jobs_csv(run / "jobs.csv")  # one record over both launchers
    assert r.status == "completed" and r.samples_done >= 128 * 150 and r.first_start_s < r.completion_s


def test_cli_ray_backend_completes_the_example_jobs(tmp_path):
    """``elasticopt launch --backend ray`` on the bundled example jobs file (samples and arrivals scaled down).

    Without ``--address``: the launcher starts (and stops) its own local Ray instance, even with the
    test cluster running on this machine.
    """
    doc = json.loads(EXAMPLES["example:mlp"].with_name("jobs_cpu.json").read_text())
    for job in doc["jobs"]:
        job["total_samples"] //= 40
        job["arrival_s"] /= 10
    doc["defaults"]["script"] = str(EXAMPLES["example:mlp"])
    jobs, run = tmp_path / "jobs.json", tmp_path / "run"
    jobs.write_text(json.dumps(doc))
    res = subprocess.run(_cli(jobs, run, None, "--cpu-slots", "2", "--restart-cost-s", "1", "--tick-s", "2"),
                         capture_output=True, text=True, timeout=240)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "2 cpu device(s) [0, 1] of 1 Ray node(s)" in res.stderr
    recs = read_jobs_csv(run / "jobs.csv")
    assert {r.job_id: r.status for r in recs} == {j["id"]: "completed" for j in doc["jobs"]}
    summary = json.loads((run / "summary.json").read_text())
    assert summary["metrics"]["completed"] == len(doc["jobs"])
    assert all(j["lost_samples"] == 0 for j in summary["jobs"].values())


@pytest.mark.parametrize("backend", ["ray", "torchrun"])
def test_plain_torch_distributed_job_is_elastic_on_both_backends(backend, cluster, tmp_path):
    """The plain DDP example (its own loop and torch.save checkpoints) rescaled 2 -> 1 resumes at the sample."""
    from elasticopt.launcher.devices import DevicePool
    from elasticopt.launcher.driver import make_executor

    run = tmp_path / "run"
    pool = cluster_pool() if backend == "ray" else DevicePool("cpu", (0, 1))
    ex = make_executor(backend, run, pool)
    try:
        spec = mlp_spec("p", max_local=128, total=64 * 300, script=str(EXAMPLES["example:plain"]),
                        args=["--dataset-size", "1024", "--sleep-per-step", "0.02"])  # fmt: skip
        ex.start(spec, 2, 128)
        run_until(ex, lambda: ex.progress("p").phase is Phase.RUNNING and ex.progress("p").samples_done > 1000,
                  timeout_s=120)  # fmt: skip
        ex.rescale("p", 1, 64)
        run_until(ex, lambda: ex.progress("p").phase is Phase.COMPLETED, timeout_s=120)
    finally:
        ex.shutdown(timeout_s=10, kill=True)
    st = status(run, "p", 1)
    assert st["state"] == "stopped" and st["samples_done"] == st["checkpoint_samples"] > 0
    assert f"k=1 b=64 resumed at sample {st['samples_done']}" in gen_log(run, "p", 2)
    assert ex.jobs["p"].account.lost_samples == 0 and ex.progress("p").samples_done == 64 * 300
