"""Workload files: a list of training jobs with their arrival times.

Two formats, chosen by the file extension (see ``docs/workloads.md``).

CSV (``.csv``), one job per row, header required::

    id,arrival_s,profile,total_samples,duration_s,batch_min,batch_max,max_local,
    submitted_gpus,submitted_batch,gpus_min,gpus_max,weight,restart_cost_s

Required columns: ``id``, ``arrival_s``, ``profile`` and one of
``total_samples`` / ``duration_s`` (seconds the job takes on its submitted
(k, b); ``total_samples = duration_s * T(k, b)``).  Every other column may be
absent or empty: ``batch_min``/``batch_max``/``max_local`` default to the
profile's own, ``submitted_gpus`` to 1, ``submitted_batch`` to ``batch_min``,
``gpus_min`` to 1, ``gpus_max`` to no limit, ``weight`` to 1 and
``restart_cost_s`` to the simulator's default.  ``profile`` is a name from
:func:`elasticopt.profiles.profile_names` (e.g. ``t4/imagenet``).

JSON (``.json``)::

    {"format": "elasticopt-workload/1",
     "meta": {...anything...},
     "jobs": [{"id": "j1", "arrival_s": 0, "profile": "t4/imagenet", "total_samples": 1e6,
               "submitted_gpus": 2, "submitted_batch": 256},
              {"id": "j2", "arrival_s": 60, "throughput": [[1, 64, 400.0], [2, 128, 780.0]],
               "batch_min": 64, "batch_max": 128, "max_local": 64, "duration_s": 3600}]}

Same keys as the CSV columns; a job may give measured points
``throughput: [[gpus, global_batch, samples_per_s], ...]`` instead of a
``profile`` (then ``batch_min``, ``batch_max`` and ``max_local`` are required).
JSON only, for heterogeneous clusters: ``profiles`` (GPU type -> profile name)
instead of ``profile``, ``types`` (the types the job may use) and
``submitted_type`` (the type its submitted (k, b) and ``duration_s`` refer to;
default the first of ``profiles``); the batch range defaults to what every
named profile accepts.

Every error names the file, the row or JSON path, what was expected and what
was found; the file is read as every input file is (:mod:`elasticopt.models.jsontext`:
UTF-8, nesting depth, integers within ±(2**53 - 1), finite numbers; CSV read strictly,
header columns checked).  A job's submitted (k, b) must be a feasible option of the
job; its ``duration_s`` must give a finite number of samples; ``weight`` is at most
:data:`MAX_WEIGHT`.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from elasticopt._io import atomic_write_text
from elasticopt.errors import InstanceError, ValidationError
from elasticopt.models import MeasuredThroughput
from elasticopt.models.jsontext import describe, read_csv, read_json
from elasticopt.scheduling.jobspec import JobSpec
from elasticopt.scheduling.state import option_error

__all__ = ["WORKLOAD_FORMAT", "COLUMNS", "MAX_WEIGHT", "load_workload", "save_workload", "job_from_dict", "job_to_dict"]

WORKLOAD_FORMAT = "elasticopt-workload/1"
COLUMNS = (
    "id", "arrival_s", "profile", "total_samples", "duration_s", "batch_min", "batch_max", "max_local",
    "submitted_gpus", "submitted_batch", "gpus_min", "gpus_max", "weight", "restart_cost_s",
)
_INT_KEYS = {"batch_min", "batch_max", "max_local", "submitted_gpus", "submitted_batch", "gpus_min", "gpus_max"}
_FLOAT_KEYS = {"arrival_s", "total_samples", "duration_s", "weight", "restart_cost_s"}
#: Largest objective weight a workload job may have: a policy's objective sums weight x value over the jobs in
#: exact integers (docs/design.md §2), which much larger weights would overflow in the middle of a simulation.
MAX_WEIGHT = 1e6
#: Keys of heterogeneous jobs, JSON only.
TYPED_KEYS = ("profiles", "types", "submitted_type")


def _resolve_profile(name: str):
    from elasticopt.profiles import get_profile  # lazy: profiles load their data files

    return get_profile(name)


def _num(file: str, path: str, key: str, value: Any) -> int | float | None:
    if value is None or (isinstance(value, str) and value.strip() == ""):
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise InstanceError(file, f"{path}.{key}", "a number", value) from None
    if not math.isfinite(f):
        raise InstanceError(file, f"{path}.{key}", "a finite number", value)
    if key in _INT_KEYS:
        if f != int(f):
            raise InstanceError(file, f"{path}.{key}", "an integer", value)
        return int(f)
    return f


def job_from_dict(d: Mapping[str, Any], file: str = "<memory>", path: str = "jobs[0]") -> JobSpec:
    """Build a :class:`JobSpec` from one workload entry (CSV row or JSON object).

    Parameters
    ----------
    d
        The entry (keys as in the module docstring).
    file, path
        Where it came from, for error messages.
    """
    if not isinstance(d, Mapping):
        raise InstanceError(file, path, "an object", type(d).__name__)
    unknown = set(d) - set(COLUMNS) - {"throughput"} - set(TYPED_KEYS)
    if unknown:
        raise InstanceError(file, f"{path}.{sorted(unknown)[0]}", "a known key (" + ", ".join(COLUMNS) + ")",
                            sorted(unknown)[0])
    jid = d.get("id")
    if not isinstance(jid, str) or not jid.strip():
        raise InstanceError(file, f"{path}.id", "a non-empty string", jid)
    v = {k: _num(file, path, k, d.get(k)) for k in _INT_KEYS | _FLOAT_KEYS}
    profile = d.get("profile")
    points = d.get("throughput")
    defaults: dict[str, int] = {}
    typed = _typed(d, file, path)
    if sum(x not in (None, "") for x in (points, profile, typed["profiles"])) > 1:
        raise InstanceError(file, path, "one of 'profile', 'profiles' or 'throughput'", "several")
    if typed["profiles"] is not None:
        models = typed["profiles"]
        model = models[typed["submitted_type"]]
        defaults = {"batch_min": max(m.batch_min for m in models.values()),
                    "batch_max": min(m.batch_max for m in models.values()),
                    "max_local": max(m.max_local for m in models.values())}  # each profile keeps to its own memory
    elif points not in (None, ""):
        try:
            model = MeasuredThroughput.from_rows(points)
        except (TypeError, ValueError) as exc:
            raise InstanceError(file, f"{path}.throughput", "[[gpus, global_batch, samples_per_s], ...]",
                                points, hint=str(exc)) from None
    elif isinstance(profile, str) and profile.strip():
        try:
            model = _resolve_profile(profile.strip())
        except ValidationError as exc:
            raise InstanceError(file, f"{path}.profile", exc.expected, profile) from None
        defaults = {k: getattr(model, k) for k in ("batch_min", "batch_max", "max_local") if hasattr(model, k)}
    else:
        raise InstanceError(file, f"{path}.profile", "a profile name or 'throughput' points", profile)
    for k in ("batch_min", "batch_max", "max_local"):
        if v[k] is None:
            if k not in defaults:
                raise InstanceError(file, f"{path}.{k}", "an integer (the throughput model has no default)", None)
            v[k] = defaults[k]
    if v["weight"] is not None and not 0 < v["weight"] <= MAX_WEIGHT:
        raise InstanceError(file, f"{path}.weight", f"a number > 0 and <= {MAX_WEIGHT:g} (MAX_WEIGHT)", d.get("weight"))
    if v["arrival_s"] is None or v["arrival_s"] < 0:
        raise InstanceError(file, f"{path}.arrival_s", "a number >= 0", d.get("arrival_s"))
    k_sub = v["submitted_gpus"] if v["submitted_gpus"] is not None else 1
    b_sub = v["submitted_batch"] if v["submitted_batch"] is not None else v["batch_min"]
    try:
        spec = JobSpec(
            id=jid.strip(), throughput=model, batch_min=v["batch_min"], batch_max=v["batch_max"],
            max_local=v["max_local"], total_samples=1.0, submitted_gpus=k_sub, submitted_batch=b_sub,
            gpus_min=v["gpus_min"] if v["gpus_min"] is not None else 1, gpus_max=v["gpus_max"],
            arrival_s=v["arrival_s"], weight=v["weight"] if v["weight"] is not None else 1.0,
            restart_cost_s=v["restart_cost_s"], throughputs=typed["profiles"], types=typed["types"],
            submitted_type=typed["submitted_type"],
        )
    except (TypeError, ValueError) as exc:
        raise InstanceError(file, path, "a valid job", dict(d), hint=str(exc)) from None
    why = option_error(spec, k_sub, b_sub)
    if why is not None:
        raise InstanceError(file, f"{path}.submitted_batch", "a feasible submitted (gpus, batch)",
                            (k_sub, b_sub), hint=why)
    total = v["total_samples"]
    key = "total_samples"
    if total is None:
        if v["duration_s"] is None:
            raise InstanceError(file, f"{path}.total_samples", "total_samples or duration_s", None)
        key = "duration_s"
        sps = model.samples_per_s(k_sub, b_sub)
        total = v["duration_s"] * sps
        if not (math.isfinite(total) and total > 0):
            raise InstanceError(file, f"{path}.duration_s", "a duration > 0 whose samples (duration_s x samples/s "
                                f"{sps:.6g} at the submitted ({k_sub}, {b_sub})) are a finite number", d.get(key))
    if not (math.isfinite(total) and total > 0):
        raise InstanceError(file, f"{path}.{key}", "a finite number > 0", d.get(key, total))
    return dataclasses.replace(spec, total_samples=float(total))


def job_to_dict(spec: JobSpec, inline_throughput: bool = False) -> dict[str, Any]:
    """One workload entry for ``spec`` (``profile`` by name, or measured points inline)."""
    d: dict[str, Any] = {
        "id": spec.id, "arrival_s": spec.arrival_s, "total_samples": spec.total_samples,
        "batch_min": spec.batch_min, "batch_max": spec.batch_max, "max_local": spec.max_local,
        "submitted_gpus": spec.submitted_gpus, "submitted_batch": spec.batch_submitted,
        "gpus_min": spec.gpus_min, "gpus_max": spec.gpus_max, "weight": spec.weight,
        "restart_cost_s": spec.restart_cost_s,
    }
    if spec.throughputs is not None:
        d["profiles"] = {t: m.name for t, m in spec.throughputs.items()}
        d["types"] = list(spec.types) if spec.types is not None else None
        d["submitted_type"] = spec.submitted_type
    elif inline_throughput:
        d["throughput"] = spec.throughput.rows()  # type: ignore[attr-defined]
    else:
        d["profile"] = spec.throughput.name
    return {k: val for k, val in d.items() if val is not None}


def _typed(d: Mapping[str, Any], file: str, path: str) -> dict[str, Any]:
    """``profiles`` (type -> resolved profile), ``types`` and ``submitted_type`` of a heterogeneous job."""
    out: dict[str, Any] = {"profiles": None, "types": None, "submitted_type": None}
    names = d.get("profiles")
    if names in (None, ""):
        for k in ("types", "submitted_type"):
            if d.get(k) not in (None, ""):
                raise InstanceError(file, f"{path}.{k}", "'profiles' with it (a profile per GPU type)", d.get(k))
        return out
    if not isinstance(names, Mapping) or not names or not all(isinstance(t, str) and t for t in names):
        raise InstanceError(file, f"{path}.profiles", "an object GPU type -> profile name (JSON workloads)", names)
    models = {}
    for t, name in names.items():
        try:
            models[t] = _resolve_profile(str(name).strip())
        except ValidationError as exc:
            raise InstanceError(file, f"{path}.profiles.{t}", exc.expected, name) from None
    types = d.get("types")
    if types is not None and (not isinstance(types, list) or not types
                              or any(not isinstance(t, str) or t not in models for t in types)):
        raise InstanceError(file, f"{path}.types", "a list of types named in 'profiles'", types)
    sub = d.get("submitted_type") or next(t for t in models if types is None or t in types)
    if not isinstance(sub, str) or sub not in models or (types is not None and sub not in types):
        raise InstanceError(file, f"{path}.submitted_type", "a type of 'profiles' the job may use", sub)
    out.update(profiles=models, types=None if types is None else tuple(types), submitted_type=sub)
    return out


def _other_format_hint(found: Any) -> str | None:
    """How to read a file of another elasticopt format handed to ``simulate``."""
    text = str(found)
    if text.startswith("elasticopt-instance/"):
        return "an instance file: 'elasticopt solve FILE' reads it"
    if text.startswith("elasticopt-jobs/"):
        return "a launch jobs file: 'elasticopt launch FILE' runs it; its run directory's workload.json simulates it"
    return None


def load_workload(path: str | os.PathLike[str]) -> list[JobSpec]:
    """Read a CSV or JSON workload file (format in the module docstring).

    Raises
    ------
    InstanceError
        Naming the file, the row / JSON path, what was expected and found.
    """
    p = Path(path)
    file = str(p)
    suffix = p.suffix.lower()
    if suffix not in (".json", ".csv"):
        raise InstanceError(file, "(file)", "a .csv or .json workload", p.suffix or "no suffix")
    if suffix == ".json":
        doc = read_json(p, "workload file")  # the loader discipline of every input file (elasticopt.models.jsontext)
        if not isinstance(doc, dict) or doc.get("format") != WORKLOAD_FORMAT:
            found = doc.get("format") if isinstance(doc, dict) else describe(doc)
            raise InstanceError(file, "format", repr(WORKLOAD_FORMAT), describe(found), _other_format_hint(found))
        entries = doc.get("jobs")
        if not isinstance(entries, list):
            raise InstanceError(file, "jobs", "a list", describe(entries))
        jobs = [job_from_dict(e, file, f"jobs[{i}]") for i, e in enumerate(entries)]
    else:
        rows = read_csv(p, "workload file")
        missing = {"id", "arrival_s"} - set(rows[0] if rows else ())
        if missing:
            raise InstanceError(file, "header", "columns " + ", ".join(COLUMNS), rows[0] if rows else "an empty file")
        header = rows[0]
        known = set(COLUMNS)
        for c, name in enumerate(header):
            if name not in known:
                raise InstanceError(file, "header", "column names among " + ", ".join(COLUMNS), name,
                                    f"column {c + 1}; no spaces around names")
        jobs = []
        for i, cells in enumerate(rows[1:]):
            if len(cells) > len(header):
                raise InstanceError(file, f"row {i + 2}", f"at most {len(header)} cells (the header's)", len(cells))
            jobs.append(job_from_dict(dict(zip(header, cells)), file, f"row {i + 2}"))
    seen: set[str] = set()
    for i, j in enumerate(jobs):
        if j.id in seen:
            where = f"jobs[{i}]" if suffix == ".json" else f"row {i + 2}"
            raise InstanceError(file, f"{where}.id", "a unique id", j.id)
        seen.add(j.id)
    return jobs


def save_workload(jobs: Sequence[JobSpec], path: str | os.PathLike[str], meta: Mapping[str, Any] | None = None) -> Path:
    """Write a workload (CSV or JSON by extension), atomically.

    CSV needs every job's throughput to be a named profile; JSON writes
    measured models (:class:`MeasuredThroughput`) inline and ``meta`` as given.
    """
    p = Path(path)
    if p.suffix.lower() == ".json":
        entries = [job_to_dict(j, inline_throughput=isinstance(j.throughput, MeasuredThroughput)) for j in jobs]
        doc = {"format": WORKLOAD_FORMAT, "meta": dict(meta or {}), "jobs": entries}
        return atomic_write_text(p, json.dumps(doc, indent=1) + "\n")
    if p.suffix.lower() != ".csv":
        raise ValidationError("workload path", "a .csv or .json file name", str(p))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=[c for c in COLUMNS if c != "duration_s"], lineterminator="\n")
    w.writeheader()
    for j in jobs:
        if isinstance(j.throughput, MeasuredThroughput):
            raise ValidationError(f"job {j.id!r}.throughput", "a named profile (CSV) — use .json", "measured points")
        if j.throughputs is not None:
            raise ValidationError(f"job {j.id!r}.throughputs", "one profile (CSV) — use .json", "a profile per type")
        row = job_to_dict(j)
        w.writerow({k: (repr(val) if isinstance(val, float) else val) for k, val in row.items()})
    return atomic_write_text(p, buf.getvalue())
