"""Real torchrun + gloo generations of the example MLP job (about a minute on 2 cores)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from launcher_helpers import run_until
from mlp_helpers import ARGS, MLP, TOTAL, assert_same_params, gen_log, mlp_spec, reference_run, status

import elasticopt.launcher.examples.mlp_job as mlp_job
from elasticopt.launcher.devices import DevicePool
from elasticopt.launcher.torchrun import TorchrunExecutor
from elasticopt.launcher.journal import replay
from elasticopt.launcher.protocol import checkpoint_dir, list_checkpoints
from elasticopt.launcher.elastic import load_latest_checkpoint
from elasticopt.scheduling.executor import Phase

pytestmark = pytest.mark.slow


def test_rescale_2_1_2_resumes_exactly_and_matches_uninterrupted(tmp_path):
    """Generations (k, b): (2, 128) -> (1, 128) -> (2, 256), max_local 64.

    Generation 2 keeps the global batch on one worker by accumulating two
    micro-batches of 64; generation 3 doubles the batch (two micro-batches of
    64 per rank, learning rate ramped by the sqrt rule).
    """
    run = tmp_path / "run"
    plan = [(2, 128), (1, 128), (2, 256)]
    ex = TorchrunExecutor(run, DevicePool("cpu", (0, 1)))
    ex.start(mlp_spec("j", max_local=64), *plan[0])
    at_gen2_end = tmp_path / "ckpt-gen2.pt"
    for step in (1, 2):
        run_until(ex, lambda: ex.progress("j").phase is Phase.RUNNING, timeout_s=60)
        assert ex.progress("j").generation == step
        ex.rescale("j", *plan[step])
        run_until(ex, lambda: ex.jobs["j"].handle is None or ex.progress("j").generation > step, timeout_s=60)
    shutil.copy(list_checkpoints(run / "jobs" / "j")[0][1], at_gen2_end)
    run_until(ex, lambda: ex.progress("j").phase is Phase.COMPLETED, timeout_s=60)

    positions = []
    for gen in (1, 2):  # every generation resumes exactly at the previous one's stop position
        st = status(run, "j", gen)
        assert st["state"] == "stopped" and st["samples_done"] == st["checkpoint_samples"] > 0
        assert f"resumed=True at sample {st['samples_done']}" in gen_log(run, "j", gen + 1)
        spec = json.loads((run / "jobs" / "j" / f"gen-{gen + 1:04d}" / "spec.json").read_text())
        assert (spec["gpus"], spec["batch"]) == plan[gen]
        positions.append(st["samples_done"])
    assert ex.jobs["j"].account.lost_samples == 0 and ex.jobs["j"].account.restarts == 0
    assert "micro=(64, 64)" in gen_log(run, "j", 2) and "micro=(64, 64)" in gen_log(run, "j", 3)
    final = load_latest_checkpoint(run / "jobs" / "j")
    assert TOTAL <= final["position"] < TOTAL + 256
    assert final["lr_ramp"]["lr_to"] == pytest.approx(0.05 * 2)  # sqrt rule: 0.05 * sqrt(256 / 64)

    # constant global batch (accumulation on one worker): equal to an uninterrupted run
    ref = tmp_path / "ref"
    assert_same_params(torch.load(at_gen2_end, weights_only=False), reference_run(ref, 128, positions[1]))
    # then the batch change at the same position, on one process: equal again
    assert_same_params(final, reference_run(ref, 256, TOTAL))
    torch.manual_seed(0)  # and it did learn: not the initial parameters
    assert not torch.allclose(mlp_job.make_model(32, 64, 10).state_dict()["0.weight"], final["model"]["0.weight"])


def _children(pid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    return out


def test_worker_killed_restarts_from_last_checkpoint(tmp_path):
    run = tmp_path / "run"
    ex = TorchrunExecutor(run, DevicePool("cpu", (0, 1)), checkpoint_every_s=0.5)
    ex.start(mlp_spec("a", max_local=128, total=128 * 80, ckpt_s=0.3), 2, 128)
    run_until(ex, lambda: len(list_checkpoints(run / "jobs" / "a")) >= 1 and ex.progress("a").samples_done > 2000,
              timeout_s=60)  # fmt: skip
    workers = _children(ex.jobs["a"].handle.pid)
    assert len(workers) == 2, workers
    os.kill(max(workers), signal.SIGKILL)  # one worker dies
    run_until(ex, lambda: ex.progress("a").generation == 2 and ex.progress("a").phase is Phase.RUNNING, timeout_s=60)
    job = ex.jobs["a"]
    assert job.account.restarts == 1
    ckpt = job.account.checkpoint_samples
    assert "resumed=True at sample" in gen_log(run, "a", 2)
    assert f"at sample {ckpt}" in gen_log(run, "a", 2)
    rate = 128 / 0.03 * 1.5  # generous upper bound of samples/s
    assert 0 <= job.account.lost_samples <= rate * (0.3 + 1.0)  # at most a checkpoint (+ status) interval
    run_until(ex, lambda: ex.progress("a").phase is Phase.COMPLETED, timeout_s=90)
    assert replay(run / "journal.jsonl").jobs["a"].lost_samples == job.account.lost_samples


def _write_jobs(path: Path, env: dict[str, str]) -> None:
    path.write_text(json.dumps({
        "format": "elasticopt-jobs/1",
        "jobs": [{"id": "m", "arrival_s": 0, "script": MLP, "args": ARGS, "env": env, "checkpoint_every_s": 1,
                  "total_samples": 128 * 120, "batch_min": 128, "batch_max": 128, "max_local": 128,
                  "gpus_max": 2, "submitted_gpus": 2, "submitted_batch": 128,
                  "throughput": [[1, 128, 1000.0], [2, 128, 1900.0]]}],
    }))  # fmt: skip


def test_launcher_killed_while_checkpoint_is_written(tmp_path):
    jobs, run = tmp_path / "jobs.json", tmp_path / "run"
    _write_jobs(jobs, {"ELASTICOPT_CHECKPOINT_DELAY_S": "3"})
    cmd = [sys.executable, "-m", "elasticopt.cli.launch", str(jobs), "--cpu-slots", "2", "--out", str(run),
           "--quiet", "--restart-cost-s", "1", "--policy", "static"]  # fmt: skip
    launcher = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ck = checkpoint_dir(run / "jobs" / "m")
    deadline = time.monotonic() + 90
    # wait for a complete checkpoint, then for the next one to be half-written
    while not (list_checkpoints(run / "jobs" / "m") and list(ck.glob(".ckpt-*.tmp"))):
        assert time.monotonic() < deadline and launcher.poll() is None
        time.sleep(0.05)
    intact = list_checkpoints(run / "jobs" / "m")[0][0]
    torn_name = next(ck.glob(".ckpt-*.tmp")).name
    pgid = replay(run / "journal.jsonl").jobs["m"].open_generation["pid"]
    launcher.kill()  # the launcher and its job die together, mid-checkpoint
    os.killpg(pgid, signal.SIGKILL)
    launcher.wait(10)
    assert list(ck.glob(".ckpt-*.tmp"))  # the torn checkpoint is there...
    assert list_checkpoints(run / "jobs" / "m")[0][0] == intact  # ...and never got a final name

    _write_jobs(jobs, {})
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    log2 = gen_log(run, "m", 2)
    assert f"resumed=True at sample {intact}" in log2  # the previous checkpoint is used
    rows = (run / "jobs.csv").read_text().splitlines()
    assert rows[1].split(",")[2] == "completed"
    assert not list(ck.glob(".ckpt-*.tmp"))
    state = replay(run / "journal.jsonl").jobs["m"]
    torn = int(torn_name.split("-")[1].split(".")[0])
    assert state.completed_at is not None and state.lost_samples >= torn - intact > 0
