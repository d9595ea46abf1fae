"""Rescale downtime of the launcher: stop request -> first step of the new generation, per backend.

A real job (the example MLP, gloo on CPU slots or nccl on GPUs) is rescaled
back and forth between two (k, b) options; for every rescale the launcher
records the time from writing the stop request to the first optimizer step
of the next generation (as reported by its rank 0).  Also printed: the part
spent stopping (request -> generation exited, checkpoint included) and the
samples lost (must be 0: a rescale stops at a checkpoint).

Backends: ``torchrun`` starts every generation as new processes (Python and
torch start-up each time); ``ray`` runs it on warm worker actors of a local
Ray instance (started here with as many CPUs as slots; its start-up and the
workers' warm-up are timed apart, not counted in the downtime).  ``both``
measures the two in the same run, one after the other, and prints them side
by side.

Usage::

    python validation/rescale_downtime.py --backend both          # CPU, 2 slots, 7 rescales each
    python validation/rescale_downtime.py --backend ray --rescales 9 --json out.json
    python validation/rescale_downtime.py --backend torchrun --gpus 2   # on GPUs (nccl)
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
from elasticopt.launcher.driver import make_executor
from elasticopt.launcher.generations import GenerationExecutor
from elasticopt.launcher.jobsfile import EXAMPLES
from elasticopt.launcher.journal import replay
from elasticopt.models import MeasuredThroughput
from elasticopt.scheduling.executor import Phase
from elasticopt.scheduling.jobspec import JobSpec

ARGS = ["--dataset-size", "4096", "--sleep-per-step", "0.01"]


def _until(ex: GenerationExecutor, cond, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the job did not get there in {timeout_s:.0f} s; see the generation logs in {ex.out_dir}")
        ex.poll()
        time.sleep(0.005)


def measure(ex: GenerationExecutor, rescales: int, timeout_s: float = 180.0) -> dict:
    """Run one job on ``ex`` through ``rescales`` rescales; return the downtimes and stop times."""
    k_hi = min(2, ex.pool.size)
    options = [(k_hi, 64 * k_hi), (1, 64)] if k_hi > 1 else [(1, 128), (1, 64)]
    spec = JobSpec(
        id="bench", throughput=MeasuredThroughput.from_rows([[k, b, 1.0] for k, b in options]),
        batch_min=64, batch_max=256, max_local=128, total_samples=10**9,
        payload={"script": str(EXAMPLES["example:mlp"]), "args": ARGS},
    )  # fmt: skip
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
        "device": ex.pool.kind, "devices": list(ex.pool.ids), "options": options,
        "downtime_s": down, "downtime_median_s": statistics.median(down),
        "stop_s": stops, "stop_median_s": statistics.median(stops),
        "lost_samples": replay(ex.out_dir / "journal.jsonl").jobs["bench"].lost_samples,
    }  # fmt: skip


def run_backend(backend: str, a: argparse.Namespace, out: Path) -> dict:
    """Measure one backend (``torchrun`` or ``ray``) with the options of the command line."""
    setup_s = 0.0
    if backend == "ray":
        import ray  # noqa: PLC0415 - only for this backend

        from elasticopt.launcher import ray_backend  # noqa: PLC0415

        t = time.time()
        n = a.gpus or a.cpu_slots or 2
        ray_backend.connect(a.address, num_cpus=n, num_gpus=a.gpus)
        pool = ray_backend.cluster_pool("cuda" if a.gpus else "cpu", max_devices=n)
        ex = make_executor("ray", out / backend, pool)
        ex.backend.warm_up()
        setup_s = time.time() - t
        try:
            res = measure(ex, a.rescales)
        finally:
            ray.shutdown()
    else:
        pool = DevicePool.detect(gpus=a.gpus, cpu_slots_n=a.cpu_slots if a.cpu_slots or a.gpus else 2)
        res = measure(make_executor("torchrun", out / backend, pool), a.rescales)
    return {"backend": backend, "setup_s": setup_s, **res}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=["torchrun", "ray", "both"], default="both")
    ap.add_argument("--rescales", type=int, default=7)
    dev = ap.add_mutually_exclusive_group()
    dev.add_argument("--gpus", type=int, default=None)
    dev.add_argument("--cpu-slots", type=int, default=None, help="CPU slots (default 2)")
    ap.add_argument("--address", default=None, help="ray: join this cluster instead of starting a local instance")
    ap.add_argument("--out", default=None, help="run directory (default: a temporary one)")
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    a = ap.parse_args(argv)
    backends = ["torchrun", "ray"] if a.backend == "both" else [a.backend]
    with tempfile.TemporaryDirectory() as tmp:
        results = [run_backend(b, a, Path(a.out or tmp)) for b in backends]
    for r in results:
        print(f"{r['backend']}: {r['device']} {r['devices']}, options {r['options']}, {a.rescales} rescales"
              + (f"; Ray start + worker warm-up {r['setup_s']:.1f} s (once, not in the downtime)" if r["setup_s"] else ""))
        print("  downtime (stop request -> first step of the new generation), s: "
              + ", ".join(f"{d:.2f}" for d in r["downtime_s"]))  # fmt: skip
        print("  stop (request -> generation exited, checkpoint included), s: " + ", ".join(f"{d:.2f}" for d in r["stop_s"]))
    print(f"\n{'backend':<10} {'median downtime s':>18} {'median stop s':>14} {'lost samples':>13}")
    for r in results:
        print(f"{r['backend']:<10} {r['downtime_median_s']:>18.3f} {r['stop_median_s']:>14.3f} {r['lost_samples']:>13}")
    if len(results) == 2:
        print(f"torchrun / ray median downtime: {results[0]['downtime_median_s'] / results[1]['downtime_median_s']:.1f}x")
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
