"""Instance files, format ``elasticopt-instance/2``: GPU types, nodes, caller values (docs/design.md §7).

Format 2 adds to format 1:

- ``cluster.pools``: GPU type -> ``{"nodes", "gpus_per_node", "free"}``;
  ``free`` lists per node its free GPU indices (or just their number: the
  first ones); ``{"gpus", "gpus_per_node"}`` is still one pool of type ``"gpu"``;
- per job, ``throughput`` rows ``[type, gpus, global_batch, samples_per_s]``,
  ending in ``"packed"`` for a throughput measured on the fewest nodes;
  ``profile`` (one fitted profile for every type) or ``profiles`` (type ->
  profile); ``types`` (the types it may use); ``values`` rows ``[type, gpus,
  global_batch, value(, "packed")]`` for the ``value`` objective;
  ``running.type`` and ``running.nodes`` (node indices in its type's pool);
- ``node_aware``: offer node-aware profiles both packed and spread.

Errors are :class:`~elasticopt.errors.InstanceError` naming the file and the JSON path.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

from elasticopt.errors import InstanceError, ValidationError
from elasticopt.models import rules
from elasticopt.models.cluster import pool_from_dict, pool_to_dict
from elasticopt.models.instance_jobs import job_error, job_fields, job_limits, number
from elasticopt.models.jsontext import describe
from elasticopt.models.objectives import get_objective, objective_names
from elasticopt.models.problem import DEFAULT_TYPE, Cluster, Job, Pool, Problem, Running
from elasticopt.profiles.throughput import MeasuredThroughput

__all__ = ["FORMAT_2", "instance_schema_2", "problem_from_dict_2", "problem_to_dict_2", "needs_format_2"]

FORMAT_2 = "elasticopt-instance/2"


@lru_cache(maxsize=1)
def instance_schema_2() -> dict[str, Any]:
    """The JSON Schema of format 2 (shipped as package data)."""
    text = resources.files("elasticopt.models").joinpath("schema/instance-2.json").read_text("utf-8")
    return json.loads(text)


def _pool(d: dict[str, Any], where: str, file: str) -> Pool:
    try:
        return pool_from_dict(d, where)
    except ValidationError as exc:
        raise InstanceError(file, exc.path, exc.expected, exc.found, exc.hint) from None


def cluster_from_dict(cl: dict[str, Any], file: str) -> Cluster:
    """The :class:`Cluster` of an instance's ``cluster`` object (``{"gpus", "gpus_per_node"}`` or ``{"pools"}``),
    by the model's own checks (integers, size limits); an :class:`InstanceError` of ``file`` at its JSON path."""
    try:
        if "pools" in cl:
            return Cluster(pools={t: _pool(p, f"cluster.pools.{t}", file) for t, p in cl["pools"].items()})
        return Cluster(cl["gpus"], cl.get("gpus_per_node", 8))
    except ValidationError as exc:
        if isinstance(exc, InstanceError):
            raise
        raise InstanceError(file, exc.path, exc.expected, exc.found, exc.hint) from None


def _measured(rows: list[list[Any]], where: str, types: tuple[str, ...], file: str) -> dict[str, MeasuredThroughput]:
    pts: dict[str, dict[tuple[int, int], float]] = {}
    packed: dict[str, dict[tuple[int, int], float]] = {}
    for r, row in enumerate(rows):
        t, k, b, v = row[0], row[1], row[2], row[3]
        if t not in types:
            raise InstanceError(file, f"{where}[{r}][0]", "a GPU type of the cluster: " + ", ".join(types), t)
        if not v > 0:
            raise InstanceError(file, f"{where}[{r}][3]", "samples/s > 0", v)
        dest = packed if len(row) == 5 else pts
        key = (k, b)
        if key in dest.setdefault(t, {}):
            raise InstanceError(file, f"{where}[{r}]", f"one row per (type, gpus, batch{', packed' if len(row) == 5 else ''})", row)
        dest[t][key] = float(v)
    return {t: MeasuredThroughput(pts.get(t, {}), packed=packed.get(t, {})) for t in sorted(set(pts) | set(packed))}


def profile_efficiency(models: Any) -> Any:
    """The statistical efficiency fitted to the named profiles of a job (None: E = 1).

    ``models``: the job's throughput models (one, or a list).  Statistical efficiency is the
    network's, not the GPU's: a job whose profiles carry fitted efficiencies gets one where they
    all agree (profiles of other GPU types of the same network have none of their own).
    """
    from elasticopt.profiles.efficiency import get_efficiency  # the data file is read once, on first use

    found = {id(e): e for e in (get_efficiency(getattr(m, "name", "")) for m in (models if isinstance(models, list)
                                                                                   else [models])) if e is not None}
    return next(iter(found.values())) if len(found) == 1 else None


