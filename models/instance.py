"""Instance files, format ``elasticopt-instance/1`` (docs/design.md §7).

:func:`load_instance` validates a file against the shipped JSON Schema, then
checks what a schema cannot (unique ids, ranges, a feasible option per job);
every error is an :class:`~elasticopt.errors.InstanceError` naming the file,
the JSON path, what was expected and what was found.

Defaults for omitted fields: ``cluster.gpus_per_node`` 8, ``objective``
"speedup", ``allow_preemption`` false, ``rescale_penalty`` 0, per job
``gpus.min`` 1, ``gpus.max`` none (the cluster), ``weight`` 1, no
``remaining_samples``; ``batch.min``/``batch.max``/``batch.max_local`` default
to the profile's own range (named profiles) or to the smallest and largest
measured global batch and the largest measured local batch (measured points).
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from elasticopt._io import atomic_write_text
from elasticopt.errors import InstanceError, ValidationError, format_path
from elasticopt.models.instance_format2 import (
    FORMAT_1_FIELDS,
    FORMAT_2,
    check_objective,
    instance_schema_2,
    needs_format_2,
    profile_efficiency,
    problem_from_dict_2,
    problem_to_dict_2,
)
from elasticopt.models import rules
from elasticopt.models.instance_jobs import job_error, job_fields, job_limits, number
from elasticopt.models.fastload import fast_parse, fast_valid, plain_json
from elasticopt.models.jsontext import check_values, decode, describe, loads, read_bytes
from elasticopt.models.problem import Cluster, Job, Problem, Running
from elasticopt.profiles.throughput import MeasuredThroughput, ThroughputModel

__all__ = ["FORMAT", "load_instance", "save_instance", "problem_from_dict", "problem_to_dict", "dumps_instance", "instance_schema"]

FORMAT = "elasticopt-instance/1"


@lru_cache(maxsize=1)
def instance_schema() -> dict[str, Any]:
    """The JSON Schema of format 1 (shipped as package data)."""
    text = resources.files("elasticopt.models").joinpath("schema/instance-1.json").read_text("utf-8")
    return json.loads(text)


@lru_cache(maxsize=1)
def _validator_class() -> Any:
    """Draft 2020-12 where "integer" means a JSON integer literal: ``4.0`` is not one."""
    import jsonschema

    def is_integer(_checker: Any, value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    base = jsonschema.Draft202012Validator
    return jsonschema.validators.extend(base, type_checker=base.TYPE_CHECKER.redefine("integer", is_integer))


def _describe_schema_error(err: Any) -> tuple[str, str, object]:
    """(path, expected, found) for a jsonschema ValidationError."""
    path = list(err.absolute_path)
    v, arg, found = err.validator, err.validator_value, err.instance
    if v == "type":
        expected = f"a value of type {arg}"
    elif v == "minimum":
        expected = f"a number >= {arg}"
    elif v == "exclusiveMinimum":
        expected = f"a number > {arg}"
    elif v == "enum":
        expected = "one of " + ", ".join(repr(a) for a in arg)
    elif v == "const":
        expected = repr(arg)
    elif v == "required":
        missing = [r for r in arg if isinstance(found, dict) and r not in found]
        path = path + [missing[0]] if missing else path
        expected, found = "this field to be present", "nothing"
    elif v == "additionalProperties":
        allowed = sorted(err.schema.get("properties", {}))
        extra = sorted(set(found) - set(allowed)) if isinstance(found, dict) else []
        path = path + [extra[0]] if extra else path
        expected = "no such field (allowed: " + ", ".join(allowed) + ")"
        found = extra[0] if extra else found
    elif v in ("minItems", "maxItems"):
        expected = f"a list with {'at least' if v == 'minItems' else 'at most'} {arg} items"
        found = f"{len(found)} items" if isinstance(found, list) else found
    elif v == "minLength":
        expected = f"a string of at least {arg} character(s)"
    elif v == "oneOf" and path == ["cluster"]:
        expected = "either 'gpus' (with 'gpus_per_node': one pool) or 'pools' (GPU type -> nodes), not both"
        found = "both" if isinstance(found, dict) and "pools" in found else "neither"
    elif v == "oneOf" and "profiles" in json.dumps(arg):
        expected = "exactly one of 'throughput' (measured rows), 'profile' or 'profiles' (GPU type -> profile)"
        keys = [k for k in ("throughput", "profile", "profiles") if isinstance(found, dict) and k in found]
        found = " and ".join(keys) if keys else "none of them"
    elif v == "oneOf":
        expected = "exactly one of 'throughput' (measured points) or 'profile' (a named profile)"
        found = "both" if isinstance(found, dict) and "throughput" in found and "profile" in found else "neither"
    else:
        expected = f"{v} {arg!r}"
    return format_path(path), expected, describe(found)


def _resolve_profile(name: str, file: str, path: str) -> ThroughputModel:
    try:
        from elasticopt import profiles
    except ImportError as exc:  # pragma: no cover - profiles ship with the package
        raise InstanceError(file, path, "a known profile name", name, f"profiles unavailable: {exc}") from None
    get = getattr(profiles, "get_profile", None)
    known = list(getattr(profiles, "profile_names", lambda: [])()) + list(profiles.hetero_profile_names())
    if get is None or name not in known:
        raise InstanceError(file, path, "a known profile: " + (", ".join(known) or "(none installed)"), name)
    return get(name)


@lru_cache(maxsize=4096)
def _profile_has_option(model: Any, limits: tuple) -> bool:
    job = Job("x", model, *limits)
    return bool(job.options(gpus_cap=None))


def _has_option(job: Job) -> bool:
    """Whether ``job`` has a feasible option (:meth:`Job.options`), without building the list for measured points."""
    tp = job.throughput
    if type(tp) is MeasuredThroughput:
        lim = rules.limits(job)
        return any(rules.fits(k, b, *lim) for k, b in tp.points)
    try:
        return _profile_has_option(tp, (job.batch_min, job.batch_max, job.max_local, job.gpus_min, job.gpus_max))
    except TypeError:  # an unhashable model: ask it directly
        return bool(job.options(gpus_cap=None))


def _job_from_dict(d: dict[str, Any], i: int, file: str) -> Job:
    where = f"jobs[{i}]"
    if "throughput" in d:
        tp: ThroughputModel = MeasuredThroughput.from_rows(d["throughput"])
        ks = [r[0] for r in d["throughput"]]
        bs = [r[1] for r in d["throughput"]]
        defaults = (min(bs), max(bs), max(max(b // k, 1) for k, b in zip(ks, bs)))
    else:
        tp = _resolve_profile(d["profile"], file, f"{where}.profile")
        defaults = (getattr(tp, "batch_min", 1), getattr(tp, "batch_max", None), getattr(tp, "max_local", None))
    bmin, bmax, mloc, gmin, gmax = job_limits(d, where, file, defaults)
    run = d.get("running")
    try:
        job = Job(
            id=d["id"],
            throughput=tp,
            batch_min=bmin,
            batch_max=bmax,
            max_local=mloc,
            gpus_min=gmin,
            gpus_max=gmax,
            running=Running(run["gpus"], run["batch"], restart_cost_s=run.get("restart_cost_s", 0.0)) if run else None,
            remaining_samples=d.get("remaining_samples"),
            progress=d.get("progress", "samples"),
            weight=d.get("weight", 1.0),
            efficiency=None if "throughput" in d else profile_efficiency(tp),
        )
    except ValidationError as exc:
        raise job_error(file, where, d, exc) from None
    # measured points are finite; a profile's candidates stay within its measured range
    if not _has_option(job):
        raise InstanceError(
            file,
            where,
            f"at least one feasible option (k, b): {rules.RULE}, and a known throughput",
            f"none for job {job.id!r}",
            "widen the batch or GPU range, raise batch.max_local, or add throughput points",
        )
    return job


def problem_from_dict(data: Any, file: str = "<memory>", *, _screened: bool = False,
                      _trusted: bool = False) -> Problem:
    """Build a :class:`Problem` from parsed instance JSON, validating everything.

    Parameters
    ----------
    data
        The parsed JSON document.
    file
        Name used in error messages.

    Raises
    ------
    InstanceError
        Naming the file, the JSON path, what was expected and what was found.
    """
    import jsonschema

    if not isinstance(data, dict):
        raise InstanceError(file, "(root)", f"a JSON object (an {FORMAT} document)", describe(data))
    v2 = data.get("format") == FORMAT_2
    # fast path, for documents fast_parse read (no NaN, infinity or long integer in the text) or built in
    # Python as it would read them (plain_json): a compiled, stricter schema says "valid"; anything else is
    # decided and worded below
    # ``_trusted``: a document the service built from a request its schema passed, every value screened as
    # fast_parse screens (elasticopt.service.translate): the schema pass is skipped, the constructors check
    fast = _trusted or ((_screened or plain_json(data))
                        and fast_valid(data, "instance-2.json" if v2 else "instance-1.json"))
    if not fast:
        check_values(data, file)

    def validate(doc: Any, schema: dict[str, Any]) -> None:
        if fast:
            return
        err = jsonschema.exceptions.best_match(_validator_class()(schema).iter_errors(doc))
        if err is not None:
            path, expected, found = _describe_schema_error(err)
            raise InstanceError(file, path, expected, found)

    if v2:
        try:
            validate(data, instance_schema_2())
        except InstanceError:
            as_1 = dict(data, format=FORMAT)
            if not list(_validator_class()(instance_schema()).iter_errors(as_1)):
                raise InstanceError(file, "format", f"{FORMAT!r} (the rest of the document is written in format 1)",
                                    FORMAT_2, "change the format tag, or write throughput rows as [type, gpus, batch, "
                                    "samples/s]") from None
            raise
        return problem_from_dict_2(data, file, validate, _resolve_profile)
    validate(data, instance_schema())
    check_objective(data.get("objective", "speedup"), file, FORMAT_1_FIELDS)
    cl = data["cluster"]
    try:
        cluster = Cluster(cl["gpus"], cl.get("gpus_per_node", 8))
    except ValidationError as exc:
        raise InstanceError(file, exc.path, exc.expected, exc.found, exc.hint) from None
    jobs = []
    seen: dict[str, int] = {}
    for i, jd in enumerate(data["jobs"]):
        if jd["id"] in seen:
            raise InstanceError(file, f"jobs[{i}].id", f"a unique id (jobs[{seen[jd['id']]}] has it too)", jd["id"])
        seen[jd["id"]] = i
        jobs.append(_job_from_dict(jd, i, file))
    _check_priority(data.get("priority"), seen, file)
    try:
        return Problem(
            cluster=cluster,
            jobs=tuple(jobs),
            objective=data.get("objective", "speedup"),
            allow_preemption=data.get("allow_preemption", False),
            rescale_penalty=data.get("rescale_penalty", 0.0),
            priority=tuple(data["priority"]) if "priority" in data else None,
        )
    except ValidationError as exc:
        raise InstanceError(file, exc.path, exc.expected, exc.found, exc.hint) from None


def _check_priority(priority: list[str] | None, ids: dict[str, int], file: str) -> None:
    """Each entry of ``priority`` a job id, at most once (reported at ``priority[i]``)."""
    first: dict[str, int] = {}
    for i, jid in enumerate(priority or ()):
        if jid in first:
            raise InstanceError(file, f"priority[{i}]", f"each job id at most once (priority[{first[jid]}] has it too)",
                                describe(jid))
        if jid not in ids:
            raise InstanceError(file, f"priority[{i}]", "the id of a job in 'jobs'", describe(jid))
        first[jid] = i


def load_instance(path: str | os.PathLike[str]) -> Problem:
    """Read and validate an instance file.

    Parameters
    ----------
    path
        A JSON file in format ``elasticopt-instance/1``.

    Returns
    -------
    Problem

    Raises
    ------
    InstanceError
        If the file is missing, not JSON, or breaks the format.
    """
    name = str(path)
    raw = read_bytes(path, "instance file")
    data = fast_parse(raw)
    screened = data is not None
    if data is None:  # orjson refused it or it needs a closer look: the standard parser decides
        data = loads(decode(raw, name), name)
    return problem_from_dict(data, file=name, _screened=screened)


def problem_to_dict(problem: Problem) -> dict[str, Any]:
    """The instance JSON document of ``problem`` (inverse of :func:`problem_from_dict`).

    Format 1 where it can say everything, else format 2 (GPU types, nodes, caller values).
    """
    if needs_format_2(problem):
        return problem_to_dict_2(problem)
    jobs = []
    for job in problem.jobs:
        d: dict[str, Any] = {"id": job.id}
        if isinstance(job.throughput, MeasuredThroughput):
            d["throughput"] = [[k, b, t] for (k, b), t in job.throughput.points.items()]
        else:
            d["profile"] = job.throughput.name
        job_fields(job, d, placement=False)
        jobs.append(d)
    out: dict[str, Any] = {
        "format": FORMAT,
        "cluster": {"gpus": problem.cluster.gpus, "gpus_per_node": problem.cluster.gpus_per_node},
        "objective": problem.objective,
        "allow_preemption": problem.allow_preemption,
    }
    if problem.rescale_penalty:
        out["rescale_penalty"] = number(problem.rescale_penalty)
    if problem.priority is not None:
        out["priority"] = list(problem.priority)
    out["jobs"] = jobs
    return out


def dumps_instance(problem: Problem) -> str:
    """Deterministic JSON text of ``problem``: one job per line."""
    d = problem_to_dict(problem)
    jobs = d.pop("jobs")
    head = json.dumps(d, indent=2)[:-2]  # drop the closing "\n}"
    lines = [json.dumps(j, separators=(", ", ": "), allow_nan=False) for j in jobs]
    body = ",\n    ".join(lines)
    jobs_text = "[\n    " + body + "\n  ]" if lines else "[]"
    return head + ',\n  "jobs": ' + jobs_text + "\n}\n"


def save_instance(problem: Problem, path: str | os.PathLike[str]) -> Path:
    """Write ``problem`` as an instance file, atomically (temp file, then rename)."""
    return atomic_write_text(path, dumps_instance(problem))
