"""What a launcher backend provides: starting generations, and the handle of a running one.

:class:`~elasticopt.launcher.generations.GenerationExecutor` drives any
:class:`GenerationBackend`; two exist: :class:`~elasticopt.launcher.torchrun.TorchrunBackend`
(new local processes per generation) and :class:`~elasticopt.launcher.ray_backend.RayBackend`
(warm worker actors on a Ray cluster).  Both speak the same file protocol
with the job (:mod:`elasticopt.launcher.protocol`): the executor reads a
generation's status and writes its stop request itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from elasticopt.launcher.protocol import GenerationSpec

__all__ = ["GenerationBackend", "GenerationHandle", "poll_until"]


class GenerationHandle(Protocol):
    """One running generation, as a backend hands it over."""

    spec: GenerationSpec
    log_path: Path

    def poll(self) -> int | None:
        """None while it runs; its exit code once every worker ended (0 = clean)."""

    def kill(self) -> None:
        """End every worker of the generation at once (no checkpoint)."""

    def wait(self, timeout_s: float) -> int | None:
        """Poll until it ends or ``timeout_s`` passes."""

    # True when it ended before the job ran through no fault of the job (a node left the cluster
    # during placement): the job is placed again instead of failing (optional attribute)
    infrastructure_failure: bool

    def journal_fields(self) -> dict[str, Any]:
        """What the journal keeps so that a restarted launcher may find the generation again."""


class GenerationBackend(Protocol):
    """Starts generations (the one part that differs between local processes and a Ray cluster)."""

    name: str

    def spawn(self, spec: GenerationSpec, payload: Mapping[str, Any]) -> GenerationHandle:
        """Start generation ``spec`` of a job with the job's payload (script, args...); raises OSError."""

    def adopt(self, spec: GenerationSpec, event: Mapping[str, Any]) -> GenerationHandle | None:
        """A generation an earlier launcher started (its journal event), or None when it cannot have survived."""

    def close(self) -> None:
        """Release what the backend holds (after every generation ended)."""


def poll_until(poll: Callable[[], int | None], timeout_s: float, period_s: float) -> int | None:
    """Call ``poll`` every ``period_s`` until it returns an exit code or ``timeout_s`` passes.

    The shared body of :meth:`GenerationHandle.wait`; returns the last poll (None: still running).
    """
    deadline = time.monotonic() + timeout_s
    while True:
        rc = poll()
        if rc is not None or time.monotonic() >= deadline:
            return rc
        time.sleep(period_s)
