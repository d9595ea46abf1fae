"""The file protocol between the launcher and a job's processes (no torch).

A job owns a directory ``<out>/jobs/<job id>/``.  Every *generation* (one
``torchrun`` with a fixed number of workers k and global batch b) has its own
sub-directory ``gen-0003/`` holding:

``spec.json``
    Written by the launcher before the start: generation number, k, b,
    ``max_local``, ``total_samples``, device ids, paths.  The job finds it
    through the environment variable :data:`ENV_SPEC`.
``control.json``
    Written by the launcher to ask the generation to stop:
    ``{"command": "stop", "requested_at": <unix time>}``.  Rank 0 polls it
    once per step; an all-reduce makes every rank stop at the same step.
``status.json``
    Written atomically by rank 0: ``state`` (``running``, ``stopped``,
    ``completed``), ``samples_done``, ``step``, ``samples_per_s``,
    ``first_step_at``, ``stopped_at``, ``checkpoint_samples``.
``log.txt``
    stdout and stderr of the whole generation.

Checkpoints live in ``<job dir>/checkpoints/`` and are named by the sample
position they hold, ``ckpt-000000123456.pt``; each is written to a temporary
file, fsynced and renamed, so a file with a final name is always complete.
The two newest are kept: a reader that finds the newest one unreadable falls
back to the previous one.
"""

from __future__ import annotations

import enum
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elasticopt._io import atomic_write_text

__all__ = [
    "ENV_SPEC",
    "replace_text",
    "GenerationSpec",
    "GenerationStatus",
    "RunState",
    "generation_dir",
    "write_spec",
    "read_spec",
    "request_stop",
    "stop_requested",
    "write_status",
    "read_status",
    "checkpoint_dir",
    "checkpoint_path",
    "list_checkpoints",
    "latest_checkpoint_samples",
    "torn_checkpoint_samples",
    "prune_checkpoints",
]

ENV_SPEC = "ELASTICOPT_GENERATION_SPEC"
"""Environment variable holding the path of the generation's ``spec.json``."""



def replace_text(path: str | os.PathLike[str], text: str) -> None:
    """Atomic replace without fsync, for small files rewritten many times a second.

    A crash may lose the latest version but never leaves a partial file.  Use
    :func:`elasticopt._io.atomic_write_text` where durability matters.
    """
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)


_CKPT_RE = re.compile(r"^ckpt-(\d{12})\.(pt|json)$")


@dataclass(frozen=True)
class GenerationSpec:
    """What one generation of a job is asked to do (``spec.json``)."""

    job_id: str
    generation: int
    gpus: int
    batch: int
    max_local: int
    total_samples: int
    job_dir: str
    devices: tuple[int, ...] = ()
    device_kind: str = "cpu"  # "cpu" or "cuda"
    backend: str = "gloo"  # "gloo" or "nccl"
    checkpoint_every_s: float = 30.0
    status_every_s: float = 0.5
    created_at: float = field(default_factory=time.time)

    @property
    def gen_dir(self) -> Path:
        """This generation's directory."""
        return generation_dir(self.job_dir, self.generation)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        d = dict(self.__dict__)
        d["devices"] = list(self.devices)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "GenerationSpec":
        """Inverse of :meth:`to_dict` (unknown keys ignored)."""
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        known["devices"] = tuple(known.get("devices", ()))
        return cls(**known)


class RunState(str, enum.Enum):
    """The ``state`` rank 0 reports in ``status.json`` (stored as its value)."""

    STARTING = "starting"
    RUNNING = "running"
    STOPPED = "stopped"  # asked to stop: stopped after its checkpoint
    COMPLETED = "completed"  # all samples processed, final checkpoint written

    @property
    def final(self) -> bool:
        """Rank 0 wrote its last checkpoint: only the exit of the processes remains."""
        return self in (RunState.STOPPED, RunState.COMPLETED)


@dataclass(frozen=True)
class GenerationStatus:
    """What rank 0 reports (``status.json``); every field optional but state."""

    state: RunState = RunState.STARTING
    generation: int = 0
    step: int = 0
    samples_done: int = 0
    samples_per_s: float | None = None
    first_step_at: float | None = None
    stopped_at: float | None = None
    checkpoint_samples: int | None = None
    updated_at: float = 0.0

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "GenerationStatus":
        """Inverse of the JSON written by :func:`write_status` (unknown keys ignored)."""
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        known["state"] = RunState(known.get("state", RunState.STARTING))
        return cls(**known)


