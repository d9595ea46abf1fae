"""One sweep cell: its workload, its simulation (:func:`~elasticopt.scheduling.simulate`) and its result row.

A cell's result is a plain dict (JSON): its parameters, every
:class:`~elasticopt.scheduling.metrics.Metrics` field, figures measured at the
last arrival (what "completed by the horizon" means in the paper comparison),
the batch the jobs ended on, and the JCT of every completed job (for the CDF
plots; kept in the cell file, not in the table).  Everything but the wall-time
columns (:data:`TIMING_COLUMNS`) is the same on every run of the same cell.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from elasticopt._io import atomic_write_text
from elasticopt.errors import InstanceError

__all__ = ["CELL_FORMAT", "TIMING_COLUMNS", "run_cell", "write_cell", "read_cell", "cell_path", "cell_workload"]

CELL_FORMAT = "elasticopt-sweep-cell/1"
#: Columns that are wall-clock measurements: they differ between runs of the same cell.
TIMING_COLUMNS: tuple[str, ...] = ("decision_s_mean", "decision_s_p95", "decision_s_max", "solver_s_mean", "wall_s")


def _cluster(params: Mapping[str, Any]):
    """(gpus, Cluster or None) of a cell."""
    c = params["cluster"]
    if isinstance(c, int) or (isinstance(c, str) and c.strip().isdigit()):
        return int(c), None
    from elasticopt.scheduling.hetero import cluster_preset

    cluster = cluster_preset(c)
    return cluster.gpus, cluster


def n_jobs(params: Mapping[str, Any]) -> int:
    """The cell's number of generated jobs: ``jobs``, or max(jobs_min, jobs_per_gpu x GPUs) when it is 0."""
    if params["jobs"] > 0:
        return int(params["jobs"])
    gpus, _ = _cluster(params)
    return max(int(params["jobs_min"]), int(params["jobs_per_gpu"] * gpus))


@functools.lru_cache(maxsize=4)
def _file_workload(path: str) -> tuple:
    from elasticopt.scheduling.traces import load_any

    return tuple(load_any(path))


@functools.lru_cache(maxsize=8)
def _generated(items: tuple) -> tuple:
    p = dict(items)
    gpus, cluster = _cluster(p)
    n = n_jobs(p)
    clip = p["duration_max_s"] or None
    if cluster is not None:
        from elasticopt.scheduling.hetero import generate_hetero_workload

        return tuple(generate_hetero_workload(n, cluster, p["load"], seed=p["seed"], duration_max_s=clip,
                                              duration_scale=p["duration_scale"]))
    from elasticopt.scheduling.workload_generator import generate_workload

    nets = [x.strip() for x in p["networks"].split(",") if x.strip()] or None
    return tuple(generate_workload(n, gpus, p["load"], seed=p["seed"], networks=nets, duration_max_s=clip,
                                   duration_scale=p["duration_scale"], submitted_batch=p["submitted_batch"]))


_WORKLOAD_KEYS = ("seed", "load", "cluster", "jobs", "jobs_per_gpu", "jobs_min", "submitted_batch", "duration_max_s",
                  "duration_scale", "networks")


def cell_workload(params: Mapping[str, Any]) -> Sequence:
    """The jobs of a cell: its ``workload`` file or trace, or a workload generated from its parameters.

    Cells that differ only in policy, solver, restart cost or accounting share
    one workload (cached per process).
    """
    if params["workload"]:
        return _file_workload(params["workload"])
    return _generated(tuple((k, params[k]) for k in _WORKLOAD_KEYS))


def _config(params: Mapping[str, Any]):
    from elasticopt.scheduling import SimulationConfig
    from elasticopt.scheduling.hysteresis import DEFAULT_HYSTERESIS

    rule = DEFAULT_HYSTERESIS
    if params["cooldown_restarts"] >= 0:
        rule = dataclasses.replace(rule, min_interval_restarts=params["cooldown_restarts"])
    if params["min_gain"] >= 0:
        rule = dataclasses.replace(rule, min_gain=params["min_gain"])
    gpus, cluster = _cluster(params)
    return SimulationConfig(gpus=gpus, gpus_per_node=params["gpus_per_node"], restart_cost_s=params["restart_cost_s"],
                            horizon_s=params["horizon_s"] or None, tick_s=params["tick_s"] or None,
                            seed=params["seed"], throughput_noise=params["noise"], payback=params["payback"],
                            hysteresis=rule, progress=params["progress"], cluster=cluster,
                            node_aware=params["node_aware"],
                            admission_deadline_s=None if params["admission_deadline_s"] < 0
                            else params["admission_deadline_s"],
                            queue_limit=params["queue_limit"] or None)


