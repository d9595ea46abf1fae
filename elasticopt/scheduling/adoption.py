"""Taking over jobs an earlier driver already ran (a restarted launcher).

A launcher killed and restarted finds its jobs again on the executor
(:meth:`elasticopt.launcher.executor.LauncherExecutor.recover`): some still
running on a known (gpus, batch), some queued at a checkpoint, some finished.
The new :class:`~elasticopt.scheduling.autoscaler.Autoscaler` must not start
them again, yet its decisions and records must count them as if it had run
them from the beginning.  :class:`AdoptionMixin` gives it
:meth:`~AdoptionMixin.adopt` and :meth:`~AdoptionMixin.adopt_finished`;
:class:`JobHistory` carries what the earlier driver knew.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from elasticopt.errors import ValidationError
from elasticopt.scheduling.executor import Executor, JobSpec, Phase

if TYPE_CHECKING:
    from elasticopt.scheduling.autoscaler import Decision

__all__ = ["AdoptionMixin", "JobHistory"]

Option = tuple[int, int]


@dataclass(frozen=True)
class JobHistory:
    """What happened to a job before the autoscaler took it over.

    Parameters
    ----------
    first_start_s
        When it first got GPUs (None: never, or unknown).
    gpu_s
        GPU-seconds it held before (for a running job: before its current
        allocation began).
    starts, rescales, stops
        Starts from the queue, rescales and preemptions so far; the restart
        cost charged is ``(starts + rescales) * restart_cost_s``.
    last_alloc
        Its last (gpus, batch), for a job holding none now (a finished job's
        final allocation).
    """

    first_start_s: float | None = None
    gpu_s: float = 0.0
    starts: int = 0
    rescales: int = 0
    stops: int = 0
    last_alloc: Option | None = None


class AdoptionMixin:
    """The :class:`~elasticopt.scheduling.autoscaler.Autoscaler` methods that take over jobs."""

    if TYPE_CHECKING:
        executor: Executor
        _lock: Any
        _active: dict[str, None]

        def _prepare(self, spec: JobSpec) -> JobSpec: ...

        def _track(self, spec: JobSpec, history: JobHistory, status: str, since_s: float) -> Any: ...

        def reschedule(self, reason: str = "manual") -> Decision | None: ...

    def adopt(
        self,
        spec: JobSpec,
        gpus: int,
        batch: int,
        *,
        since_s: float | None = None,
        history: JobHistory = JobHistory(),
        reschedule: bool = False,
    ) -> Decision | None:
        """Take over a job the executor already has, without starting it.

        The job becomes active as if this autoscaler had started it: it
        counts in snapshots, decisions, :attr:`gpus_in_use` and records, and a
        later decision may rescale or stop it.  Its progress and phase are the
        executor's, which must report it holding exactly (gpus, batch).

        Parameters
        ----------
        spec
            The job (a new id for this autoscaler).
        gpus, batch
            Its current allocation; ``0, 0`` for a job queued at a checkpoint.
        since_s
            When that allocation began (GPU-seconds accrue from it); default now.
        history
            What happened before; ``first_start_s`` defaults to ``since_s`` and
            ``starts`` to at least 1 for a running job.
        reschedule
            Decide at once (default False: adopt every job, then decide).

        Raises
        ------
        ValidationError
            Known id, an allocation the executor does not report, a finished
            job, or ``since_s`` in the future.
        """
        with self._lock:
            spec = self._prepare(spec)
            now = self.executor.now_s()
            since = now if since_s is None else float(since_s)
            p = self.executor.progress(spec.id)
            where = f"adopt({spec.id!r})"
            if p.phase in (Phase.COMPLETED, Phase.FAILED):
                raise ValidationError(where, "a job that has not finished", p.phase.value, hint="use adopt_finished")
            if (p.gpus, p.batch) != (gpus, batch):
                raise ValidationError(where, f"the executor's allocation {(p.gpus, p.batch)}", (gpus, batch))
            if since > now:
                raise ValidationError(f"{where}.since_s", f"a time <= now ({now})", since)
            running = gpus > 0
            tr = self._track(spec, history, "running" if running else "queued", since)
            if running:
                tr.alloc = tr.last_alloc = (gpus, batch)
                tr.last_change_s = since
                if tr.first_start_s is None:
                    tr.first_start_s = since
                if tr.starts == 0:
                    tr.starts = 1
                    tr.restart_s += float(spec.restart_cost_s or 0.0)
            self._active[spec.id] = None
            return self.reschedule("adopt") if reschedule else None

    def adopt_finished(
        self,
        spec: JobSpec,
        status: str = "completed",
        *,
        completion_s: float | None = None,
        samples_done: float | None = None,
        history: JobHistory = JobHistory(),
    ) -> None:
        """Record a job that completed or failed before this autoscaler (records only, never active).

        Parameters
        ----------
        spec
            The job (a new id for this autoscaler).
        status
            ``"completed"`` or ``"failed"``.
        completion_s
            When it completed (required for a completed job, ignored otherwise).
        samples_done
            Samples processed; default all of them for a completed job, 0 otherwise.
        history
            What happened to it; ``last_alloc`` is reported as its final allocation.
        """
        where = f"adopt_finished({spec.id!r})"
        if status not in ("completed", "failed"):
            raise ValidationError(f"{where}.status", "'completed' or 'failed'", status)
        if status == "completed" and completion_s is None:
            raise ValidationError(f"{where}.completion_s", "a time for a completed job", None)
        with self._lock:
            spec = self._prepare(spec)
            tr = self._track(spec, history, status, self.executor.now_s())
            tr.completion_s = float(completion_s) if status == "completed" else None  # type: ignore[arg-type]
            if samples_done is None:
                samples_done = spec.total_samples if status == "completed" else 0.0
            tr.samples_done = float(samples_done)
