"""Whole public traces and other schedulers' workload files, read as job specs.

- **Philly** (Microsoft's GPU cluster, 2017; Jeon et al., ATC'19; the copy in
  Pollux's OSDI'21 artifact, ``simulator/traces/philly.csv``, columns
  ``timestamp,duration,num_gpus,gpu_time,cluster``): :func:`read_philly`
  replays *every* job with its real arrival time (seconds after the trace's
  first submission), its GPU count and its duration.  The trace names no
  network, so each job draws one of the ``t4/*`` profiles and a submitted
  batch feasible on its GPUs (seeded); its work is its duration at that
  (k, b).  ``"philly"`` names ``$ELASTICOPT_DATA/traces/philly.csv``.
- **Pollux / AdaptDL and Sia** workload CSVs (``name,time,application,num_replicas,batch_size``;
  Sia's ``sia-simulator/workloads/*`` use Pollux's columns):
  :func:`~elasticopt.scheduling.pollux.import_pollux`.
- **Gavel** trace files (``scheduler/traces/**/*.trace``, tab-separated):
  :func:`read_gavel_trace`, both of Gavel's layouts.
- Anything else: an elasticopt workload file (:func:`~elasticopt.scheduling.workload.load_workload`).

:func:`load_any` picks the reader from the name, the suffix and the header.
Every error names the file, the line or row, what was expected and what was found.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import numpy as np

from elasticopt.errors import InstanceError
from elasticopt.models.jsontext import read_csv, read_text
from elasticopt.models.rules import fits
from elasticopt.scheduling.jobspec import JobSpec

__all__ = ["TRACE_NAMES", "PHILLY_GPUS", "trace_path", "read_philly", "read_gavel_trace", "load_any",
           "is_philly_csv"]

#: Public traces named instead of a path (files under ``$ELASTICOPT_DATA/traces``).
TRACE_NAMES = ("philly",)

#: The Philly-sized cluster of a whole-trace replay: 156 nodes of 8 GPUs.  Measured on
#: ``traces/philly.csv``: if every job ran at its submitted GPUs from its arrival for its
#: duration, at most 1,243 GPUs would be busy at once (median 626, mean 374 over the
#: trace's 108.9 days); 1,248 is the smallest whole number of 8-GPU nodes that holds that peak.
PHILLY_GPUS = 1248
PHILLY_GPUS_PER_NODE = 8

_PHILLY_COLUMNS = ("timestamp", "duration", "num_gpus")


def trace_path(name: str) -> Path:
    """The file of a named public trace (``philly``): ``$ELASTICOPT_DATA/traces/<name>.csv``."""
    root = os.environ.get("ELASTICOPT_DATA")
    if not root:
        raise InstanceError(name, "ELASTICOPT_DATA", "the folder of the public data (holding traces/philly.csv)",
                            None, hint="export ELASTICOPT_DATA=/path/to/data, or pass the CSV's path")
    path = Path(root) / "traces" / f"{name}.csv"
    if not path.is_file():
        raise InstanceError(str(path), "(file)", f"the {name} trace", "no such file",
                            hint="see the data README for where the trace comes from")
    return path


def _header(path: Path) -> list[str]:
    rows = read_csv(path, "workload file")  # the loader discipline of every input file (models/jsontext)
    return [h.strip() for h in rows[0]] if rows else []


def is_philly_csv(path: str | os.PathLike[str]) -> bool:
    """Whether a CSV has the Philly trace's columns (``timestamp,duration,num_gpus``)."""
    p = Path(path)
    return p.suffix.lower() == ".csv" and set(_PHILLY_COLUMNS) <= set(_header(p))


def _options(model, k: int) -> list[int]:
    return sorted(b for kk, b in model.candidates(k, model.batch_min, model.batch_max)
                  if kk == k and fits(k, b, k, k, model.batch_min, model.batch_max, model.max_local))


