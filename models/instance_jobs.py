"""What both instance formats read the same way in a job's document (docs/design.md §7).

One rule each, for ``elasticopt-instance/1`` (:mod:`elasticopt.models.instance`) and ``/2``
(:mod:`elasticopt.models.instance_format2`):

- :func:`job_limits`: the batch and GPU limits, the throughput's defaults where the document gives none,
  with the checks a schema cannot make (``batch.max >= batch.min``, ``gpus.max >= gpus.min``);
- :func:`job_fields`: the fields both write the same way (batch, GPUs, running, remaining samples, progress,
  weight), and :func:`number`, how each writes a number;
- :func:`job_error`: a model's :class:`~elasticopt.errors.ValidationError` raised while a job is built,
  worded as an :class:`~elasticopt.errors.InstanceError` at the job's JSON path in the file, with the value the
  file has there.
"""

from __future__ import annotations

from typing import Any

from elasticopt.errors import InstanceError, ValidationError

#: The model's field path (``Job`` / ``Running``) -> its JSON path inside a job (the file's names differ).
JOB_FIELDS = {
    "batch_min": "batch.min",
    "batch_max": "batch.max",
    "max_local": "batch.max_local",
    "gpus_min": "gpus.min",
    "gpus_max": "gpus.max",
    "running.gpus": "running.gpus",
    "running.batch": "running.batch",
    "running.gpu_type": "running.type",
    "running.nodes": "running.nodes",
    "running.restart_cost_s": "running.restart_cost_s",
    "progress": "progress",
    "remaining_samples": "remaining_samples",
    "weight": "weight",
    "types": "types",
    "values": "values",
    "throughput": "throughput",
    "job.id": "id",
}


def job_path(where: str, model_path: str) -> tuple[str, str | None]:
    """``(JSON path in the file, path inside the job or None)`` of a model's validation path such as
    ``job 'a'.batch_min`` or ``running.nodes``, the job being at ``where`` (e.g. ``jobs[3]``)."""
    for name, json_path in JOB_FIELDS.items():
        if model_path == name or model_path.endswith("." + name):
            return f"{where}.{json_path}", json_path
    return where, None


def _value_at(doc: dict[str, Any], dotted: str) -> tuple[bool, Any]:
    node: Any = doc
    for key in dotted.split("."):
        if not isinstance(node, dict) or key not in node:
            return False, None
        node = node[key]
    return True, node


def job_error(file: str, where: str, doc: dict[str, Any], exc: ValidationError) -> InstanceError:
    """``exc``, raised by the model while building the job of ``doc`` at ``where``, as an error of the file:
    the job's JSON path and, where the file has a value there, that value as found (a list, not the model's
    tuple); else the model's own path and value."""
    path, inner = job_path(where, exc.path)
    found = exc.found
    if inner is not None:
        present, value = _value_at(doc, inner)
        if present:
            found = value
    return InstanceError(file, path, exc.expected, found, exc.hint)


def job_limits(doc: dict[str, Any], where: str, file: str,
               defaults: tuple[Any, Any, Any]) -> tuple[int, int, int, int, int | None]:
    """``(batch_min, batch_max, max_local, gpus_min, gpus_max)`` of a job's document.

    ``defaults``: ``(batch_min, batch_max, max_local)`` of its throughput (a profile's range, or the measured
    points' smallest and largest global batch and largest local batch; ``None`` where it has none).
    ``max_local`` defaults to ``batch_max`` where the throughput has no default; ``gpus.min`` to 1,
    ``gpus.max`` to none (the cluster's).
    """
    batch = doc.get("batch", {})
    bmin = batch.get("min", defaults[0])
    bmax = batch.get("max", defaults[1])
    mloc = batch.get("max_local", defaults[2] if defaults[2] is not None else bmax)
    for key, val in (("max", bmax), ("max_local", mloc)):
        if val is None:
            raise InstanceError(file, f"{where}.batch.{key}", "an integer (the profile has no default)", None,
                                f"give {where}.batch.{key} in the file")
    if bmax < bmin:
        raise InstanceError(file, f"{where}.batch.max", f"an integer >= batch.min ({bmin})", bmax)
    gpus = doc.get("gpus", {})
    gmin, gmax = gpus.get("min", 1), gpus.get("max")
    if gmax is not None and gmax < gmin:
        raise InstanceError(file, f"{where}.gpus.max", f"an integer >= gpus.min ({gmin})", gmax)
    return bmin, bmax, mloc, gmin, gmax


def number(x: float) -> float | int:
    """A number as both formats write it: an integer where it is one (within 2**53), else a float."""
    return int(x) if float(x).is_integer() and abs(x) < 2**53 else float(x)


def job_fields(job: Any, d: dict[str, Any], *, placement: bool) -> dict[str, Any]:
    """Add to a job's document ``d`` what both formats write the same way, in this order: ``batch``, ``gpus``,
    ``running`` (with its ``type`` and ``nodes`` where ``placement``: format 2), ``remaining_samples``,
    ``progress`` and ``weight`` (the last three only where not the default); returns ``d``."""
    d["batch"] = {"min": job.batch_min, "max": job.batch_max, "max_local": job.max_local}
    g: dict[str, int] = {"min": job.gpus_min}
    if job.gpus_max is not None:
        g["max"] = job.gpus_max
    d["gpus"] = g
    run = job.running
    if run is not None:
        r: dict[str, Any] = {"gpus": run.gpus, "batch": run.batch}
        if placement and run.gpu_type is not None:
            r["type"] = run.gpu_type
        if placement and run.nodes is not None:
            r["nodes"] = list(run.nodes)
        if run.restart_cost_s:
            r["restart_cost_s"] = number(run.restart_cost_s)
        d["running"] = r
    if job.remaining_samples is not None:
        d["remaining_samples"] = number(job.remaining_samples)
    if job.progress != "samples":
        d["progress"] = job.progress
    if job.weight != 1.0:
        d["weight"] = number(job.weight)
    return d
