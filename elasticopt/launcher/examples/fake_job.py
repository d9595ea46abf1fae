"""A fake training job without torch: it speaks the launcher's protocol and sleeps.

Used by the launcher tests (many jobs, fast) and to try the launcher on a
machine without torch.  Run it with ``"mode": "python"`` in the job payload:
one process plays all k workers.  A step of global batch b on k workers takes
``b / (k * rate * efficiency**log2(k))`` seconds.

Options::

    --rate R            samples/s of one worker (default 2000)
    --efficiency E      scaling efficiency per doubling of k (default 0.9)
    --startup-s S       delay before the first step (default 0.05)
    --crash-at-start    exit 3 before the first step
    --crash-after N     exit 3 (a "killed worker") once N samples are done,
                        in the generation named by --crash-generation (default 1)
    --ignore-stop       never look at the control file (tests the stop timeout)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

from elasticopt._io import atomic_write_text
from elasticopt.launcher.protocol import (
    ENV_SPEC,
    GenerationStatus,
    RunState,
    checkpoint_path,
    list_checkpoints,
    prune_checkpoints,
    read_spec,
    stop_requested,
    write_status,
)


def _load_checkpoint(job_dir: str) -> dict:
    for _, path in list_checkpoints(job_dir):
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # torn or corrupt: fall back to the previous one
    return {"samples": 0, "step": 0}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rate", type=float, default=2000.0)
    ap.add_argument("--efficiency", type=float, default=0.9)
    ap.add_argument("--startup-s", type=float, default=0.05)
    ap.add_argument("--crash-at-start", action="store_true")
    ap.add_argument("--crash-after", type=int, default=None)
    ap.add_argument("--crash-generation", type=int, default=1)
    ap.add_argument("--ignore-stop", action="store_true")
    a = ap.parse_args(argv)

    spec = read_spec(os.environ[ENV_SPEC])
    gen_dir = spec.gen_dir
    time.sleep(a.startup_s)
    if a.crash_at_start:
        print("fake job: crashing at start as asked", file=sys.stderr)
        return 3
    ck = _load_checkpoint(spec.job_dir)
    samples, step = int(ck["samples"]), int(ck["step"])
    rate = a.rate * spec.gpus * a.efficiency ** math.log2(spec.gpus)
    step_s = spec.batch / rate
    first_step_at = None
    last_ckpt = time.time()
    t_start = None

    def save() -> None:
        atomic_write_text(checkpoint_path(spec.job_dir, samples, "json"), json.dumps({"samples": samples, "step": step}))
        prune_checkpoints(spec.job_dir)

    def status(state: RunState, **extra) -> None:
        elapsed = (time.time() - t_start) if t_start else 0.0
        sps = (steps_here * spec.batch / elapsed) if elapsed > 0 and steps_here else None
        write_status(gen_dir, GenerationStatus(
            state=state, generation=spec.generation, step=step, samples_done=samples,
            samples_per_s=sps, first_step_at=first_step_at, checkpoint_samples=ck_samples, **extra,
        ))  # fmt: skip

    ck_samples = samples
    steps_here = 0
    while samples < spec.total_samples:
        if not a.ignore_stop and stop_requested(gen_dir):
            save()
            ck_samples = samples
            status(RunState.STOPPED, stopped_at=time.time())
            return 0
        if t_start is None:
            t_start = time.time()
        time.sleep(step_s)
        samples = min(samples + spec.batch, spec.total_samples)
        step += 1
        steps_here += 1
        if first_step_at is None:
            first_step_at = time.time()
        if (
            a.crash_after is not None
            and spec.generation == a.crash_generation
            and samples >= a.crash_after
        ):
            status(RunState.RUNNING)
            print(f"fake job: crashing after {samples} samples as asked", file=sys.stderr)
            os._exit(3)
        if time.time() - last_ckpt >= spec.checkpoint_every_s:
            save()
            ck_samples = samples
            last_ckpt = time.time()
        status(RunState.RUNNING)
    save()
    ck_samples = samples
    status(RunState.COMPLETED)
    return 0


if __name__ == "__main__":
    sys.exit(main())
