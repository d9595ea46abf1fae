"""Shared helpers of the launcher tests (imported by name: a conftest module name would collide)."""

from __future__ import annotations

import time
from pathlib import Path


import elasticopt.launcher.examples.fake_job as fake_job
from elasticopt.models import MeasuredThroughput
from elasticopt.scheduling.jobspec import JobSpec

FAKE = str(Path(fake_job.__file__))


class Recorder:
    """An ExecutorListener that records every callback."""

    def __init__(self):
        self.completed: list[str] = []
        self.failed: dict[str, str] = {}
        self.throughput: list[tuple[str, int, int, float]] = []

    def on_completed(self, job_id, time_s):
        self.completed.append(job_id)

    def on_failed(self, job_id, time_s, reason):
        self.failed[job_id] = reason

    def on_throughput(self, job_id, gpus, batch, samples_per_s):
        self.throughput.append((job_id, gpus, batch, samples_per_s))


def fake_spec(job_id: str, total: int = 4000, args: list[str] | None = None, script: str = FAKE, **payload) -> JobSpec:
    """A JobSpec running the fake worker in python mode."""
    return JobSpec(
        id=job_id,
        throughput=MeasuredThroughput.from_rows([[1, 64, 2000.0], [2, 64, 3600.0], [2, 128, 3600.0], [1, 128, 2000.0]]),
        batch_min=64,
        batch_max=128,
        max_local=128,
        total_samples=total,
        payload={"script": script, "args": ["--rate", "4000", *(args or [])], "mode": "python", **payload},
    )


def run_until(executor, cond, timeout_s: float = 30.0, dt: float = 0.02):
    """Poll the executor until ``cond()`` holds (fails the test on timeout)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        executor.poll()
        if cond():
            return
        time.sleep(dt)
    raise AssertionError(f"condition not reached in {timeout_s} s")


