"""GPU check of the launcher: one real job on GPUs with nccl, rescaled, its downtime and samples/s, per backend.

Runs the example MLP job on this machine's GPUs (nccl) with the ``torchrun``
backend and with the ``ray`` backend (a local Ray instance with these GPUs,
warm workers), rescales it from k=2 to k=1 GPU and back (or between two batch
sizes on one GPU), and prints, per backend, every rescale's downtime (stop
request -> first step of the new generation), its median, and the measured
samples/s per (k, b).  Checks that every generation ran on CUDA with nccl,
resumed exactly at the previous stop position and lost no sample.

Refuses (exit code 2) on a machine without a GPU, or without torch/CUDA (or
Ray, for the ray backend).  Exit code 1 when a check failed.

Usage::

    python validation/gpu_launcher_check.py [--backend both|torchrun|ray] [--gpus 2] [--rescales 3] [--out DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from elasticopt.launcher.devices import DevicePool, detect_gpus
from elasticopt.launcher.driver import make_executor
from elasticopt.launcher.generations import GenerationExecutor
from elasticopt.launcher.jobsfile import EXAMPLES
from elasticopt.models import MeasuredThroughput
from elasticopt.scheduling.executor import Phase
from elasticopt.scheduling.jobspec import JobSpec

JOB = "gpu-check"


def _until(ex: GenerationExecutor, cond, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit(f"FAILED: {what} not reached in {timeout_s:.0f} s; logs under {ex.out_dir}/jobs")
        ex.poll()
        time.sleep(0.005)


def refusal(backends: list[str]) -> str | None:
    """Why this machine cannot run the check (None when it can)."""
    found = detect_gpus()
    if not found:
        return ("no GPU on this machine (CUDA_VISIBLE_DEVICES / nvidia-smi / torch.cuda found none): "
                "this check needs at least one NVIDIA GPU. Nothing was run.")  # fmt: skip
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed: pip install 'elasticopt[launcher]'"
    import torch  # noqa: PLC0415

    if not torch.cuda.is_available():
        return f"GPUs {found} are listed but torch.cuda is not available (torch {torch.__version__} without CUDA?)"
    if "ray" in backends and importlib.util.find_spec("ray") is None:
        return "the ray backend needs Ray: pip install 'elasticopt[ray]' (or --backend torchrun)"
    return None


def check_backend(backend: str, n: int, rescales: int, out: Path, timeout_s: float) -> tuple[bool, dict]:
    """One job on ``n`` GPUs through ``rescales`` rescales; (all checks passed, figures)."""
    if backend == "ray":
        from elasticopt.launcher import ray_backend  # noqa: PLC0415

        ray_backend.connect(num_cpus=n, num_gpus=n)
        pool = ray_backend.cluster_pool("cuda", max_devices=n)
    else:
        pool = DevicePool.detect(gpus=n)
    ex = make_executor(backend, out, pool)
    options = [(2, 512), (1, 256)] if n >= 2 else [(1, 512), (1, 256)]
    spec = JobSpec(
        id=JOB, throughput=MeasuredThroughput.from_rows([[k, b, 1.0] for k, b in options]),
        batch_min=256, batch_max=512, max_local=512, total_samples=10**10,
        payload={"script": str(EXAMPLES["example:mlp"]),
                 "args": ["--dataset-size", "65536", "--hidden", "1024", "--features", "256"]},
    )  # fmt: skip
    ex.start(spec, *options[0])
    positions = []
    try:
        for i in range(rescales + 1):
            _until(ex, lambda: ex.progress(JOB).phase is Phase.RUNNING, timeout_s, f"generation {i + 1} running")
            time.sleep(3.0)  # a few seconds of training: samples/s is measured
            ex.poll()
            gen = ex.progress(JOB).generation
            if i == rescales:
                break
            ex.rescale(JOB, *options[(i + 1) % 2])
            _until(ex, lambda: ex.progress(JOB).generation > gen, timeout_s, f"generation {gen + 1} start")
            st = json.loads((out / "jobs" / JOB / f"gen-{gen:04d}" / "status.json").read_text())
            positions.append(st["samples_done"])
        _until(ex, lambda: ex.progress(JOB).samples_per_s is not None, timeout_s, "a rate")
    finally:
        ex.shutdown(timeout_s=60)
        if backend == "ray":
            import ray  # noqa: PLC0415

            ray.shutdown()
    job = ex.jobs[JOB]
    problems = []
    for g in range(1, job.generation + 1):
        log = (out / "jobs" / JOB / f"gen-{g:04d}" / "log.txt").read_text()
        if "device=cuda" not in log or "backend=nccl" not in log:
            problems.append(f"generation {g} did not run on CUDA with nccl; see {out}/jobs/{JOB}/gen-{g:04d}/log.txt")
        if g >= 2 and f"at sample {positions[g - 2]}" not in log:
            problems.append(f"generation {g} did not resume at sample {positions[g - 2]}")
    if job.account.lost_samples:
        problems.append(f"{job.account.lost_samples} samples lost")
    downs = job.account.downtimes_s
    if not downs:
        problems.append("no rescale downtime was measured")
    ok = not problems
    return ok, {
        "backend": backend, "gpus": list(pool.ids), "options": options, "generations": job.generation,
        "downtime_s": downs, "downtime_median_s": statistics.median(downs) if downs else None,
        "samples_per_s": {f"{k}x{b}": t for (k, b), t in sorted(job.spec.throughput.observed.items())},
        "problems": problems,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=["torchrun", "ray", "both"], default="both")
    ap.add_argument("--gpus", type=int, default=None, help="GPUs to use (default: up to 2)")
    ap.add_argument("--rescales", type=int, default=3)
    ap.add_argument("--timeout-s", type=float, default=240.0, help="per phase")
    ap.add_argument("--out", default=None, help="run directory (default: a temporary one)")
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    a = ap.parse_args(argv)
    backends = ["torchrun", "ray"] if a.backend == "both" else [a.backend]
    why = refusal(backends)
    if why:
        print(f"gpu_launcher_check: {why}", file=sys.stderr)
        return 2
    n = min(a.gpus or 2, len(detect_gpus()))
    results, all_ok = [], True
    with tempfile.TemporaryDirectory() as tmp:
        for backend in backends:
            ok, res = check_backend(backend, n, a.rescales, Path(a.out or tmp) / backend, a.timeout_s)
            all_ok &= ok
            results.append(res)
    for r in results:
        print(f"{r['backend']}: GPUs {r['gpus']}; options {r['options']}; generations {r['generations']}")
        for kb, t in r["samples_per_s"].items():
            print(f"  measured k x b = {kb}: {t:.0f} samples/s")
        print("  rescale downtime (stop request -> first step), s: " + ", ".join(f"{d:.3f}" for d in r["downtime_s"]))
        for p in r["problems"]:
            print(f"  FAILED: {p}")
    print(f"\n{'backend':<10} {'median downtime s':>18}")
    for r in results:
        med = r["downtime_median_s"]
        print(f"{r['backend']:<10} {'-' if med is None else f'{med:.3f}':>18}")
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    print("OK" if all_ok else "FAILED")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