def read_philly(
    path: str | os.PathLike[str] = "philly",
    *,
    seed: int = 0,
    networks: Sequence[str] | None = None,
    submitted_batch: str = "random",
    limit: int | None = None,
) -> list[JobSpec]:
    """Every job of a Philly-format trace, in arrival order, as job specs.

    Parameters
    ----------
    path
        The CSV, or ``"philly"`` for ``$ELASTICOPT_DATA/traces/philly.csv``.
    seed
        Seeds each job's network and submitted batch (same seed, same jobs).
    networks
        Profile names drawn uniformly (default: the ``t4/*`` set of the generator).
    submitted_batch
        ``random``, ``min`` or ``max`` among the batches feasible on the job's GPUs.
    limit
        Keep the first ``limit`` jobs by arrival (None: all).

    A job keeps its GPU count where its network has a feasible batch on that
    many GPUs; otherwise the largest power of two below that has (with the
    ``t4/*`` profiles, the trace's 17 jobs of 12, 24 and 128 GPUs run on 8, 16
    and 64; every other job keeps its count).  Its work is
    ``duration x T(k, b)``, so it takes its traced duration on its submitted (k, b).
    """
    from elasticopt.profiles import get_profile
    from elasticopt.scheduling.workload_generator import DEFAULT_NETWORKS

    if submitted_batch not in ("random", "min", "max"):
        raise InstanceError(str(path), "submitted_batch", "'random', 'min' or 'max'", submitted_batch)
    file = str(trace_path(str(path)) if str(path) in TRACE_NAMES else path)
    raw: list[tuple[float, float, int, int]] = []
    rows = read_csv(file, "Philly-format CSV")  # unreadable, non-UTF-8 or malformed: named by models/jsontext
    fields = [h.strip() for h in rows[0]] if rows else []
    if not set(_PHILLY_COLUMNS) <= set(fields):
        raise InstanceError(file, "header", "columns " + ",".join(_PHILLY_COLUMNS), fields)
    for i, rec in enumerate(rows[1:]):
        row = dict(zip(fields, rec + [None] * (len(fields) - len(rec))))  # a short record: None, as csv.DictReader
        where = f"row {i + 2}"
        try:
            ts = datetime.fromisoformat(row["timestamp"].strip()).timestamp()
        except (ValueError, AttributeError):
            raise InstanceError(file, f"{where}.timestamp", "a date and time like 2017-10-09 07:01:55",
                                row["timestamp"]) from None
        try:
            d, k = float(row["duration"]), float(row["num_gpus"])
        except (TypeError, ValueError):
            raise InstanceError(file, where, "numeric duration and num_gpus",
                                {"duration": row["duration"], "num_gpus": row["num_gpus"]}) from None
        if not 0 < d < float("inf") or not 1 <= k < 2**31 or k != int(k):
            raise InstanceError(file, where, "a finite duration > 0 (seconds) and num_gpus an integer >= 1",
                                {"duration": d, "num_gpus": k})
        raw.append((ts, d, int(k), i))
    if not raw:
        raise InstanceError(file, "rows", "at least one job", 0)
    raw.sort(key=lambda r: (r[0], r[3]))  # by submission time, then file order
    if limit is not None:
        raw = raw[:limit]
    t0 = raw[0][0]
    models = [get_profile(n) for n in (networks or DEFAULT_NETWORKS)]
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(models), len(raw))
    draws = rng.random(len(raw))
    cache: dict[tuple[int, int], tuple[int, list[int]]] = {}
    jobs = []
    for (ts, d, k, i), m, u in zip(raw, picks.tolist(), draws.tolist()):
        model = models[m]
        if (m, k) not in cache:
            kk = k
            opts = _options(model, kk)
            while not opts and kk > 1:
                kk = 1 << ((kk - 1).bit_length() - 1)  # the largest power of two below kk
                opts = _options(model, kk)
            if not opts:
                raise InstanceError(file, f"row {i + 2}", f"a feasible option of {model.name} on 1 GPU", None)
            cache[(m, k)] = (kk, opts)
        kk, opts = cache[(m, k)]
        b = opts[0] if submitted_batch == "min" else opts[-1] if submitted_batch == "max" else opts[int(u * len(opts))]
        jobs.append(JobSpec(id=f"philly-{i:05d}", throughput=model, batch_min=model.batch_min,
                            batch_max=model.batch_max, max_local=model.max_local,
                            total_samples=d * model.samples_per_s(kk, b), submitted_gpus=kk, submitted_batch=b,
                            arrival_s=round(ts - t0, 3)))
    return jobs


#: Gavel job-type model names -> elasticopt network (generate_hetero.NETWORK_PROFILES keys).
GAVEL_MODELS = {"ResNet-18": "resnet18-cifar", "ResNet-50": "resnet50", "Transformer": "transformer", "LM": "lm",
                "Recommendation": "recommendation"}


