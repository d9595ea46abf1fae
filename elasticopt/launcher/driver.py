"""The launch loop: jobs arrive, the autoscaler decides, the launcher runs them.

:func:`launch` is what ``elasticopt launch`` runs (the CLI only adds the live
display).  It writes the same files as the simulator (``jobs.csv``,
``timeline.csv``, ``summary.json``; see :mod:`elasticopt.scheduling.records`)
plus ``workload.json`` (the jobs' scheduling part, replayable with
``elasticopt simulate``), so a real run and its simulation compare side by
side.  Restarted on the same ``out_dir`` after being killed, it finds its jobs
again (:meth:`GenerationExecutor.recover`): finished jobs stay finished,
running generations are adopted, the others resume from their checkpoints,
and the autoscaler takes them all over with their history
(:func:`adopt_recovered`), so the records cover the whole run.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elasticopt.launcher.devices import DevicePool
from elasticopt.errors import ValidationError
from elasticopt.launcher.generations import GenerationExecutor
from elasticopt.launcher.observed import ObservedThroughput
from elasticopt.launcher.recovery import job_history, open_since_s
from elasticopt.launcher.torchrun import TorchrunExecutor
from elasticopt.models import Cluster
from elasticopt.scheduling.autoscaler import Autoscaler
from elasticopt.scheduling.jobspec import JobSpec
from elasticopt.scheduling.metrics import compute_metrics
from elasticopt.scheduling.policies import get_policy
from elasticopt.scheduling.records import JobRecord, write_jobs_csv, write_summary_json, write_timeline_csv
from elasticopt.scheduling.workload import save_workload
from elasticopt.solvers import get_backend

__all__ = ["LaunchConfig", "LaunchResult", "launch", "job_rows", "adopt_recovered", "EXECUTORS", "DEFAULT_RESTART_COST_S",
           "make_executor"]

log = logging.getLogger(__name__)


def _torchrun(out_dir: Path, pool: DevicePool, **kwargs: Any) -> GenerationExecutor:
    return TorchrunExecutor(out_dir, pool, **kwargs)


def _ray(out_dir: Path, pool: DevicePool, **kwargs: Any) -> GenerationExecutor:
    from elasticopt.launcher.ray_backend import RayExecutor  # noqa: PLC0415 - ray is an optional extra

    return RayExecutor(out_dir, pool, **kwargs)


EXECUTORS: dict[str, Callable[..., GenerationExecutor]] = {"torchrun": _torchrun, "ray": _ray}
DEFAULT_RESTART_COST_S = {"torchrun": 10.0, "ray": 1.0}
"""What the autoscaler charges a start or rescale by default: about what one costs with each backend
(torchrun: Python and torch start-up, 7-12 s measured on CPU; ray: warm workers, 0.1-0.5 s)."""
"""Launcher backends by name: ``torchrun`` (new processes on this machine) and ``ray`` (warm actors on a Ray cluster)."""


def make_executor(backend: str, out_dir: str | os.PathLike[str], pool: DevicePool, **kwargs: Any) -> GenerationExecutor:
    """The executor of launcher backend ``backend`` (a key of :data:`EXECUTORS`) on ``pool``."""
    if backend not in EXECUTORS:
        raise ValidationError("backend", "one of " + ", ".join(EXECUTORS), backend)
    return EXECUTORS[backend](Path(out_dir), pool, **kwargs)


@dataclass(frozen=True)
class LaunchConfig:
    """Settings of one launch."""

    policy: str = "elastic"
    solver: str = "dp"
    solver_options: Mapping[str, Any] = field(default_factory=dict)  # backend options, e.g. {"fixing": False}
    backend: str = "torchrun"  # what runs a generation: a key of EXECUTORS
    restart_cost_s: float | None = None  # None: DEFAULT_RESTART_COST_S of the backend
    tick_s: float | None = 30.0
    poll_s: float = 0.05  # the loop's period: a generation's end is seen within it
    write_every_s: float = 5.0
    stop_timeout_s: float = 120.0
    max_restarts: int = 3
    payback: bool = True

    def __post_init__(self) -> None:
        def seconds(name: str, value: object, *, none: bool, zero: bool) -> None:
            if none and value is None:
                return
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                    (0 <= value if zero else 0 < value) and value < math.inf):
                raise ValidationError(name, f"a finite number of seconds {'>= 0' if zero else '> 0'}"
                                      + (" or None" if none else ""), value)

        seconds("restart_cost_s", self.restart_cost_s, none=True, zero=True)
        seconds("tick_s", self.tick_s, none=True, zero=False)
        seconds("poll_s", self.poll_s, none=False, zero=False)
        seconds("write_every_s", self.write_every_s, none=False, zero=False)
        seconds("stop_timeout_s", self.stop_timeout_s, none=False, zero=True)
        if isinstance(self.max_restarts, bool) or not isinstance(self.max_restarts, int) or self.max_restarts < 0:
            raise ValidationError("max_restarts", "an integer >= 0 (crashes retried from a checkpoint)",
                                  self.max_restarts)


@dataclass(frozen=True)
class LaunchResult:
    """What a launch produced."""

    records: tuple[JobRecord, ...]
    summary: dict[str, Any]
    out_dir: Path
    interrupted: bool = False


def job_rows(executor: GenerationExecutor, specs: Sequence[JobSpec]) -> list[dict[str, Any]]:
    """One row per job for a live display: id, phase, generation, workers, batch, samples/s, progress."""
    rows = []
    for spec in specs:
        job = executor.jobs.get(spec.id)
        if job is None:
            rows.append({"id": spec.id, "phase": "waiting", "generation": 0, "gpus": 0, "batch": 0,
                         "samples_per_s": None, "progress": 0.0, "restarts": 0, "lost": 0, "log": ""})  # fmt: skip
            continue
        rows.append({
            "id": spec.id, "phase": job.phase.value, "generation": job.generation, "gpus": job.gpus,
            "batch": job.batch, "samples_per_s": job.account.samples_per_s,
            "progress": min(1.0, job.account.samples_done / spec.total_samples), "restarts": job.account.restarts,
            "lost": job.account.lost_samples, "log": job.log_path,
        })  # fmt: skip
    return rows


def adopt_recovered(scaler: Autoscaler, executor: GenerationExecutor, specs: Sequence[JobSpec]) -> list[JobSpec]:
    """Hand the jobs an earlier launcher ran (after :meth:`GenerationExecutor.recover`) to the autoscaler.

    Finished jobs are recorded (:meth:`Autoscaler.adopt_finished`), the others
    adopted on the allocation they hold (:meth:`Autoscaler.adopt`: a running
    generation is not restarted, a job queued at a checkpoint waits for a
    decision), each with the history the journal keeps
    (:func:`~elasticopt.launcher.recovery.job_history`).

    Returns
    -------
    list of JobSpec
        The jobs no earlier launcher started, still to be submitted, in the given order.
    """
    state = executor.journal.state
    rest = []
    for spec in specs:
        job = executor.jobs.get(spec.id)
        if job is None:
            rest.append(spec)
            continue
        history = job_history(state, spec.id)
        if job.finished:
            scaler.adopt_finished(spec, job.phase.value, completion_s=job.account.end_s,
                                  samples_done=job.account.samples_done, history=history)  # fmt: skip
        else:
            p = executor.progress(spec.id)
            since = open_since_s(state, spec.id) if job.handle is not None else None
            scaler.adopt(spec, p.gpus, p.batch, since_s=since, history=history)
    return rest


def _write(out: Path, scaler: Autoscaler, executor: GenerationExecutor, specs: Sequence[JobSpec],
           config: LaunchConfig, pool: DevicePool) -> tuple[list[JobRecord], dict[str, Any]]:
    by_id = {r.job_id: r for r in scaler.records()}
    records = [by_id[s.id] for s in specs if s.id in by_id]  # jobs not arrived yet have none
    end_s = executor.now_s()
    metrics = compute_metrics(records, scaler.timeline, scaler.decisions, pool.size, end_s)
    per_job = {}
    for spec in specs:
        job = executor.jobs.get(spec.id)
        if job is None:
            continue
        per_job[spec.id] = {
            "phase": job.phase.value, "generations": job.generation, "restarts": job.account.restarts,
            "lost_samples": job.account.lost_samples, "rescale_downtime_s": job.account.downtimes_s,
            "message": job.message, "log": job.log_path,
            "measured_samples_per_s": [[k, b, t] for (k, b), t in sorted(
                getattr(job.spec.throughput, "observed", {}).items())],
        }  # fmt: skip
    downs = [d for j in per_job.values() for d in j["rescale_downtime_s"]]
    summary = {
        "mode": "launcher",
        "policy": config.policy,
        "solver": config.solver,
        "config": dataclasses.asdict(config),
        "devices": {"kind": pool.kind, "ids": list(pool.ids)},
        "metrics": metrics.to_dict(),
        "rescale_downtime_median_s": statistics.median(downs) if downs else None,
        "jobs": per_job,
    }
    write_jobs_csv(out / "jobs.csv", records)
    write_timeline_csv(out / "timeline.csv", scaler.timeline)
    write_summary_json(out / "summary.json", summary)
    return records, summary


def launch(
    specs: Sequence[JobSpec],
    out_dir: str | os.PathLike[str],
    pool: DevicePool,
    config: LaunchConfig = LaunchConfig(),
    *,
    on_update: Callable[[GenerationExecutor, Autoscaler], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> LaunchResult:
    """Run ``specs`` on ``pool`` under the autoscaler until every job completed or failed.

    Parameters
    ----------
    specs
        The jobs (payload: script, args, mode...; see :mod:`elasticopt.launcher.jobsfile`).
    out_dir
        Run directory (journal, job directories, records).  Reusing the
        directory of a killed launcher resumes its run.
    pool
        Devices to use.
    config
        Policy, solver, restart cost, tick period and the launcher's settings.
    on_update
        Called after every poll (live display).
    should_stop
        Polled; when it returns True every job is stopped at a checkpoint and
        the launch returns with ``interrupted=True`` (a later launch resumes).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if config.restart_cost_s is None:
        config = dataclasses.replace(config, restart_cost_s=DEFAULT_RESTART_COST_S.get(config.backend, 10.0))
    specs = [dataclasses.replace(s, throughput=s.throughput if isinstance(s.throughput, ObservedThroughput)
                                 else ObservedThroughput(s.throughput)) for s in specs]  # fmt: skip
    save_workload([dataclasses.replace(s, throughput=s.throughput.prior, payload={}) for s in specs],
                  out / "workload.json", meta={"from": "elasticopt launch"})  # fmt: skip
    executor = make_executor(config.backend, out, pool, stop_timeout_s=config.stop_timeout_s,
                             max_restarts=config.max_restarts)  # fmt: skip
    get_backend(config.solver).check_options(dict(config.solver_options))  # before any job starts
    extra = {"solver_options": dict(config.solver_options)} if config.solver_options else {}
    policy = get_policy(config.policy, solver=config.solver, payback=config.payback, **extra)
    cluster = Cluster(pool.size, gpus_per_node=pool.gpus_per_node)
    scaler = Autoscaler(executor, cluster, policy, restart_cost_s=config.restart_cost_s, payback=config.payback)
    by_id = {s.id: s for s in specs}
    executor.recover(by_id)
    # jobs an earlier launcher ran are adopted, not submitted again
    pending = adopt_recovered(scaler, executor, sorted(specs, key=lambda s: s.arrival_s))
    decide = bool(scaler.active_ids)  # adopted jobs: one decision, with the first arrivals if any
    interrupted = False
    next_tick = executor.now_s() + config.tick_s if config.tick_s else None
    next_write = 0.0
    try:
        while True:
            now = executor.now_s()
            arrived = [s for s in pending if s.arrival_s <= now]
            if arrived:
                pending = pending[len(arrived):]
                scaler.submit_many(arrived)
            elif decide:
                scaler.reschedule("recovered")
            decide = False
            executor.poll()
            if next_tick is not None and now >= next_tick and scaler.active_ids:
                scaler.tick()
                next_tick = now + config.tick_s
            if on_update is not None:
                on_update(executor, scaler)
            if now >= next_write:
                _write(out, scaler, executor, specs, config, pool)
                next_write = now + config.write_every_s
            if not pending and not scaler.active_ids:
                break
            if should_stop is not None and should_stop():
                interrupted = True
                break
            time.sleep(config.poll_s)
    except KeyboardInterrupt:
        interrupted = True
    if interrupted:
        try:
            executor.shutdown(timeout_s=config.stop_timeout_s)
        except KeyboardInterrupt:
            executor.shutdown(timeout_s=0, kill=True)
    else:
        executor.backend.close()  # every job ended: the ray backend's warm workers go
    records, summary = _write(out, scaler, executor, specs, config, pool)
    return LaunchResult(tuple(records), summary, out, interrupted)