def _job(d: dict[str, Any], i: int, file: str, types: tuple[str, ...], resolve: Any) -> Job:
    where = f"jobs[{i}]"
    if "throughput" in d:
        tp: Any = _measured(d["throughput"], f"{where}.throughput", types, file)
        ks = [r[1] for r in d["throughput"]]
        bs = [r[2] for r in d["throughput"]]
        defaults = (min(bs), max(bs), max(max(b // k, 1) for k, b in zip(ks, bs)))
    elif "profile" in d:
        tp = resolve(d["profile"], file, f"{where}.profile")
        defaults = (getattr(tp, "batch_min", 1), getattr(tp, "batch_max", None), getattr(tp, "max_local", None))
    else:
        tp = {}
        for t, name in d["profiles"].items():
            if t not in types:
                raise InstanceError(file, f"{where}.profiles.{t}", "a GPU type of the cluster: " + ", ".join(types), t)
            tp[t] = resolve(name, file, f"{where}.profiles.{t}")
        ms = list(tp.values())
        defaults = (min(getattr(m, "batch_min", 1) for m in ms), max((getattr(m, "batch_max", 0) or 0) for m in ms) or None,
                    max((getattr(m, "max_local", 0) or 0) for m in ms) or None)
    bmin, bmax, mloc, gmin, gmax = job_limits(d, where, file, defaults)
    for r, t in enumerate(d.get("types", ())):
        if t not in types:
            raise InstanceError(file, f"{where}.types[{r}]", "a GPU type of the cluster: " + ", ".join(types), t)
    values = None
    if "values" in d:
        values = {}
        for r, row in enumerate(d["values"]):
            if row[0] not in types:
                raise InstanceError(file, f"{where}.values[{r}][0]", "a GPU type of the cluster: " + ", ".join(types), row[0])
            key = tuple(row[:3]) + (("packed",) if len(row) == 5 else ())
            values[key] = float(row[3])
    run = d.get("running")
    running = None
    if run:
        rt = run.get("type")
        if rt is not None and rt not in types:
            raise InstanceError(file, f"{where}.running.type", "a GPU type of the cluster: " + ", ".join(types), rt)
        if rt is None and len(types) > 1:
            raise InstanceError(file, f"{where}.running.type", "the GPU type it runs on (the cluster has several)", None)
    try:
        if run:
            nodes = tuple(run["nodes"]) if "nodes" in run else None
            running = Running(run["gpus"], run["batch"], rt, nodes, run.get("restart_cost_s", 0.0))
        job = Job(
            id=d["id"], throughput=tp, batch_min=bmin, batch_max=bmax, max_local=mloc, gpus_min=gmin, gpus_max=gmax,
            running=running, remaining_samples=d.get("remaining_samples"), weight=d.get("weight", 1.0),
            progress=d.get("progress", "samples"),
            types=tuple(d["types"]) if "types" in d else None, values=values,
            efficiency=None if "throughput" in d else profile_efficiency(list(tp.values()) if isinstance(tp, dict) else tp),
        )
    except ValidationError as exc:
        raise job_error(file, where, d, exc) from None
    return job


def problem_from_dict_2(data: dict[str, Any], file: str, validate: Any, resolve: Any) -> Problem:
    """Build a :class:`Problem` from a format-2 document.

    Parameters
    ----------
    data
        The parsed document.
    file
        Name used in error messages.
    validate
        ``validate(data, schema)``: raises the schema error as an InstanceError.
    resolve
        ``resolve(name, file, path)``: a named profile, or an InstanceError.
    """
    validate(data, instance_schema_2())
    check_objective(data.get("objective", "speedup"), file)
    cluster = cluster_from_dict(data["cluster"], file)
    types = cluster.types
    jobs, seen = [], {}
    for i, jd in enumerate(data["jobs"]):
        if jd["id"] in seen:
            raise InstanceError(file, f"jobs[{i}].id", f"a unique id (jobs[{seen[jd['id']]}] has it too)", jd["id"])
        seen[jd["id"]] = i
        job = _job(jd, i, file, types, resolve)
        if not job.typed_options(cluster, data.get("node_aware", False)) and not job.typed_options(
            Cluster(pools={t: Pool(16, 1 << 16) for t in types})  # 2**20 GPUs per type, within the pool limits
        ):
            raise InstanceError(
                file, f"jobs[{i}]",
                f"at least one feasible option (type, k, b): {rules.RULE}, a known throughput, "
                "and a type it may use",
                f"none for job {job.id!r}",
            )
        jobs.append(job)
    try:
        return Problem(
            cluster=cluster,
            jobs=tuple(jobs),
            objective=data.get("objective", "speedup"),
            allow_preemption=data.get("allow_preemption", False),
            rescale_penalty=data.get("rescale_penalty", 0.0),
            priority=tuple(data["priority"]) if "priority" in data else None,
            node_aware=data.get("node_aware", False),
        )
    except ValidationError as exc:
        raise InstanceError(file, exc.path, exc.expected, exc.found, exc.hint) from None


#: The job fields an objective may require that format 1 carries (it has no caller values).
FORMAT_1_FIELDS: tuple[str, ...] = ("remaining_samples", "efficiency")


def check_objective(name: Any, file: str, carries: tuple[str, ...] | None = None) -> None:
    """The file's ``objective`` is a registered one whose required job fields the format carries.

    ``carries``: the job fields the format has (None: every field, format 2).  Raises
    :class:`InstanceError` at ``objective`` listing the objectives the file may name.
    """
    known = objective_names()
    fit = [n for n in known if carries is None or set(get_objective(n).requires) <= set(carries)]
    if name in fit:
        return
    hint = "the registered objectives (elasticopt.register_objective adds one)"
    if name in known:
        need = ", ".join(sorted(set(get_objective(name).requires) - set(carries or ())))
        hint = f"objective {name!r} needs job fields ({need}) that format 1 does not carry: write the file in format 2"
    raise InstanceError(file, "objective", "one of " + ", ".join(map(repr, fit)), describe(name), hint)


def needs_format_2(problem: Problem) -> bool:
    """Whether ``problem`` uses anything format 1 cannot say."""
    if problem.cluster.types != (DEFAULT_TYPE,) or problem.node_aware or not set(
            get_objective(problem.objective).requires) <= set(FORMAT_1_FIELDS):
        return True
    pool = problem.cluster.pools[DEFAULT_TYPE]  # type: ignore[index]
    if problem.cluster != Cluster(pool.gpus, pool.gpus_per_node):
        return True
    for j in problem.jobs:
        if j.types is not None or j.values is not None or isinstance(j.throughput, dict):
            return True
        if getattr(j.throughput, "packed", None):
            return True
        if j.running is not None and (j.running.gpu_type is not None or j.running.nodes is not None):
            return True
    return False


def problem_to_dict_2(problem: Problem) -> dict[str, Any]:
    """The format-2 document of ``problem``."""
    from collections.abc import Mapping

    pools = {}
    for t, p in problem.cluster.pools.items():  # type: ignore[union-attr]
        pools[t] = pool_to_dict(p)
    jobs = []
    for job in problem.jobs:
        d = {"id": job.id}
        models = job.throughput if isinstance(job.throughput, Mapping) else None
        if models is None and isinstance(job.throughput, MeasuredThroughput):
            models = {t: job.throughput for t in problem.cluster.types}
        if models is not None and all(isinstance(m, MeasuredThroughput) for m in models.values()):
            rows: list[list[Any]] = []
            for t, m in models.items():
                rows += [[t, k, b, v] for (k, b), v in m.points.items()]
                rows += [[t, k, b, v, "packed"] for (k, b), v in m.packed.items()]
            d["throughput"] = rows
        elif models is not None:
            d["profiles"] = {t: m.name for t, m in models.items()}
        else:
            d["profile"] = job.throughput.name
        if job.types is not None:
            d["types"] = list(job.types)
        if job.values is not None:
            d["values"] = [list(k[:3]) + [number(v)] + list(k[3:]) for k, v in job.values.items()]
        job_fields(job, d, placement=True)
        jobs.append(d)
    out: dict[str, Any] = {
        "format": FORMAT_2,
        "cluster": {"pools": pools},
        "objective": problem.objective,
        "allow_preemption": problem.allow_preemption,
    }
    if problem.node_aware:
        out["node_aware"] = True
    if problem.rescale_penalty:
        out["rescale_penalty"] = number(problem.rescale_penalty)
    if problem.priority is not None:
        out["priority"] = list(problem.priority)
    out["jobs"] = jobs
    return out
