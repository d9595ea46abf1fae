"""The job side of the launcher's protocol for any ``torch.distributed`` script: a few lines make it elastic.

Job scripts import this (it imports torch; the launcher never does).  A
generation runs with k workers and global batch b chosen by the scheduler;
:class:`ElasticRun` tells the script k, b, its rank and where its checkpoints
are, and after every optimizer step reports progress, writes the periodic
checkpoint and coordinates a stop the launcher asked for (rank 0 reads the
control file, an all-reduce makes every rank stop after the same step).
The script keeps its own model, data loading and checkpoint content
(``torch.save`` of whatever it likes); the few lines are::

    run = ElasticRun.from_env()                        # k, b, rank; init_process_group when k > 1
    state = run.load()                                 # the newest checkpoint (dict) or None
    position = state["position"] if state else 0       # samples of the data stream consumed
    while position < run.total_samples:
        ...one optimizer step on this rank's run.local_batch samples...
        position += run.batch
        if run.step(position, lambda: {"model": model.state_dict(), "position": position}):
            break                                      # the launcher asked: checkpoint written, stop
    run.finish(position, lambda: {...same state...})   # the final checkpoint when complete

``examples/plain_ddp_job.py`` is such a script; :class:`~elasticopt.launcher.trainer.Trainer`
is built on :class:`ElasticRun` and adds batch splitting with gradient
accumulation, learning-rate rules and an exactly resumable data stream.

Checkpoints are written by rank 0 to a temporary file, fsynced and renamed
(:func:`save_checkpoint`); :func:`load_latest_checkpoint` falls back to the
previous one when the newest is unreadable.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from elasticopt.launcher.protocol import (
    ENV_SPEC,
    GenerationSpec,
    GenerationStatus,
    RunState,
    checkpoint_dir,
    checkpoint_path,
    list_checkpoints,
    prune_checkpoints,
    read_spec,
    stop_requested,
    write_status,
)

__all__ = ["ElasticRun", "load_latest_checkpoint", "save_checkpoint", "ENV_CHECKPOINT_DELAY"]

ENV_CHECKPOINT_DELAY = "ELASTICOPT_CHECKPOINT_DELAY_S"
"""Fault injection for tests: seconds to wait between writing a checkpoint's temp file and renaming it."""

log = logging.getLogger(__name__)


