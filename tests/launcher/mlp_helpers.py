"""Helpers of the tests that train the example MLP for real (torch imported; imported by name)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch

import elasticopt.launcher.examples.mlp_job as mlp_job
from elasticopt.launcher.elastic import load_latest_checkpoint
from elasticopt.models import MeasuredThroughput
from elasticopt.scheduling.jobspec import JobSpec

MLP = str(Path(mlp_job.__file__))
ARGS = ["--dataset-size", "2048", "--hidden", "64", "--sleep-per-step", "0.03"]
TOTAL = 128 * 60

def mlp_spec(job_id: str, max_local: int, total: int = TOTAL, ckpt_s: float = 30.0, **payload) -> JobSpec:
    return JobSpec(
        id=job_id, throughput=MeasuredThroughput.from_rows([[1, 64, 1.0], [2, 128, 2.0]]),
        batch_min=64, batch_max=256, max_local=max_local, total_samples=total,
        payload={"script": MLP, "args": ARGS, "checkpoint_every_s": ckpt_s, **payload},
    )  # fmt: skip


def gen_log(run: Path, job: str, gen: int) -> str:
    return (run / "jobs" / job / f"gen-{gen:04d}" / "log.txt").read_text()


def status(run: Path, job: str, gen: int) -> dict:
    return json.loads((run / "jobs" / job / f"gen-{gen:04d}" / "status.json").read_text())


def reference_run(job_dir: Path, batch: int, total: int) -> dict:
    """The same job without the launcher: one process, no interruption (resumes its own checkpoint)."""
    subprocess.run(
        [sys.executable, MLP, *ARGS[:4], "--batch", str(batch), "--max-local", "256",
         "--total-samples", str(total), "--job-dir", str(job_dir)],
        check=True, capture_output=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=120,
    )  # fmt: skip
    return load_latest_checkpoint(job_dir)


def assert_same_params(a: dict, b: dict) -> None:
    assert a["position"] == b["position"] and a["step"] == b["step"]
    for name, p in b["model"].items():
        assert torch.allclose(a["model"][name], p, rtol=1e-4, atol=1e-6), name
