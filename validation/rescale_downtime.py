"""Rescale downtime of the launcher on this machine: stop request -> first step of the new generation.

A real ``torchrun`` job (the example MLP, gloo on CPU slots or nccl on GPUs) is
rescaled back and forth between two (k, b) options; for every rescale the
launcher records the time from writing the stop request to the first
optimizer step of the next generation (as reported by its rank 0).  Also
printed: the part spent stopping (request -> generation exited, checkpoint
included).

Usage::

    python validation/rescale_downtime.py                 # CPU: 2 -> 1 -> 2 ... workers, 5 rescales
    python validation/rescale_downtime.py --rescales 7 --json out.json
    python validation/rescale_downtime.py --gpus 2        # on GPUs (nccl)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from elasticopt.launcher.devices import DevicePool
from elasticopt.launcher.torchrun import TorchrunExecutor
from elasticopt.launcher.jobsfile import EXAMPLES
from elasticopt.launcher.journal import replay
from elasticopt.models import MeasuredThroughput
from elasticopt.scheduling.executor import JobSpec, Phase


def _until(ex: TorchrunExecutor, cond, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError("the job did not get there in time; see the generation logs")
        ex.poll()
        time.sleep(0.01)


def measure(pool: DevicePool, rescales: int, out_dir: Path, timeout_s: float = 180.0) -> dict:
    """Run one job through ``rescales`` rescales; return the downtimes and stop times."""
    k_hi = min(2, pool.size)
    options = [(k_hi, 64 * k_hi), (1, 64)] if k_hi > 1 else [(1, 128), (1, 64)]
    spec = JobSpec(
        id="bench", throughput=MeasuredThroughput.from_rows([[k, b, 1.0] for k, b in options]),
        batch_min=64, batch_max=256, max_local=128, total_samples=10**9,
        payload={"script": str(EXAMPLES["example:mlp"]),
                 "args": ["--dataset-size", "4096", "--sleep-per-step", "0.01"]},
    )  # fmt: skip
    ex = TorchrunExecutor(out_dir, pool)
    ex.start(spec, *options[0])
    stops = []
    try:
        for i in range(rescales):
            _until(ex, lambda: ex.progress("bench").phase is Phase.RUNNING, timeout_s)
            time.sleep(0.5)  # a few steps at the new allocation
            t = time.time()
            gen = ex.progress("bench").generation
            ex.rescale("bench", *options[(i + 1) % 2])
            _until(ex, lambda: ex.jobs["bench"].handle is None or ex.progress("bench").generation > gen, timeout_s)
            stops.append(time.time() - t)
        _until(ex, lambda: ex.progress("bench").phase is Phase.RUNNING, timeout_s)
    finally:
        ex.shutdown(timeout_s=30)
    down = list(ex.jobs["bench"].account.downtimes_s)
    return {
        "device": pool.kind, "devices": list(pool.ids), "options": options,
        "downtime_s": down, "downtime_median_s": statistics.median(down),
        "stop_s": stops, "stop_median_s": statistics.median(stops),
        "lost_samples": replay(out_dir / "journal.jsonl").jobs["bench"].lost_samples,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rescales", type=int, default=5)
    dev = ap.add_mutually_exclusive_group()
    dev.add_argument("--gpus", type=int, default=None)
    dev.add_argument("--cpu-slots", type=int, default=None)
    ap.add_argument("--out", default=None, help="run directory (default: a temporary one)")
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    a = ap.parse_args(argv)
    pool = DevicePool.detect(gpus=a.gpus, cpu_slots_n=a.cpu_slots if a.cpu_slots or a.gpus else None)
    with tempfile.TemporaryDirectory() as tmp:
        res = measure(pool, a.rescales, Path(a.out or tmp))
    print(f"{pool.kind} {list(pool.ids)}, options {res['options']}, {a.rescales} rescales")
    print("downtime (stop request -> first step of the new generation), s: "
          + ", ".join(f"{d:.2f}" for d in res["downtime_s"]))  # fmt: skip
    print(f"median downtime {res['downtime_median_s']:.2f} s; median stop (request -> exited, "
          f"checkpoint included) {res['stop_median_s']:.2f} s; lost samples {res['lost_samples']}")  # fmt: skip
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
