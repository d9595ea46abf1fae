"""Importer for the Pollux / AdaptDL simulator's workload CSV.

Pollux (OSDI'21) workloads (``simulator/workloads/*.csv`` in petuum/adaptdl,
branch osdi21-artifact) have the columns ``name,time,application,
num_replicas,batch_size``: submission time in seconds, the application
(``bert``, ``cifar10``, ``deepspeech2``, ``imagenet``, ``ncf``, ``yolov3``),
the GPUs and the global batch the user asked for.  Each application maps to
the profile fitted to Pollux's own T4 measurements (``t4/<application>``).

Pollux defines a job's length as a number of epochs (``max_epochs`` in its
``applications.py``) of its dataset; this importer converts that to samples
with :data:`POLLUX_JOB_SAMPLES` = epochs x training-set size.  The epoch counts
are Pollux's; the dataset sizes are the public sizes of the datasets those
examples train on, approximate where noted — override them with
``samples=`` when you know better.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

from elasticopt.errors import InstanceError
from elasticopt.models.jsontext import MAX_EXACT_INT, read_csv
from elasticopt.scheduling.jobspec import JobSpec
from elasticopt.scheduling.state import option_error

__all__ = ["POLLUX_JOB_SAMPLES", "import_pollux"]

#: samples per job = epochs (Pollux applications.py) x training examples.
POLLUX_JOB_SAMPLES: dict[str, float] = {
    "bert": 2 * 88_641,  # SQuAD v1.1 fine-tuning
    "cifar10": 100 * 50_000,  # CIFAR-10
    "deepspeech2": 80 * 948,  # CMU AN4 (approximate)
    "imagenet": 90 * 1_281_167,  # ImageNet-1k
    "ncf": 10 * 4_970_845,  # MovieLens-1M with 4 negatives per positive (approximate)
    "yolov3": 50 * 16_551,  # PASCAL VOC 07+12 trainval
}


def _nearest_feasible(spec: JobSpec, k: int, b: int) -> tuple[int, int] | None:
    """The feasible option with k GPUs (halving k if needed) whose batch is closest to b."""
    model = spec.throughput
    while k >= 1:
        opts = [bb for kk, bb in model.candidates(k, spec.batch_min, spec.batch_max)
                if kk == k and option_error(spec, kk, bb) is None]
        if opts:
            return k, min(opts, key=lambda bb: (abs(bb - b), bb))
        k //= 2
    return None


def import_pollux(
    path: str | os.PathLike[str],
    *,
    profile_prefix: str = "t4/",
    samples: Mapping[str, float] | None = None,
    warnings: list[str] | None = None,
) -> list[JobSpec]:
    """Read a Pollux workload CSV as job specs.

    Parameters
    ----------
    path
        The CSV (``name,time,application,num_replicas,batch_size``).
    profile_prefix
        Profile name = prefix + application.
    samples
        Samples per job by application (default :data:`POLLUX_JOB_SAMPLES`).
    warnings
        If given, receives one line per job whose submitted (k, b) was not a
        feasible option of its profile and was moved to the nearest one.
    """
    from elasticopt.profiles import get_profile

    file = str(path)
    per_app = dict(POLLUX_JOB_SAMPLES, **(samples or {}))
    jobs: list[JobSpec] = []
    records = read_csv(path, "Pollux workload CSV")  # the loader discipline of every input file
    header = [h.strip() for h in records[0]] if records else []
    need = {"name", "time", "application", "num_replicas", "batch_size"}
    if not need <= set(header):
        raise InstanceError(file, "header", "columns " + ",".join(sorted(need)), header or "an empty file")
    for i, cells in enumerate(records[1:]):
        where = f"row {i + 2}"
        row = dict(zip(header, (c.strip() for c in cells)))
        if len(cells) < len(header):
            raise InstanceError(file, where, f"{len(header)} cells (the header's)", len(cells))
        app = row["application"]
        if app not in per_app:
            raise InstanceError(file, f"{where}.application", "one of " + ", ".join(sorted(per_app)), app)
        try:
            t, k, b = float(row["time"]), int(row["num_replicas"]), int(row["batch_size"])
        except ValueError:
            raise InstanceError(file, where, "numeric time, num_replicas, batch_size", dict(row)) from None
        if not (math.isfinite(t) and t >= 0):
            raise InstanceError(file, f"{where}.time", "a finite number >= 0", row["time"])
        if not (0 <= k <= MAX_EXACT_INT and 1 <= b <= MAX_EXACT_INT):
            raise InstanceError(file, where, "num_replicas in 0..2**53 - 1 and batch_size in 1..2**53 - 1", (k, b))
        model = get_profile(profile_prefix + app)
        spec = JobSpec(
            id=row["name"] or f"job-{i}",
            throughput=model,
            batch_min=model.batch_min,
            batch_max=model.batch_max,
            max_local=model.max_local,
            total_samples=float(per_app[app]),
            submitted_gpus=max(k, 1),
            submitted_batch=b,
            arrival_s=max(t, 0.0),
        )
        if option_error(spec, spec.submitted_gpus, b) is not None:
            opt = _nearest_feasible(spec, spec.submitted_gpus, b)
            if opt is None:
                raise InstanceError(file, where, f"a feasible option for {model.name}", (k, b))
            if warnings is not None:
                warnings.append(f"{file}:{where}: job {spec.id} ({k}, {b}) -> {opt}")
            spec = JobSpec(**{**spec.__dict__, "submitted_gpus": opt[0], "submitted_batch": opt[1]})
        jobs.append(spec)
    return jobs
