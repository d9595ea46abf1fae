"""Example job in plain ``torch.distributed``: its own DDP loop, data and ``torch.save`` checkpoints.

The script is an ordinary DDP training loop; the lines marked ``# elastic``
are all it takes to run under the launcher (torchrun or ray backend): read
k and b from the generation, resume from the newest checkpoint, call
``run.step`` after each optimizer step (progress, periodic checkpoint,
coordinated stop) and ``run.finish`` at the end.  Everything else (model,
optimizer, what a checkpoint holds, how data is read) is the script's.

Run by the launcher (``"script": "example:plain"`` in a jobs file) or alone::

    python -m torch.distributed.run --standalone --nproc-per-node=2 plain_ddp_job.py --total-samples 20000

Data: a seeded synthetic regression set; the global batch of step s is the
block of samples ``[position, position + b)`` of a fixed permutation, split
into k equal parts, so a resumed generation with another k continues at the
same sample.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

from elasticopt.launcher.elastic import ElasticRun


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset-size", type=int, default=4096)
    ap.add_argument("--features", type=int, default=16)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sleep-per-step", type=float, default=0.0, help="extra seconds per step (a heavier job)")
    ap.add_argument("--batch", type=int, default=64, help="alone only: global batch")
    ap.add_argument("--total-samples", type=int, default=20000, help="alone only")
    ap.add_argument("--job-dir", default="plain-ddp-job", help="alone only: checkpoints")
    a = ap.parse_args(argv)

    run = ElasticRun.from_env(batch=a.batch, total_samples=a.total_samples, job_dir=a.job_dir)  # elastic
    g = torch.Generator().manual_seed(a.seed)
    x = torch.randn(a.dataset_size, a.features, generator=g)
    y = x @ torch.randn(a.features, 1, generator=g) + 0.1 * torch.randn(a.dataset_size, 1, generator=g)
    order = torch.randperm(a.dataset_size, generator=g)
    torch.manual_seed(a.seed)
    model = torch.nn.Sequential(torch.nn.Linear(a.features, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=a.lr)
    position = 0
    state = run.load()  # elastic: the newest checkpoint, whatever k wrote it
    if state is not None:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        position = state["position"]
    ddp = torch.nn.parallel.DistributedDataParallel(model) if dist.is_initialized() else model
    if run.is_main:
        print(f"gen {run.spec.generation}: k={run.world_size} b={run.batch} resumed at sample {position}", flush=True)

    def checkpoint() -> dict:  # elastic: what to save (rank 0, when a checkpoint is due)
        return {"model": model.state_dict(), "optimizer": opt.state_dict(), "position": position}

    while position < run.total_samples:
        start = position + run.rank * run.local_batch  # this rank's part of the global batch
        idx = order[torch.arange(start, start + run.local_batch) % a.dataset_size]
        loss = F.mse_loss(ddp(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(a.sleep_per_step)
        position += run.batch
        if run.step(position, checkpoint):  # elastic: report, checkpoint when due, stop when asked
            break
    run.finish(position, checkpoint)  # elastic: final checkpoint when complete, leave the group
    if run.is_main:
        print(f"stopped at sample {position}, loss {loss.item():.4f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