def policy_options(params: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword options of :func:`~elasticopt.scheduling.get_policy` for a cell (solver, its options, λ)."""
    from elasticopt.solvers.options import parse_solver_arg

    solver, solver_options = parse_solver_arg(params["solver"])
    options: dict[str, Any] = {"solver": solver}
    if solver_options:
        options["solver_options"] = solver_options
    if params["rescale_penalty"] >= 0:
        options["rescale_penalty"] = params["rescale_penalty"]
    return options


def _until(timeline, horizon: float, gpus: int) -> float:
    """Time-average fraction of GPUs held over [0, horizon]."""
    area, prev_t, prev_u = 0.0, 0.0, 0
    for p in timeline:
        t = min(p.time_s, horizon)
        area += prev_u * (t - prev_t)
        prev_t, prev_u = t, p.gpus_in_use
    area += prev_u * max(horizon - prev_t, 0.0)
    return area / (horizon * gpus) if horizon > 0 and gpus else 0.0


def result_row(params: Mapping[str, Any], jobs: Sequence, res) -> tuple[dict[str, Any], list[float]]:
    """The table row of one simulation result, and the JCTs of its completed jobs (ascending)."""
    m = res.metrics
    last = max(j.arrival_s for j in jobs)
    by_h = [r.completion_s - r.arrival_s for r in res.records if r.completion_s is not None and r.completion_s <= last]
    by_id = {j.id: j for j in jobs}
    over_min, eff = [], []
    for r in res.records:
        spec = by_id[r.job_id]
        if r.final_batch:
            over_min.append(r.final_batch / spec.batch_min)
            e = spec.statistical_efficiency
            eff.append(float(e(r.final_batch)) if e is not None else 1.0)
    row = {**params, "jobs_in_workload": len(jobs), **m.to_dict(),
           "last_arrival_s": float(last), "completed_by_last_arrival": len(by_h),
           "jct_mean_by_last_arrival_s": statistics.fmean(by_h) if by_h else None,
           "utilisation_by_last_arrival": _until(res.timeline, last, res.config.gpus),
           "mean_final_batch_over_min": statistics.fmean(over_min) if over_min else None,
           "mean_efficiency_at_final_batch": statistics.fmean(eff) if eff else None,
           "wall_s": res.wall_s}  # fmt: skip
    jct = sorted(r.jct_s for r in res.records if r.jct_s is not None)
    return row, jct


def run_cell(params: Mapping[str, Any]) -> dict[str, Any]:
    """Simulate one cell; its result document (see :func:`write_cell`).

    Runs anywhere elasticopt is installed: in this process, a local worker
    process or a Ray worker (the parameters and the result are plain JSON).
    """
    from elasticopt.scheduling import simulate
    from elasticopt.sweep.spec import cell_key

    params = dict(params)
    jobs = cell_workload(params)
    res = simulate(list(jobs), params["policy"], _config(params), policy_options=policy_options(params))
    row, jct = result_row(params, jobs, res)
    # per completed job its JCT: the paired comparison's mean over the jobs both policies completed
    by_job = {r.job_id: r.jct_s for r in res.records if r.jct_s is not None}
    return {"format": CELL_FORMAT, "key": cell_key(params), "params": params, "row": row, "jct_s": jct,
            "jct_by_job_s": by_job, "host": os.uname().nodename, "pid": os.getpid()}


def cell_path(out_dir: str | os.PathLike[str], key: str) -> Path:
    """Where a cell's result lives: ``OUT/cells/<key>.json``."""
    return Path(out_dir) / "cells" / f"{key}.json"


def write_cell(out_dir: str | os.PathLike[str], doc: Mapping[str, Any]) -> Path:
    """Write a cell's result atomically (temp file + rename): a killed sweep never leaves half a cell."""
    return atomic_write_text(cell_path(out_dir, doc["key"]), json.dumps(doc) + "\n")


def read_cell(out_dir: str | os.PathLike[str], key: str, params: Mapping[str, Any]) -> dict[str, Any] | None:
    """A finished cell's result, or None if it has not run (or its file belongs to other parameters).

    Raises
    ------
    InstanceError
        For a cell file that is not a cell result (not written by a sweep).
    """
    path = cell_path(out_dir, key)
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise InstanceError(str(path), "(file)", f"a {CELL_FORMAT} JSON document", "unreadable JSON",
                            hint=f"{exc}; delete the file to rerun the cell") from None
    if not isinstance(doc, dict) or doc.get("format") != CELL_FORMAT:
        raise InstanceError(str(path), "format", repr(CELL_FORMAT), doc.get("format") if isinstance(doc, dict) else doc,
                            hint="delete the file to rerun the cell")
    if json.dumps(doc.get("params"), sort_keys=True) != json.dumps(dict(params), sort_keys=True):
        return None
    return doc
