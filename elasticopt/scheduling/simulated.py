"""The simulated executor: a virtual clock and jobs progressing at their profile's rate.

A job on (k, b) processes ``T(k, b)`` samples per second, where ``T`` is the
job's *true* throughput model.  With ``progress="goodput"`` its progress is
counted in effective samples, ``T(k, b) * E(b)`` per second (E its
statistical efficiency, ``JobSpec.statistical_efficiency``), so the job is done
after ``total_samples`` *effective* samples and a huge batch pays for its
lower efficiency.  The model is by default the one the scheduler believes
(``JobSpec.throughput``), optionally another one (model error, noise).  Every
start and rescale costs ``JobSpec.restart_cost_s`` seconds without progress
(phase RESTARTING) while the job holds its new GPUs.  Progress is computed
lazily from the last change, so advancing the clock is O(1).

Given a cluster (node pools), the executor runs each job on exactly the GPUs
it is given (``placement=(type, ((node, GPU indices), ...))``, from the
autoscaler) at the rate of its model for that GPU type; with ``node_aware``, a
node-aware profile's rate on the number of nodes the job spans (packed or
spread).  It refuses a GPU that does not exist or is held by another job: no
GPU is ever used twice, no pool ever holds more jobs' GPUs than it has.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from elasticopt.errors import ValidationError
from elasticopt.models import Cluster
from elasticopt.scheduling.actions import Placed
from elasticopt.scheduling.executor import Executor, JobProgress, Phase
from elasticopt.scheduling.jobspec import JobSpec

__all__ = ["SimulatedExecutor", "ScaledThroughput", "Segment"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class ScaledThroughput:
    """A throughput model whose every rate is ``factor`` times the base model's."""

    base: object
    factor: float

    @property
    def name(self) -> str:
        return self.base.name  # type: ignore[attr-defined]

    def samples_per_s(self, gpus: int, batch: int) -> float | None:
        t = self.base.samples_per_s(gpus, batch)  # type: ignore[attr-defined]
        return None if t is None else t * self.factor

    def candidates(self, gpus_max: int, batch_min: int, batch_max: int) -> list[tuple[int, int]]:
        return self.base.candidates(gpus_max, batch_min, batch_max)  # type: ignore[attr-defined]

    def __getattr__(self, attr: str):
        if attr == "samples_per_s_on_nodes":  # only where the base model has it
            on_nodes = getattr(self.base, attr)

            def scaled(gpus: int, batch: int, nodes: int) -> float | None:
                t = on_nodes(gpus, batch, nodes)
                return None if t is None else t * self.factor

            return scaled
        raise AttributeError(attr)


@dataclass(frozen=True)
class Segment:
    """A stretch of time a job held (gpus, batch); progress starts at ``run_from_s``.

    ``samples_per_s`` and ``samples`` are in the executor's progress unit
    (effective samples under goodput accounting); ``placement`` the GPUs it
    held, where the executor places jobs.
    """

    job_id: str
    start_s: float
    end_s: float
    gpus: int
    batch: int
    samples_per_s: float
    run_from_s: float
    samples: float
    placement: Placed | None = None


@dataclass
class _SimJob:
    spec: JobSpec
    model: object
    phase: Phase = Phase.QUEUED
    gpus: int = 0
    batch: int = 0
    rate: float = 0.0
    anchor_s: float = 0.0
    anchor_done: float = 0.0
    resume_s: float = 0.0
    since_s: float = 0.0
    generation: int = 0
    segments: list[Segment] = field(default_factory=list)
    placement: Placed | None = None
    models: dict = field(default_factory=dict)  # GPU type -> true model


