"""Per-job records and the files they are written to (simulator and launcher alike).

Files
-----
``jobs.csv``
    One row per job, the fields of :class:`JobRecord` in order (times in
    seconds from the start of the run; empty = not applicable).
``summary.json``
    Free-form JSON mapping (metrics per policy, configuration), written
    with sorted keys.
``timeline.csv``
    ``time_s, gpus_in_use, running, queued``: the cluster after each decision
    and completion.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elasticopt._io import atomic_write_text

__all__ = [
    "JobRecord",
    "TimelinePoint",
    "write_jobs_csv",
    "read_jobs_csv",
    "write_timeline_csv",
    "write_summary_json",
]


@dataclass(frozen=True)
class JobRecord:
    """What happened to one job.

    ``status`` is ``completed``, ``failed``, ``dropped`` (admission control:
    it never started and left the queue at ``dropped_s``), ``running`` or
    ``queued`` (the last two for jobs unfinished at the end of the run).
    ``restart_s`` is the restart cost charged (starts + rescales), ``gpu_s``
    the GPU-seconds held.
    """

    job_id: str
    profile: str
    status: str
    arrival_s: float
    first_start_s: float | None
    completion_s: float | None
    total_samples: float
    samples_done: float
    submitted_gpus: int
    submitted_batch: int
    final_gpus: int
    final_batch: int
    starts: int
    rescales: int
    stops: int
    restart_s: float
    gpu_s: float
    dropped_s: float | None = None

    @property
    def jct_s(self) -> float | None:
        """Job completion time (completion - arrival), None if not completed."""
        return None if self.completion_s is None else self.completion_s - self.arrival_s

    @property
    def queue_delay_s(self) -> float | None:
        """Seconds from arrival to first start, None if never started."""
        return None if self.first_start_s is None else self.first_start_s - self.arrival_s


@dataclass(frozen=True)
class TimelinePoint:
    """The cluster right after an event."""

    time_s: float
    gpus_in_use: int
    running: int
    queued: int


_FIELDS = [f.name for f in dataclasses.fields(JobRecord)]
_INT = {"submitted_gpus", "submitted_batch", "final_gpus", "final_batch", "starts", "rescales", "stops"}
_STR = {"job_id", "profile", "status"}


def _fmt(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else str(v)
    return str(v)


def write_jobs_csv(path: str | os.PathLike[str], records: Iterable[JobRecord]) -> Path:
    """Write records to ``path`` as CSV (atomically).

    Parameters
    ----------
    path
        Destination.
    records
        The records, written in the order given.
    """
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(_FIELDS)
    for r in records:
        w.writerow([_fmt(getattr(r, f)) for f in _FIELDS])
    return atomic_write_text(path, buf.getvalue())


def read_jobs_csv(path: str | os.PathLike[str]) -> list[JobRecord]:
    """Read a file written by :func:`write_jobs_csv`."""
    out = []
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            kw: dict[str, Any] = {}
            for f in _FIELDS:
                v = row.get(f, "")  # a file written before a field existed: its default (None)
                if v is None:
                    v = ""
                if f in _STR:
                    kw[f] = v
                elif f in _INT:
                    kw[f] = int(v)
                else:
                    kw[f] = None if v == "" else float(v)
            out.append(JobRecord(**kw))
    return out


def write_timeline_csv(path: str | os.PathLike[str], points: Sequence[TimelinePoint]) -> Path:
    """Write a timeline as ``time_s,gpus_in_use,running,queued`` CSV (atomically)."""
    lines = ["time_s,gpus_in_use,running,queued"]
    lines += [f"{p.time_s!r},{p.gpus_in_use},{p.running},{p.queued}" for p in points]
    return atomic_write_text(path, "\n".join(lines) + "\n")


def _jsonable(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):  # field by field (asdict copies mappingproxies)
        return {f.name: _jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        return _jsonable(obj.item())
    return obj


def write_summary_json(path: str | os.PathLike[str], summary: Mapping[str, Any]) -> Path:
    """Write a summary mapping as indented JSON with sorted keys (atomically).

    Dataclasses become mappings of their fields; NaN and infinities become null.
    """
    return atomic_write_text(path, json.dumps(_jsonable(summary), indent=2, sort_keys=True) + "\n")