def generation_dir(job_dir: str | os.PathLike[str], generation: int) -> Path:
    """``<job_dir>/gen-NNNN``."""
    return Path(job_dir) / f"gen-{generation:04d}"


def write_spec(spec: GenerationSpec) -> Path:
    """Create the generation directory and write ``spec.json``; return its path."""
    d = spec.gen_dir
    d.mkdir(parents=True, exist_ok=True)
    path = d / "spec.json"
    atomic_write_text(path, json.dumps(spec.to_dict(), indent=1))
    return path


def read_spec(path: str | os.PathLike[str]) -> GenerationSpec:
    """Read a ``spec.json``."""
    return GenerationSpec.from_dict(json.loads(Path(path).read_text()))


def request_stop(gen_dir: str | os.PathLike[str], requested_at: float | None = None) -> None:
    """Ask a generation to stop at its next step (idempotent)."""
    path = Path(gen_dir) / "control.json"
    if path.exists():
        return
    t = time.time() if requested_at is None else requested_at
    replace_text(path, json.dumps({"command": "stop", "requested_at": t}))


def stop_requested(gen_dir: str | os.PathLike[str]) -> bool:
    """True when the launcher asked the generation to stop (one ``stat`` call)."""
    return os.path.exists(os.path.join(gen_dir, "control.json"))


def write_status(gen_dir: str | os.PathLike[str], status: GenerationStatus | dict[str, Any]) -> None:
    """Atomically replace ``status.json`` (rank 0 only)."""
    d = status if isinstance(status, dict) else dict(status.__dict__)
    d = {**d, "state": RunState(d.get("state", RunState.STARTING)).value, "updated_at": time.time()}
    replace_text(Path(gen_dir) / "status.json", json.dumps(d))


def read_status(gen_dir: str | os.PathLike[str]) -> GenerationStatus | None:
    """The last status written, or None when there is none (yet) or it is unreadable."""
    try:
        return GenerationStatus.from_dict(json.loads((Path(gen_dir) / "status.json").read_text()))
    except (OSError, ValueError, TypeError):
        return None


def checkpoint_dir(job_dir: str | os.PathLike[str]) -> Path:
    """``<job_dir>/checkpoints``."""
    return Path(job_dir) / "checkpoints"


def checkpoint_path(job_dir: str | os.PathLike[str], samples: int, suffix: str = "pt") -> Path:
    """Final name of the checkpoint holding sample position ``samples``."""
    return checkpoint_dir(job_dir) / f"ckpt-{int(samples):012d}.{suffix}"


def list_checkpoints(job_dir: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """Complete checkpoints (final names only), newest first, as (samples, path)."""
    d = checkpoint_dir(job_dir)
    if not d.is_dir():
        return []
    out = []
    for p in d.iterdir():
        m = _CKPT_RE.match(p.name)
        if m:
            out.append((int(m.group(1)), p))
    return sorted(out, key=lambda sp: sp[0], reverse=True)


def torn_checkpoint_samples(job_dir: str | os.PathLike[str]) -> int:
    """Highest sample position among checkpoints left half-written (temp files), 0 if none.

    A generation killed while writing a checkpoint had reached that position:
    the launcher counts it as lost progress.
    """
    d = checkpoint_dir(job_dir)
    if not d.is_dir():
        return 0
    best = 0
    for p in d.glob(".ckpt-*.tmp"):
        m = re.match(r"^\.ckpt-(\d{12})\.", p.name)
        if m:
            best = max(best, int(m.group(1)))
    return best


def latest_checkpoint_samples(job_dir: str | os.PathLike[str]) -> int:
    """Sample position of the newest checkpoint (0 when there is none)."""
    ck = list_checkpoints(job_dir)
    return ck[0][0] if ck else 0


def prune_checkpoints(job_dir: str | os.PathLike[str], keep: int = 2) -> None:
    """Delete all but the ``keep`` newest checkpoints and any stale temp files."""
    for _, p in list_checkpoints(job_dir)[keep:]:
        try:
            p.unlink()
        except FileNotFoundError:
            pass