def read_gavel_trace(path: str | os.PathLike[str], *, gpu_type: str = "k80",
                     skipped: dict[str, int] | None = None) -> list[JobSpec]:
    """A Gavel trace file (tab-separated, one job a line) as job specs on GPUs of ``gpu_type``.

    Two layouts: Gavel's ``parse_trace`` one (10 fields: job type, command,
    working directory, num-steps argument, needs data dir, total steps, scale
    factor, priority weight, SLO, arrival time) and the ``traces/msr`` one (7:
    job type, command, num-steps argument, needs data dir, total steps, arrival
    time, scale factor).  The job type is ``"<Model> (batch size <m>)"`` with
    m the per-GPU batch; the job asks for ``scale factor`` GPUs at global batch
    m x scale factor, and its work is total steps x that batch.  The model's
    profile is its fitted one on ``gpu_type`` (``generate_hetero.NETWORK_PROFILES``;
    committed fits: ResNet-18, ResNet-50 and Transformer on K80, LM and
    Transformer on P100, LM on V100).

    A line of a model without a fit on ``gpu_type`` is an error, unless
    ``skipped`` is given: then it is left out and counted there by model (Gavel's
    own traces hold Recommendation, A3C and CycleGAN jobs, which have none).
    """
    import re

    from elasticopt.generate_hetero import NETWORK_PROFILES
    from elasticopt.profiles import get_profile, hetero_profile_names, profile_names
    from elasticopt.scheduling.pollux_trace import _nearest_feasible

    known = set(profile_names()) | set(hetero_profile_names())
    usable = {k: NETWORK_PROFILES[v][gpu_type] for k, v in GAVEL_MODELS.items()
              if NETWORK_PROFILES[v].get(gpu_type) in known}

    file = str(path)
    lines = read_text(path, "Gavel trace").splitlines()
    jobs = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        f = line.split("\t")
        where = f"line {n}"
        if len(f) == 10:
            job_type, steps, sf, arrival = f[0], f[5], f[6], f[9]
        elif len(f) == 7:
            job_type, steps, arrival, sf = f[0], f[4], f[5], f[6]
        else:
            raise InstanceError(file, where, "10 tab-separated fields (or 7, Gavel's traces/msr layout)", len(f))
        model_name = job_type.split(" (", 1)[0].strip()
        prof = usable.get(model_name)
        if prof is None and skipped is not None:
            skipped[model_name] = skipped.get(model_name, 0) + 1
            continue
        if prof is None:
            raise InstanceError(file, f"{where}.job_type", f"a model with a fitted profile on {gpu_type}: "
                                + (", ".join(usable) or "none"), model_name,
                                hint="A3C and CycleGAN have no profile here: remove their lines, read the "
                                     "trace for another gpu_type, or pass skipped={}")
        m = re.fullmatch(r"\s*(.+?) \(batch size (\d+)\)\s*", job_type)
        if m is None:
            raise InstanceError(file, f"{where}.job_type", "'<Model> (batch size <m>)'", job_type)
        try:
            total_steps, k, t = int(steps), int(sf), float(arrival)
        except ValueError:
            raise InstanceError(file, where, "integer total steps and scale factor, numeric arrival time",
                                {"total_steps": steps, "scale_factor": sf, "arrival": arrival.strip()}) from None
        if total_steps < 1 or k < 1 or t < 0:
            raise InstanceError(file, where, "total steps >= 1, scale factor >= 1, arrival >= 0",
                                {"total_steps": total_steps, "scale_factor": k, "arrival": t})
        model = get_profile(prof)
        b = int(m.group(2)) * k
        spec = JobSpec(id=f"gavel-{n:05d}", throughput=model, batch_min=model.batch_min, batch_max=model.batch_max,
                       max_local=model.max_local, total_samples=float(total_steps * b), submitted_gpus=k,
                       submitted_batch=min(max(b, model.batch_min), model.batch_max), arrival_s=t)
        opt = _nearest_feasible(spec, k, spec.submitted_batch)
        if opt is None:
            raise InstanceError(file, where, f"a feasible option of {model.name}", (k, b))
        jobs.append(JobSpec(**{**spec.__dict__, "submitted_gpus": opt[0], "submitted_batch": opt[1]}))
    if not jobs:
        raise InstanceError(file, "lines", "at least one job", 0)
    return jobs


def load_any(path: str | os.PathLike[str], *, seed: int = 0) -> list[JobSpec]:
    """The jobs of any workload this project reads (module docstring); ``seed`` seeds Philly's networks.

    A Gavel trace is read on K80 profiles; the jobs of models without one are
    left out with a warning that counts them by model.
    """
    from elasticopt.scheduling.pollux_trace import import_pollux
    from elasticopt.scheduling.workload import load_workload

    text = str(path)
    if text in TRACE_NAMES:
        return read_philly(text, seed=seed)
    p = Path(path)
    if p.suffix.lower() == ".trace":
        skipped: dict[str, int] = {}
        jobs = read_gavel_trace(p, skipped=skipped)
        if skipped:
            logging.getLogger(__name__).warning(
                "%s: read %d jobs; left out %d of models without a fitted K80 profile (%s)", p, len(jobs),
                sum(skipped.values()), ", ".join(f"{k}: {v}" for k, v in sorted(skipped.items())))
        return jobs
    if p.is_file() and p.suffix.lower() == ".csv":
        header = set(_header(p))
        if {"application", "num_replicas", "batch_size"} <= header:
            return import_pollux(p)
        if set(_PHILLY_COLUMNS) <= header:
            return read_philly(p, seed=seed)
    return load_workload(p)
