"""Example elastic job: an MLP classifier on synthetic data made from a seed.

Run by the launcher (``"script": "<this file>"`` in a jobs file) or alone::

    python -m torch.distributed.run --standalone --nproc-per-node=2 mlp_job.py --total-samples 20000

The data set (``--dataset-size`` points in ``--features`` dimensions, labels
from a fixed random "teacher" network) depends only on ``--data-seed``: no
download.  Everything elastic (rank, batch split, learning-rate rule, sample
position, coordinated stop, checkpoints, measured samples/s) is done by
:class:`elasticopt.launcher.trainer.Trainer`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

from elasticopt.launcher.trainer import Trainer, kept


def make_data(n: int, features: int, classes: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Deterministic synthetic classification data."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=g)
    teacher = torch.randn(features, classes, generator=g)
    y = (torch.tanh(x) @ teacher).argmax(dim=1)
    return x, y


def make_model(features: int, hidden: int, classes: int) -> torch.nn.Module:
    """A two-hidden-layer MLP."""
    return torch.nn.Sequential(
        torch.nn.Linear(features, hidden), torch.nn.ReLU(),
        torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
        torch.nn.Linear(hidden, classes),
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset-size", type=int, default=8192)
    ap.add_argument("--features", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--data-seed", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0, help="model init and data order")
    ap.add_argument("--base-lr", type=float, default=0.05)
    ap.add_argument("--base-batch", type=int, default=64)
    ap.add_argument("--lr-rule", choices=["linear", "sqrt", "none"], default="sqrt")
    ap.add_argument("--ramp-steps", type=int, default=20)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--sleep-per-step", type=float, default=0.0,
                    help="extra seconds per step (makes a small job behave like a heavier one)")
    # used only when run without the launcher
    ap.add_argument("--batch", type=int, default=None)
    ap.add_argument("--max-local", type=int, default=None)
    ap.add_argument("--total-samples", type=int, default=None)
    ap.add_argument("--job-dir", default="mlp-job")
    a = ap.parse_args(argv)

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS on GPUs
    torch.use_deterministic_algorithms(True)
    tr = Trainer.from_env(
        dataset_size=a.dataset_size, base_lr=a.base_lr, base_batch=a.base_batch, lr_rule=a.lr_rule,
        ramp_steps=a.ramp_steps, seed=a.seed, batch=a.batch, max_local=a.max_local,
        total_samples=a.total_samples, job_dir=a.job_dir,
    )  # fmt: skip
    # built once per worker process: a warm worker (ray backend) keeps them for its next generations
    x, y = kept(("data", a.dataset_size, a.features, a.classes, a.data_seed),
                lambda: make_data(a.dataset_size, a.features, a.classes, a.data_seed))
    torch.manual_seed(a.seed)
    model = tr.prepare_model(tr.warm_model(lambda: make_model(a.features, a.hidden, a.classes)))
    opt = torch.optim.SGD(model.parameters(), lr=a.base_lr, momentum=a.momentum)
    resumed = tr.attach(model, opt)
    if tr.is_main:
        print(f"gen {tr.spec.generation}: k={tr.world_size} b={tr.spec.batch} device={tr.device} backend={tr.spec.backend} micro={tr.plan.micro_batches} "
              f"lr={tr.lr:.4g} resumed={resumed} at sample {tr.position}", flush=True)  # fmt: skip
    while not tr.done():
        for mb in tr.next_batch():
            with tr.accumulate(mb):
                xb, yb = x[mb.indices].to(tr.device), y[mb.indices].to(tr.device)
                loss = F.cross_entropy(model(xb), yb) * mb.weight
                loss.backward()
        if a.sleep_per_step > 0:
            time.sleep(a.sleep_per_step)
        tr.step()
        if tr.is_main and tr.step_count % 50 == 0:
            print(f"step {tr.step_count} sample {tr.position} loss {loss.item() / mb.weight:.4f} "
                  f"samples/s {tr.samples_per_s or 0:.0f}", flush=True)  # fmt: skip
    tr.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
