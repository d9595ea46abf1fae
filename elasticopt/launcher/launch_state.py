"""The launcher's record of one job: a generation state machine and its accounting.

A job runs as a sequence of *generations* (one worker group with fixed k and
b each).  :class:`LaunchState` says where the job is between them, and
:data:`TRANSITIONS` is the only way it may move (:meth:`LaunchedJob.move`
refuses anything else)::

    QUEUED --start--> PENDING --devices free, launched--> STARTING --first step--> RUNNING
       ^                 |  ^                                 |                       |
       |                 |  +------ exit (rescale, crash) ----+-------- STOPPING <----+ rescale / stop
       +----- stop ------+  +-------------------------------------------------+
                                     any live state --> COMPLETED | FAILED

What the scheduler sees (:class:`~elasticopt.scheduling.executor.Phase`) is
derived from the state (:meth:`LaunchedJob.phase`).  Counts and times (samples,
checkpoints, losses, restarts, rescale downtimes) live in a separate
:class:`JobAccount`.  Nothing here knows how a generation is run: that is the
backend's (:mod:`elasticopt.launcher.torchrun`, :mod:`elasticopt.launcher.ray_backend`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elasticopt.errors import LauncherError
from elasticopt.scheduling.executor import Phase
from elasticopt.scheduling.jobspec import JobSpec

__all__ = ["LaunchState", "StopMode", "TRANSITIONS", "JobAccount", "LaunchedJob"]


class LaunchState(enum.Enum):
    """Where a job is between its generations (launcher side)."""

    QUEUED = "queued"  # holds no devices and runs nothing
    PENDING = "pending"  # its next generation (k, b) waits for devices
    STARTING = "starting"  # a generation was launched and has not stepped yet
    RUNNING = "running"  # the generation steps
    STOPPING = "stopping"  # the generation was asked to stop (rescale or preemption)
    COMPLETED = "completed"
    FAILED = "failed"


class StopMode(enum.Enum):
    """Why a running generation was asked to stop."""

    RESCALE = "rescale"  # a next generation with another (k, b) follows
    PREEMPT = "preempt"  # back to the queue


_LIVE = {LaunchState.STARTING, LaunchState.RUNNING, LaunchState.STOPPING}
_END = {LaunchState.COMPLETED, LaunchState.FAILED}
TRANSITIONS: dict[LaunchState, frozenset[LaunchState]] = {
    LaunchState.QUEUED: frozenset({LaunchState.PENDING, LaunchState.RUNNING} | _END),  # RUNNING: adopted after a restart
    LaunchState.PENDING: frozenset({LaunchState.PENDING, LaunchState.QUEUED, LaunchState.STARTING, LaunchState.FAILED}),
    LaunchState.STARTING: frozenset({LaunchState.RUNNING, LaunchState.STOPPING, LaunchState.PENDING, LaunchState.QUEUED} | _END),
    LaunchState.RUNNING: frozenset({LaunchState.STOPPING, LaunchState.PENDING, LaunchState.QUEUED} | _END),
    LaunchState.STOPPING: frozenset({LaunchState.STOPPING, LaunchState.PENDING, LaunchState.QUEUED} | _END),
    LaunchState.COMPLETED: frozenset(),
    LaunchState.FAILED: frozenset(),
}
"""Allowed moves: ``TRANSITIONS[a]`` holds every state reachable from ``a`` in one step."""


@dataclass
class JobAccount:
    """What a job did, for records and the journal (all generations together)."""

    samples_done: float = 0.0
    checkpoint_samples: int = 0  # sample position of the newest complete checkpoint
    lost_samples: int = 0  # progress thrown away by crashes and kills (since the last checkpoint)
    restarts: int = 0  # crashes retried from a checkpoint
    rescales: int = 0
    samples_per_s: float | None = None  # the current generation's measured rate
    reported_rate: float | None = None  # the last rate passed to the throughput model
    downtimes_s: list[float] = field(default_factory=list)  # stop request -> first step of the next generation
    first_start_s: float | None = None  # seconds from the run's origin
    end_s: float | None = None


@dataclass
class LaunchedJob:
    """The launcher's live record of one job.

    Attributes
    ----------
    state
        The generation state machine (change it with :meth:`move` only).
    gpus, batch
        The allocation the job holds or is about to hold (0, 0 when none).
    pending
        (k, b) of the next generation to launch, None when none is due.
    handle
        The running generation (backend object), None between generations.
    """

    spec: JobSpec
    state: LaunchState = LaunchState.QUEUED
    gpus: int = 0
    batch: int = 0
    generation: int = 0
    pending: tuple[int, int] | None = None
    handle: Any = None
    stop_mode: StopMode | None = None
    stop_requested_at: float | None = None  # unix time of the pending stop request
    rescale_requested_at: float | None = None  # unix time the downtime of the current rescale counts from
    terminal_seen_at: float | None = None  # rank 0 reported stopped/completed; the exit is awaited since
    message: str = ""
    log_path: str = ""
    account: JobAccount = field(default_factory=JobAccount)

    def move(self, new: LaunchState) -> None:
        """Change state; raises :class:`~elasticopt.errors.LauncherError` on a move :data:`TRANSITIONS` forbids."""
        if new not in TRANSITIONS[self.state]:
            raise LauncherError(f"job {self.spec.id}: no transition {self.state.value} -> {new.value}")
        self.state = new

    @property
    def live(self) -> bool:
        """A generation of the job exists (starting, running or stopping)."""
        return self.state in _LIVE

    @property
    def finished(self) -> bool:
        """Completed or failed: nothing will change any more."""
        return self.state in _END

    @property
    def phase(self) -> Phase:
        """What the scheduler sees."""
        if self.state is LaunchState.STOPPING:
            return Phase.QUEUED if self.stop_mode is StopMode.PREEMPT else Phase.RESTARTING
        return _PHASE[self.state]

    @property
    def job_dir(self) -> Path:
        """The job's directory (checkpoints, one sub-directory per generation)."""
        return Path(self.spec.payload["job_dir"])


_PHASE = {
    LaunchState.QUEUED: Phase.QUEUED,
    LaunchState.PENDING: Phase.RESTARTING,
    LaunchState.STARTING: Phase.RESTARTING,
    LaunchState.RUNNING: Phase.RUNNING,
    LaunchState.COMPLETED: Phase.COMPLETED,
    LaunchState.FAILED: Phase.FAILED,
}