def save_checkpoint(job_dir: str | os.PathLike[str], samples: int, state: dict[str, Any], keep: int = 2) -> Path:
    """Write ``state`` as the checkpoint of position ``samples``: temp file, fsync, rename."""
    final = checkpoint_path(job_dir, samples)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    delay = float(os.environ.get(ENV_CHECKPOINT_DELAY, "0") or 0)
    if delay > 0:  # fault injection: widen the window in which a kill finds a half-done checkpoint
        time.sleep(delay)
    os.replace(tmp, final)
    dfd = os.open(final.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
    prune_checkpoints(job_dir, keep)
    for stale in checkpoint_dir(job_dir).glob(".ckpt-*.tmp"):
        if stale != tmp:
            stale.unlink(missing_ok=True)
    return final


def load_latest_checkpoint(job_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The newest readable checkpoint (an unreadable newest one falls back to the previous)."""
    for _, path in list_checkpoints(job_dir):
        if path.suffix != ".pt":
            continue
        try:
            return torch.load(path, map_location="cpu", weights_only=False)
        except Exception as exc:  # noqa: BLE001 - a torn or corrupt file, whatever torch raises
            log.warning("checkpoint %s unreadable (%s): trying the previous one", path, exc)
    return None


class ElasticRun:
    """One generation of a job, seen from its script (see the module docstring).

    Parameters
    ----------
    spec
        The generation's spec (:meth:`from_env` reads the launcher's).

    Attributes
    ----------
    rank, world_size, local_rank
        From the environment ``torchrun`` (or a warm worker) sets.
    device
        ``cuda:<local_rank>`` on GPUs, else the CPU.
    samples_per_s
        Measured rate of this generation (after its second step).
    """

    def __init__(self, spec: GenerationSpec):
        self.spec = spec
        self.world_size = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        if self.world_size != spec.gpus:
            log.warning("WORLD_SIZE=%d but the spec asks for %d workers", self.world_size, spec.gpus)
        self.distributed = self.world_size > 1
        if self.rank == 0:
            spec.gen_dir.mkdir(parents=True, exist_ok=True)
        if spec.device_kind == "cuda":
            torch.cuda.set_device(self.local_rank)
            self.device = torch.device("cuda", self.local_rank)
        else:
            self.device = torch.device("cpu")
        if self.distributed and not dist.is_initialized():
            dist.init_process_group(spec.backend)
        self.stopping = False
        self.steps = 0  # optimizer steps of this generation
        self.samples_per_s: float | None = None
        self._last_ckpt = time.time()
        self._last_status = 0.0
        self._first_step_at: float | None = None
        self._rate_t0 = 0.0
        self._rate_p0 = 0
        self._ckpt_samples: int | None = None

    @classmethod
    def from_env(
        cls, *, batch: int = 64, max_local: int | None = None, total_samples: int = 10**6,
        job_dir: str = "elasticopt-job",
    ) -> "ElasticRun":  # fmt: skip
        """The run of this generation: the launcher's spec, else (a plain run) one built from the arguments."""
        path = os.environ.get(ENV_SPEC)
        if path:
            return cls(read_spec(path))
        cuda = torch.cuda.is_available()
        return cls(GenerationSpec(
            job_id=Path(job_dir).name, generation=1, gpus=int(os.environ.get("WORLD_SIZE", "1")), batch=batch,
            max_local=max_local or batch, total_samples=total_samples, job_dir=job_dir,
            device_kind="cuda" if cuda else "cpu", backend="nccl" if cuda else "gloo",
        ))  # fmt: skip

    @property
    def is_main(self) -> bool:
        """Rank 0: the one that writes checkpoints and status."""
        return self.rank == 0

    @property
    def batch(self) -> int:
        """This generation's global batch b."""
        return self.spec.batch

    @property
    def local_batch(self) -> int:
        """Samples per rank and optimizer step, b / k."""
        return self.spec.batch // self.world_size

    @property
    def total_samples(self) -> int:
        """Samples until the job is done."""
        return self.spec.total_samples

    @property
    def job_dir(self) -> Path:
        """Where the job's checkpoints live (on a file system every node sees)."""
        return Path(self.spec.job_dir)

    def load(self) -> dict[str, Any] | None:
        """The newest checkpoint of the job (every rank reads it), None for a fresh start."""
        state = load_latest_checkpoint(self.spec.job_dir)
        if state is not None and "position" in state:
            self._ckpt_samples = int(state["position"])
        return state

    def save(self, position: int, state: Callable[[], dict[str, Any]]) -> None:
        """Checkpoint ``state()`` at sample ``position`` (rank 0 builds and writes it; the others return)."""
        self._last_ckpt = time.time()
        if self.is_main:
            save_checkpoint(self.spec.job_dir, position, state())
            self._ckpt_samples = position

    def step(self, position: int, state: Callable[[], dict[str, Any]]) -> bool:
        """After every optimizer step: report, checkpoint when due, and say whether to stop now.

        ``position`` is the sample position reached; ``state`` builds the
        checkpoint (called on rank 0 only, and only when one is written).
        Returns True on every rank when the launcher asked the generation to
        stop: the checkpoint of ``position`` is then written.
        """
        self.steps += 1
        now = time.time()
        if self._first_step_at is None:
            self._first_step_at, self._rate_t0, self._rate_p0 = now, now, position
        elif now > self._rate_t0:
            self.samples_per_s = (position - self._rate_p0) / (now - self._rate_t0)
        stop = self.is_main and stop_requested(self.spec.gen_dir)
        ckpt = self.is_main and now - self._last_ckpt >= self.spec.checkpoint_every_s
        if self.distributed:
            flags = torch.tensor([int(stop), int(ckpt)], device=self.device)
            dist.all_reduce(flags, op=dist.ReduceOp.MAX)
            stop, ckpt = bool(flags[0]), bool(flags[1])
        self.stopping = stop
        if (ckpt or stop) and position < self.spec.total_samples:
            self.save(position, state)
        if stop:
            self.status(RunState.STOPPED, position, stopped_at=time.time())
        elif self._last_status == 0.0 or now - self._last_status >= self.spec.status_every_s:
            self.status(RunState.RUNNING, position)
        return stop

    def status(self, state: RunState, position: int, **extra: Any) -> None:
        """Write the generation's status (rank 0)."""
        if not self.is_main:
            return
        self._last_status = time.time()
        write_status(self.spec.gen_dir, GenerationStatus(
            state=state, generation=self.spec.generation, step=self.steps, samples_done=position,
            samples_per_s=self.samples_per_s, first_step_at=self._first_step_at,
            checkpoint_samples=self._ckpt_samples, **extra,
        ))  # fmt: skip

    def finish(self, position: int, state: Callable[[], dict[str, Any]]) -> None:
        """End the generation: when the job is complete, its final checkpoint and status; then leave the group."""
        if not self.stopping and position >= self.spec.total_samples:
            self.save(position, state)
            self.status(RunState.COMPLETED, position)
        if self.distributed and dist.is_initialized():
            dist.destroy_process_group()
