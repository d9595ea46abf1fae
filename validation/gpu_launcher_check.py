"""GPU check of the launcher: one real job on GPUs with nccl, rescaled, its downtime measured.

Runs the example MLP job under ``torchrun`` on this machine's GPUs (nccl),
rescales it from k=2 to k=1 GPU (or between two batch sizes on one GPU) and
back, and prints, for every rescale, the downtime from the stop request to the
first step of the new generation, plus the measured samples/s per (k, b).
Checks that every generation ran on CUDA with nccl, resumed exactly at the
previous stop position and lost no sample.

Refuses (exit code 2) on a machine without a GPU.

Usage::

    python validation/gpu_launcher_check.py [--gpus 2] [--rescales 3] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from elasticopt.launcher.devices import DevicePool, detect_gpus
from elasticopt.launcher.torchrun import TorchrunExecutor
from elasticopt.launcher.jobsfile import EXAMPLES
from elasticopt.models import MeasuredThroughput
from elasticopt.scheduling.executor import JobSpec, Phase


def _until(ex: TorchrunExecutor, cond, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit(f"FAILED: {what} not reached in {timeout_s:.0f} s; logs under {ex.out_dir}/jobs")
        ex.poll()
        time.sleep(0.01)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", type=int, default=None, help="GPUs to use (default: up to 2)")
    ap.add_argument("--rescales", type=int, default=3)
    ap.add_argument("--timeout-s", type=float, default=240.0, help="per phase")
    ap.add_argument("--out", default=None, help="run directory (default: a temporary one)")
    a = ap.parse_args(argv)
    found = detect_gpus()
    if not found:
        print("gpu_launcher_check: no GPU on this machine (CUDA_VISIBLE_DEVICES / nvidia-smi / torch.cuda "
              "found none): this check needs at least one NVIDIA GPU. Nothing was run.", file=sys.stderr)  # fmt: skip
        return 2
    try:
        import torch  # noqa: PLC0415
    except ImportError:
        print("gpu_launcher_check: torch is not installed: pip install 'elasticopt[launcher]'", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print(f"gpu_launcher_check: GPUs {found} are listed but torch.cuda is not available "
              f"(torch {torch.__version__} without CUDA?)", file=sys.stderr)  # fmt: skip
        return 2
    n = min(a.gpus or 2, len(found))
    pool = DevicePool.detect(gpus=n)
    options = [(2, 512), (1, 256)] if n >= 2 else [(1, 512), (1, 256)]
    spec = JobSpec(
        id="gpu-check", throughput=MeasuredThroughput.from_rows([[k, b, 1.0] for k, b in options]),
        batch_min=256, batch_max=512, max_local=512, total_samples=10**10,
        payload={"script": str(EXAMPLES["example:mlp"]),
                 "args": ["--dataset-size", "65536", "--hidden", "1024", "--features", "256"]},
    )  # fmt: skip
    tmp = tempfile.TemporaryDirectory()
    out = Path(a.out or tmp.name)
    ex = TorchrunExecutor(out, pool)
    ex.start(spec, *options[0])
    positions = []
    try:
        for i in range(a.rescales + 1):
            _until(ex, lambda: ex.progress("gpu-check").phase is Phase.RUNNING, a.timeout_s, f"generation {i + 1} running")
            time.sleep(3.0)  # a few seconds of training: samples/s is measured
            ex.poll()
            gen = ex.progress("gpu-check").generation
            if i == a.rescales:
                break
            ex.rescale("gpu-check", *options[(i + 1) % 2])
            _until(ex, lambda: ex.progress("gpu-check").generation > gen, a.timeout_s, f"generation {gen + 1} start")
            st = json.loads((out / "jobs/gpu-check" / f"gen-{gen:04d}" / "status.json").read_text())
            positions.append(st["samples_done"])
        _until(ex, lambda: ex.progress("gpu-check").samples_per_s is not None, a.timeout_s, "a rate")
    finally:
        ex.shutdown(timeout_s=60)
    job = ex.jobs["gpu-check"]
    ok = True
    for g in range(1, job.generation + 1):
        log = (out / "jobs/gpu-check" / f"gen-{g:04d}" / "log.txt").read_text()
        if "device=cuda" not in log or "backend=nccl" not in log:
            print(f"FAILED: generation {g} did not run on CUDA with nccl; see {out}/jobs/gpu-check/gen-{g:04d}/log.txt")
            ok = False
        if g >= 2 and f"at sample {positions[g - 2]}" not in log:
            print(f"FAILED: generation {g} did not resume at sample {positions[g - 2]}")
            ok = False
    if job.account.lost_samples:
        print(f"FAILED: {job.account.lost_samples} samples lost")
        ok = False
    print(f"GPUs {list(pool.ids)}; options {options}; generations {job.generation}")
    for (k, b), t in sorted(job.spec.throughput.observed.items()):
        print(f"  measured k={k} b={b}: {t:.0f} samples/s")
    downs = job.account.downtimes_s
    print("rescale downtime (stop request -> first step), s: " + ", ".join(f"{d:.2f}" for d in downs))
    if downs:
        print(f"median {statistics.median(downs):.2f} s")
    print("OK" if ok and downs else "FAILED")
    tmp.cleanup()
    return 0 if ok and downs else 1


if __name__ == "__main__":
    sys.exit(main())
