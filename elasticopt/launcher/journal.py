"""The launcher's journal: what survives the launcher being killed.

One JSON object per line, appended and fsynced before the launcher acts on
it, in ``<out>/journal.jsonl``.  Events::

    {"event": "session", "t0": 1716..., "time": ...}           # t0: the run's time origin
    {"event": "generation_start", "job_id", "generation", "gpus", "batch",
     "devices", "backend", "started_at", "log", ...}
        # torchrun adds "pid", "start_ticks" (to adopt it again); ray adds "nodes" (of every rank)
    {"event": "stop_requested", "job_id", "generation", "reason", "time"}   # reason: rescale | preempt
    {"event": "generation_end", "job_id", "generation", "rc", "reason",
     "samples_done", "checkpoint_samples", "lost_samples", "time"}
        # reason: stopped | completed | crashed | stop-killed | orphaned (died with the launcher)
        #         | unplaced (a node left before it started)
    {"event": "rescale_downtime", "job_id", "generation", "downtime_s"}
    {"event": "throughput", "job_id", "gpus", "batch", "samples_per_s"}
    {"event": "completed", "job_id", "time", "samples_done"}
    {"event": "failed", "job_id", "time", "reason"}

:func:`replay` folds the lines into a :class:`JournalState`; a last line cut
short by a crash is ignored.  Besides the job's last state it derives what
the autoscaler's records need after a restart: GPU-seconds of the ended
generations (gpus x (end ``time`` - ``started_at``)), starts (the first
generation and every one after a preemption) and preemptions.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Journal", "JournalState", "JournalJob", "replay"]


@dataclass
class JournalJob:
    """Everything the journal knows of one job."""

    job_id: str
    generation: int = 0  # last generation started (0 = never started)
    open_generation: dict[str, Any] | None = None  # generation_start without its end
    gpus: int = 0
    batch: int = 0
    samples_done: float = 0.0
    checkpoint_samples: int = 0
    lost_samples: int = 0
    restarts: int = 0
    rescales: int = 0
    completed_at: float | None = None
    failed_reason: str | None = None
    first_start_s: float | None = None
    throughput: dict[tuple[int, int], float] = field(default_factory=dict)
    gpu_s: float = 0.0  # GPU-seconds of the ended generations
    starts: int = 0  # generations started from the queue (first one, or after a preemption)
    stops: int = 0  # preemptions requested

    def close_generation(self, at: float) -> None:
        """End the open generation at unix time ``at``: its GPU-seconds are banked."""
        ev = self.open_generation
        if ev is not None:
            began = float(ev.get("started_at", ev.get("time", at)))
            self.gpu_s += int(ev.get("gpus", 0)) * max(0.0, at - began)
        self.open_generation = None


@dataclass
class JournalState:
    """The folded journal."""

    t0: float | None = None
    jobs: dict[str, JournalJob] = field(default_factory=dict)

    def job(self, job_id: str) -> JournalJob:
        """The record of ``job_id`` (created empty on first use)."""
        if job_id not in self.jobs:
            self.jobs[job_id] = JournalJob(job_id)
        return self.jobs[job_id]


def _apply(state: JournalState, ev: dict[str, Any]) -> None:
    kind = ev.get("event")
    if kind == "session":
        if state.t0 is None:
            state.t0 = float(ev["t0"])
        return
    job_id = ev.get("job_id")
    if not isinstance(job_id, str):
        return
    rec = state.job(job_id)
    if kind == "generation_start":
        if rec.generation == 0 or rec.stops >= rec.starts:
            rec.starts += 1
        elif (rec.gpus, rec.batch) != (ev["gpus"], ev["batch"]):
            rec.rescales += 1
        if rec.open_generation is not None:  # its end never reached the journal
            rec.close_generation(float(ev.get("started_at", ev.get("time", 0.0))))
        rec.generation = int(ev["generation"])
        rec.gpus, rec.batch = int(ev["gpus"]), int(ev["batch"])
        rec.open_generation = ev
        if rec.first_start_s is None and state.t0 is not None:
            rec.first_start_s = float(ev.get("started_at", state.t0)) - state.t0
    elif kind == "stop_requested":
        if ev.get("reason") == "preempt":
            rec.stops += 1
    elif kind == "generation_end":
        if rec.open_generation and rec.open_generation.get("generation") == ev.get("generation"):
            rec.close_generation(float(ev.get("time", 0.0)))
        rec.samples_done = max(rec.samples_done, float(ev.get("samples_done", 0)))
        rec.checkpoint_samples = max(rec.checkpoint_samples, int(ev.get("checkpoint_samples") or 0))
        rec.lost_samples += int(ev.get("lost_samples", 0))
        if ev.get("reason") == "crashed":
            rec.restarts += 1
    elif kind == "throughput":
        rec.throughput[(int(ev["gpus"]), int(ev["batch"]))] = float(ev["samples_per_s"])
    elif kind == "completed":
        rec.completed_at = float(ev["time"])
        rec.samples_done = max(rec.samples_done, float(ev.get("samples_done", 0)))
        rec.close_generation(float(ev.get("time", 0.0)))
    elif kind == "failed":
        rec.failed_reason = str(ev.get("reason", ""))
        rec.close_generation(float(ev.get("time", 0.0)))


def replay(path: str | os.PathLike[str]) -> JournalState:
    """Fold a journal file (missing file = empty state)."""
    state = JournalState()
    p = Path(path)
    if not p.exists():
        return state
    with open(p, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                continue  # a line cut short by a crash
            if isinstance(ev, dict):
                _apply(state, ev)
    return state


class Journal:
    """Append-only, fsynced JSON-lines journal.

    Parameters
    ----------
    path
        The journal file; created with its directory when missing.
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.state = replay(self.path)
        self._fix_torn_tail()
        if self.state.t0 is None:
            self.append({"event": "session", "t0": time.time()})
        else:
            self.append({"event": "session", "t0": self.state.t0, "resumed": True})

    def _fix_torn_tail(self) -> None:
        """Terminate a last line left without its newline by a crash."""
        if self.path.exists() and self.path.stat().st_size > 0:
            with open(self.path, "rb+") as f:
                f.seek(-1, os.SEEK_END)
                if f.read(1) != b"\n":
                    f.write(b"\n")

    @property
    def t0(self) -> float:
        """Wall-clock origin of the run (unix time)."""
        assert self.state.t0 is not None
        return self.state.t0

    def append(self, event: dict[str, Any]) -> None:
        """Write one event durably and fold it into :attr:`state`."""
        event = {**event, "time": event.get("time", time.time())}
        line = json.dumps(event, separators=(",", ":")) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        _apply(self.state, event)