class SimulatedExecutor(Executor):
    """Virtual-time executor (see module docstring).

    Parameters
    ----------
    true_throughput
        Maps a job spec to the model it really runs at; default: the spec's
        own ``throughput`` (the scheduler's belief is exact).
    record_segments
        Keep every (gpus, batch) stretch of every job (:meth:`segments`), for
        checks and plots.
    progress
        ``"samples"`` (default) or ``"goodput"`` (module docstring).
    cluster
        The node pools: jobs then run on the GPUs they are given (``placement``),
        checked GPU by GPU; None: GPU counts only.
    node_aware
        Rate of a node-aware profile on the nodes a job spans (module docstring).
    """

    places_gpus = True

    def __init__(
        self,
        true_throughput: Callable[[JobSpec], object] | None = None,
        record_segments: bool = True,
        progress: str = "samples",
        cluster: Cluster | None = None,
        node_aware: bool = False,
    ):
        if progress not in ("samples", "goodput"):
            raise ValidationError("progress", "'samples' or 'goodput'", progress)
        self.progress_unit = progress
        self.cluster = cluster
        self.node_aware = node_aware
        self.places_gpus = cluster is not None
        # (GPU type, node, GPU index) -> the job holding it
        self._held: dict[tuple[str, int, int], str] = {}
        self._exists = set() if cluster is None else {
            (t, n, i) for t, pool in cluster.pools.items() for n, ix in enumerate(pool.free_gpus()) for i in ix  # type: ignore[union-attr]
        }
        self._now = 0.0
        self._jobs: dict[str, _SimJob] = {}
        self._changed: set[str] = set()
        self._true = true_throughput
        self.record_segments = record_segments

    # ---- clock --------------------------------------------------------
    def now_s(self) -> float:
        return self._now

    def set_time(self, time_s: float) -> None:
        """Advance the virtual clock (never backwards)."""
        if time_s < self._now:
            raise ValidationError("SimulatedExecutor.set_time", f"a time >= {self._now}", time_s)
        self._now = float(time_s)

    # ---- executor interface -------------------------------------------
    def start(self, job: JobSpec, gpus: int, batch: int, placement: Placed | None = None) -> bool:
        sj = self._jobs.get(job.id)
        if sj is None:
            model = self._true(job) if self._true is not None else job.throughput
            sj = self._jobs[job.id] = _SimJob(spec=job, model=model, anchor_s=self._now)
        if sj.phase in (Phase.COMPLETED, Phase.FAILED):
            log.info("start of %s ignored: job is %s", job.id, sj.phase.value)
            return False
        if sj.gpus > 0:
            log.info("start of %s ignored: already holds %d GPUs", job.id, sj.gpus)
            return False
        self._assign(sj, gpus, batch, placement)
        return True

    def rescale(self, job_id: str, gpus: int, batch: int, placement: Placed | None = None) -> bool:
        sj = self._jobs.get(job_id)
        if sj is None or sj.gpus == 0 or sj.phase in (Phase.COMPLETED, Phase.FAILED):
            log.info("rescale of %s ignored: not running", job_id)
            return False
        self._assign(sj, gpus, batch, placement)
        return True

    def placement(self, job_id: str) -> Placed | None:
        """Where the job's GPUs are (None while it holds none, or without a cluster)."""
        sj = self._jobs.get(job_id)
        return None if sj is None else sj.placement

    def held(self) -> dict[tuple[str, int, int], str]:
        """Every GPU held now, ``(type, node, index) -> job id``."""
        return dict(self._held)

    def stop(self, job_id: str) -> bool:
        sj = self._jobs.get(job_id)
        if sj is None or sj.gpus == 0 or sj.phase in (Phase.COMPLETED, Phase.FAILED):
            log.info("stop of %s ignored: not running", job_id)
            return False
        self._close(sj)
        self._release(sj)
        sj.gpus = sj.batch = 0
        sj.rate = 0.0
        sj.phase = Phase.QUEUED
        sj.generation += 1
        self._changed.add(job_id)
        return True

    def progress(self, job_id: str) -> JobProgress:
        sj = self._jobs.get(job_id)
        if sj is None:
            return JobProgress(job_id, Phase.QUEUED, 0, 0, 0.0, None)
        phase = sj.phase
        if phase in (Phase.RESTARTING, Phase.RUNNING):
            phase = Phase.RESTARTING if self._now < sj.resume_s else Phase.RUNNING
        return JobProgress(
            job_id=job_id,
            phase=phase,
            gpus=sj.gpus,
            batch=sj.batch,
            samples_done=self._done_at(sj, self._now),
            samples_per_s=sj.rate if sj.gpus else None,
            generation=sj.generation,
        )

    # ---- simulator hooks ----------------------------------------------
    def generation(self, job_id: str) -> int:
        """Incremented at every start, rescale, stop and completion of the job."""
        return self._jobs[job_id].generation

    def pop_changed(self) -> set[str]:
        """Jobs whose allocation changed since the last call."""
        out, self._changed = self._changed, set()
        return out

    def completion_time(self, job_id: str) -> float | None:
        """When the job will have processed all its samples at its current rate (None if queued)."""
        sj = self._jobs.get(job_id)
        if sj is None or sj.gpus == 0 or sj.phase in (Phase.COMPLETED, Phase.FAILED):
            return None
        begin = max(sj.anchor_s, sj.resume_s)
        return begin + max(sj.spec.total_samples - sj.anchor_done, 0.0) / sj.rate

    def complete(self, job_id: str) -> None:
        """Mark the job done now (it processed exactly its samples) and tell the listener."""
        sj = self._jobs[job_id]
        self._close(sj)
        self._release(sj)
        sj.anchor_done = float(sj.spec.total_samples)
        sj.gpus = sj.batch = 0
        sj.rate = 0.0
        sj.phase = Phase.COMPLETED
        sj.generation += 1
        self._changed.add(job_id)
        if self.listener is not None:
            self.listener.on_completed(job_id, self._now)

    def segments(self, job_id: str | None = None) -> list[Segment]:
        """Recorded allocation stretches (of one job, or of all jobs by start time)."""
        if job_id is not None:
            return list(self._jobs[job_id].segments)
        return sorted((s for sj in self._jobs.values() for s in sj.segments), key=lambda s: (s.start_s, s.job_id))

    def gpus_in_use(self) -> int:
        """GPUs held by all jobs now."""
        return sum(sj.gpus for sj in self._jobs.values())

    # ---- internals ----------------------------------------------------
    def _done_at(self, sj: _SimJob, t: float) -> float:
        if sj.gpus == 0:
            return sj.anchor_done
        run = t - max(sj.anchor_s, sj.resume_s)
        done = sj.anchor_done + sj.rate * run if run > 0 else sj.anchor_done
        return min(done, float(sj.spec.total_samples))

    def _close(self, sj: _SimJob) -> None:
        """Bank progress up to now and end the current segment."""
        done = self._done_at(sj, self._now)
        if sj.gpus > 0 and self.record_segments:
            sj.segments.append(
                Segment(sj.spec.id, sj.since_s, self._now, sj.gpus, sj.batch, sj.rate,
                        max(sj.anchor_s, sj.resume_s), done - sj.anchor_done, sj.placement)
            )
        sj.anchor_done = done
        sj.anchor_s = self._now

    def _release(self, sj: _SimJob) -> None:
        if sj.placement is not None:
            for g in _gpus(sj.placement):
                del self._held[g]
        sj.placement = None

    def _model(self, sj: _SimJob, gpu_type: str | None) -> object:
        """The job's true model on ``gpu_type`` (its one model where it has no per-type models)."""
        if gpu_type is None or sj.spec.throughputs is None:
            return sj.model
        m = sj.models.get(gpu_type)
        if m is None:
            base = sj.spec.model_for(gpu_type)
            if base is None:
                raise ValidationError(f"job {sj.spec.id!r}", "a GPU type it may use", gpu_type)
            m = sj.models[gpu_type] = self._true(dataclasses.replace(sj.spec, throughput=base)) if self._true else base
        return m

    def _check_gpus(self, sj: _SimJob, gpus: int, placement: Placed | None) -> None:
        if self.cluster is None:
            if placement is not None:
                raise ValidationError(f"job {sj.spec.id!r}.placement", "None (this executor has no cluster)", placement)
            return
        if placement is None:
            raise ValidationError(f"job {sj.spec.id!r}.placement", "the GPUs to run on", None)
        mine = _gpus(placement)
        if len(set(mine)) != gpus or len(mine) != gpus:
            raise ValidationError(f"job {sj.spec.id!r}.placement", f"{gpus} distinct GPUs", placement)
        for g in mine:
            if g not in self._exists:
                raise ValidationError(f"job {sj.spec.id!r}.placement", "GPUs of the cluster's pools", g)
            other = self._held.get(g)
            if other is not None and other != sj.spec.id:
                raise ValidationError(f"job {sj.spec.id!r}.placement", f"free GPUs ({g} is held by {other!r})", g)

    def _assign(self, sj: _SimJob, gpus: int, batch: int, placement: Placed | None = None) -> None:
        self._check_gpus(sj, gpus, placement)
        model = self._model(sj, None if placement is None else placement[0])
        on_nodes = getattr(model, "samples_per_s_on_nodes", None) if self.node_aware and placement else None
        if on_nodes is not None and gpus > 1:
            rate = on_nodes(gpus, batch, len(placement[1]))  # type: ignore[index]
        else:
            rate = model.samples_per_s(gpus, batch)  # type: ignore[attr-defined]
        if rate is None or not (math.isfinite(rate) and rate > 0):
            raise ValidationError(
                f"job {sj.spec.id!r}", "an option its true throughput model knows", (gpus, batch)
            )
        self._close(sj)
        self._release(sj)
        if placement is not None:
            sj.placement = placement
            for g in _gpus(placement):
                self._held[g] = sj.spec.id
        measured = float(rate)
        if self.progress_unit == "goodput":
            eff = sj.spec.statistical_efficiency
            rate = rate if eff is None else rate * float(eff(batch))
        sj.gpus, sj.batch, sj.rate = gpus, batch, float(rate)
        sj.resume_s = self._now + float(sj.spec.restart_cost_s or 0.0)
        sj.since_s = self._now
        sj.phase = Phase.RESTARTING if sj.resume_s > self._now else Phase.RUNNING
        sj.generation += 1
        self._changed.add(sj.spec.id)
        if self.listener is not None:
            self.listener.on_throughput(sj.spec.id, gpus, batch, measured)


def _gpus(placement: Placed) -> list[tuple[str, int, int]]:
    t, nodes = placement
    return [(t, n, i) for n, ix in nodes for i in ix]
