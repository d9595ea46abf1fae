"""The job-side helper: what a training script imports to be elastic.

Only job scripts import this module (it imports torch; the launcher never
does).  A generation of the job runs under ``torchrun`` with k workers and a
global batch b chosen by the scheduler; the next generation may have other k
and b and resumes from the checkpoint.  The helper handles all of it::

    from elasticopt.launcher.trainer import Trainer

    tr = Trainer.from_env(base_lr=0.1, base_batch=64, lr_rule="linear", ramp_steps=20, seed=0)
    torch.manual_seed(0)
    model = tr.prepare_model(MyNet())                 # to tr.device, DDP when k > 1
    opt = torch.optim.SGD(model.parameters(), lr=0.1)  # lr = base_lr (rescaled by the helper)
    tr.attach(model, opt)                             # resumes from the newest checkpoint
    while not tr.done():
        for mb in tr.next_batch():                    # gradient accumulation when b/k > max_local
            with tr.accumulate(mb):                   # no DDP all-reduce but on the last micro-batch
                x, y = X[mb.indices], Y[mb.indices]
                (loss_fn(model(x), y) * mb.weight).backward()
        tr.step()                                     # lr rule, optimizer step, stop/checkpoint, status
    tr.finish()

- rank / world size / device: ``tr.rank``, ``tr.world_size``, ``tr.device``;
- ``tr.plan``: local batch b/k and its micro-batches (each <= ``max_local``);
- learning rate: ``base_lr`` is tuned at ``base_batch``; at batch b the rule
  (``linear``, ``sqrt`` or ``none``) gives the target, reached by a linear ramp
  over ``ramp_steps`` optimizer steps after every batch change.  A torch LR
  scheduler passed to :meth:`Trainer.attach` keeps working: the rule multiplies
  its learning rate;
- data: the job reads one infinite stream of samples (epoch e is a seeded
  permutation of the dataset); step s reads stream positions
  ``[p, p + b)`` split into k equal parts, so the data never depends on k and a
  resumed job neither repeats nor skips a sample;
- the launcher's protocol (:class:`~elasticopt.launcher.elastic.ElasticRun`,
  ``tr.run``): a coordinated stop (rank 0 reads the launcher's control file, an
  all-reduce makes every rank stop after the same step); checkpoints (model,
  optimizer, scheduler, stream position, step, lr ramp, RNG state of rank 0,
  ``tr.extra``) written by rank 0 to a temp file, fsynced and renamed;
  measured samples/s written by rank 0 to the generation's status file;
- warm workers (ray backend): :meth:`Trainer.warm_model` and :func:`kept` keep
  the constructed model and the data in the worker process between generations.

Run without the launcher (plain ``python script.py``) it trains alone on one
process with the values given to :meth:`Trainer.from_env`.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from elasticopt.launcher.elastic import ElasticRun
from elasticopt.launcher.plan import BatchPlan, LRRamp, rank_slice, scaled_lr, split_batch
from elasticopt.launcher.protocol import ENV_SPEC, GenerationSpec, read_spec

__all__ = ["Trainer", "MicroBatch", "kept"]

log = logging.getLogger(__name__)

_KEPT: dict[Any, Any] = {}  # what a warm worker process keeps between generations


def kept(key: Any, factory: Callable[[], Any]) -> Any:
    """``factory()`` built once per process and kept for the next generations run by this process.

    Under the ray backend a warm worker process runs generation after
    generation of a job: what is kept here (a data set, a tokenizer) is not
    built again.  Under ``torchrun`` every generation is a new process, so it
    is built every time.  Keep only what training never changes; for the
    model use :meth:`Trainer.warm_model`.
    """
    if key not in _KEPT:
        _KEPT[key] = factory()
    return _KEPT[key]


@dataclass(frozen=True)
class MicroBatch:
    """One forward/backward pass of this rank: dataset indices and loss weight.

    Multiply the mean loss of the micro-batch by ``weight`` (its share of the
    local batch) so accumulated gradients equal those of the whole local batch.
    """

    indices: torch.Tensor
    weight: float
    last: bool


class Trainer:
    """Elastic data-parallel training for one generation (see the module docstring)."""

    def __init__(
        self,
        spec: GenerationSpec,
        *,
        base_lr: float,
        base_batch: int,
        lr_rule: str = "linear",
        ramp_steps: int = 20,
        seed: int = 0,
        dataset_size: int,
    ):
        self.spec = spec
        self.base_lr = base_lr
        self.base_batch = base_batch
        self.lr_rule = lr_rule
        self.ramp_steps = ramp_steps
        self.seed = seed
        self.dataset_size = dataset_size
        self.run = ElasticRun(spec)  # rank, world size, device, process group; stop, checkpoint, status
        self.world_size, self.rank, self.local_rank = self.run.world_size, self.run.rank, self.run.local_rank
        self.distributed, self.device = self.run.distributed, self.run.device
        self.plan: BatchPlan = split_batch(spec.batch, self.world_size, spec.max_local)
        self.position = 0  # samples of the stream consumed
        self.step_count = 0  # optimizer steps taken by the job (all generations)
        self.extra: dict[str, Any] = {}
        self.lr_ramp = LRRamp(self.target_lr, self.target_lr)
        self.model: torch.nn.Module | None = None
        self.optimizer: torch.optim.Optimizer | None = None
        self.scheduler: Any = None
        self._perm_cache: dict[int, torch.Tensor] = {}

    # ----------------------------------------------------------- construction
    @classmethod
    def from_env(
        cls,
        *,
        dataset_size: int,
        base_lr: float,
        base_batch: int,
        lr_rule: str = "linear",
        ramp_steps: int = 20,
        seed: int = 0,
        batch: int | None = None,
        max_local: int | None = None,
        total_samples: int | None = None,
        job_dir: str = "elasticopt-job",
    ) -> "Trainer":
        """The trainer of this generation (spec from the launcher, else from the arguments)."""
        path = os.environ.get(ENV_SPEC)
        if path:
            spec = read_spec(path)
        else:
            b = batch or base_batch
            ws = int(os.environ.get("WORLD_SIZE", "1"))
            spec = GenerationSpec(
                job_id=Path(job_dir).name, generation=1, gpus=ws, batch=b, max_local=max_local or b,
                total_samples=total_samples or dataset_size, job_dir=job_dir,
                device_kind="cuda" if torch.cuda.is_available() else "cpu",
                backend="nccl" if torch.cuda.is_available() else "gloo",
            )  # fmt: skip
        return cls(spec, base_lr=base_lr, base_batch=base_batch, lr_rule=lr_rule,
                   ramp_steps=ramp_steps, seed=seed, dataset_size=dataset_size)  # fmt: skip

    @property
    def is_main(self) -> bool:
        """Rank 0: the one that writes checkpoints and status."""
        return self.rank == 0

    @property
    def target_lr(self) -> float:
        """The rule's learning rate at this generation's global batch."""
        return scaled_lr(self.base_lr, self.base_batch, self.spec.batch, self.lr_rule)

    @property
    def lr(self) -> float:
        """The learning rate of the next optimizer step (ramp included)."""
        return self.lr_ramp.lr_at(self.step_count)

    def warm_model(self, factory: Callable[[], torch.nn.Module], key: str = "model") -> torch.nn.Module:
        """The job's model, constructed by ``factory`` once per worker process and kept warm.

        A later generation run by the same process (ray backend) gets the same
        module back, its parameters reset to their initial values (and the
        torch RNG to its state after construction), so the job cannot tell
        it from a fresh ``factory()``; :meth:`attach` then loads the checkpoint
        over them as usual.  Under ``torchrun`` this is ``factory()``.
        """
        slot = ("warm_model", self.spec.job_dir, key)
        for stale in [k for k in _KEPT if isinstance(k, tuple) and k[:1] == ("warm_model",)
                      and k[1] != self.spec.job_dir]:
            del _KEPT[stale]  # another job's model: this process serves one job at a time
        if slot not in _KEPT:
            model = factory()
            _KEPT[slot] = (model, copy.deepcopy(model.state_dict()), torch.get_rng_state())
            return model
        model, initial, rng = _KEPT[slot]
        model.load_state_dict(initial)
        torch.set_rng_state(rng)
        return model

    def prepare_model(self, model: torch.nn.Module) -> torch.nn.Module:
        """Move to the device and wrap in DistributedDataParallel when k > 1."""
        model = model.to(self.device)
        if self.distributed:
            ids = [self.local_rank] if self.device.type == "cuda" else None
            model = torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)
        return model

    def attach(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any = None) -> bool:
        """Register what is checkpointed and resume from the newest checkpoint; True if resumed."""
        self.model, self.optimizer, self.scheduler = model, optimizer, scheduler
        ck = self.run.load()
        if ck is None:
            return False
        self._raw_model().load_state_dict(ck["model"])
        optimizer.load_state_dict(ck["optimizer"])
        if scheduler is not None and ck.get("scheduler") is not None:
            scheduler.load_state_dict(ck["scheduler"])
        self.position, self.step_count = int(ck["position"]), int(ck["step"])
        self.extra = dict(ck.get("extra", {}))
        ramp = LRRamp(**ck["lr_ramp"])
        if int(ck["batch"]) != self.spec.batch:
            ramp = ramp.retarget(self.step_count, self.target_lr, self.ramp_steps)
        self.lr_ramp = ramp
        rng = ck.get("rng", {})
        if "torch" in rng:
            torch.set_rng_state(rng["torch"])
        if "python" in rng:
            random.setstate(rng["python"])
        if "cuda" in rng and self.device.type == "cuda":
            torch.cuda.set_rng_state_all(rng["cuda"])
        return True

    def _raw_model(self) -> torch.nn.Module:
        assert self.model is not None, "call attach() first"
        return getattr(self.model, "module", self.model)

    # ------------------------------------------------------------------- data
    def _perm(self, epoch: int) -> torch.Tensor:
        if epoch not in self._perm_cache:
            g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            self._perm_cache = {epoch: torch.randperm(self.dataset_size, generator=g)}
        return self._perm_cache[epoch]

    def stream_indices(self, start: int, stop: int) -> torch.Tensor:
        """Dataset indices of stream positions ``[start, stop)`` (epochs = seeded permutations)."""
        pos = torch.arange(start, stop)
        epochs, offsets = pos // self.dataset_size, pos % self.dataset_size
        out = torch.empty_like(pos)
        for e in epochs.unique().tolist():
            mask = epochs == e
            out[mask] = self._perm(int(e))[offsets[mask]]
        return out

    def next_batch(self) -> list[MicroBatch]:
        """This rank's micro-batches of the next step."""
        start, stop = rank_slice(self.position, self.spec.batch, self.world_size, self.rank)
        idx = self.stream_indices(start, stop)
        out, at = [], 0
        for i, size in enumerate(self.plan.micro_batches):
            out.append(MicroBatch(idx[at : at + size], size / self.plan.local_batch, i == len(self.plan.micro_batches) - 1))
            at += size
        return out

    def accumulate(self, mb: MicroBatch):
        """Context for one micro-batch's backward: skips DDP's all-reduce but on the last."""
        if self.distributed and not mb.last and hasattr(self.model, "no_sync"):
            return self.model.no_sync()
        return contextlib.nullcontext()

    # ------------------------------------------------------------------- step
    def done(self) -> bool:
        """True when the job processed all its samples or the generation must stop."""
        return self.run.stopping or self.position >= self.spec.total_samples

    @property
    def samples_per_s(self) -> float | None:
        """Measured rate of this generation."""
        return self.run.samples_per_s

    def step(self) -> None:
        """Optimizer step at the rule's lr, then advance, coordinate a stop, checkpoint, report."""
        assert self.optimizer is not None, "call attach() first"
        factor = self.lr / self.base_lr
        saved = [g["lr"] for g in self.optimizer.param_groups]
        for g in self.optimizer.param_groups:
            g["lr"] = g["lr"] * factor
        self.optimizer.step()
        for g, lr in zip(self.optimizer.param_groups, saved):
            g["lr"] = lr
        self.optimizer.zero_grad(set_to_none=True)
        if self.scheduler is not None:
            self.scheduler.step()
        self.position += self.spec.batch
        self.step_count += 1
        self.run.step(self.position, self._state)

    def checkpoint(self) -> None:
        """Write a checkpoint of the current position (rank 0; the others return at once)."""
        self.run.save(self.position, self._state)

    def _state(self) -> dict[str, Any]:
        """What a checkpoint holds (built on rank 0 when one is written)."""
        rng: dict[str, Any] = {"torch": torch.get_rng_state(), "python": random.getstate()}
        if self.device.type == "cuda":
            rng["cuda"] = torch.cuda.get_rng_state_all()
        return {
            "model": self._raw_model().state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
            "position": self.position,
            "step": self.step_count,
            "batch": self.spec.batch,
            "world_size": self.world_size,
            "lr_ramp": dict(self.lr_ramp.__dict__),
            "rng": rng,
            "extra": self.extra,
        }

    def finish(self) -> None:
        """End the generation: the final checkpoint and status when complete, then leave the group."""
        self.run.finish(self.position, self._state)
