"""A validated request onto the allocation model (docs/integrations.md §"onto the model").

The request format is general (node pools, per-option caller values, current
node placement); this module maps it onto :mod:`elasticopt.models` through the
model's own loader (:func:`~elasticopt.models.problem_from_dict`), so the
service never re-implements the model's rules.

Today's model is one homogeneous pool, so:

- a cluster with more than one pool is ``unsupported``;
- caller values (``options`` with ``value``) become measured-throughput rows
  under the ``throughput`` objective with weight 1, so the model's value of an
  option *is* the row's number.  This is exact: per job the values are shifted
  by a constant, which moves every allocation's total by the same amount.
  A job that may idle is shifted by its ``idle_value`` (idle is worth 0 in
  the model); options not above it are dropped (idle is at least as good with
  0 GPUs).  A job that must run is shifted so its worst option is worth 1.
  The response adds the shifts back (``objective_value`` in caller units);
- per-job ``preemptible`` maps onto the model's one ``allow_preemption``: a
  running job that may not be preempted keeps ``running`` (no idle option), a
  running job that may is sent as queued.  This is exact unless a rescale
  penalty is set (it applies to ``running`` jobs only): then mixed
  preemptibility is ``unsupported``;
- ``nodes`` of an option (the span the caller priced) is not a model
  dimension yet: per (gpus, batch) the tightest priced span is solved and the
  placement step (:mod:`elasticopt.service.placement`) reports the span it
  achieved, with the caller's value for that span when priced.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from elasticopt.errors import ValidationError
from elasticopt.models import FORMAT as INSTANCE_FORMAT
from elasticopt.models import OBJECTIVES, Cluster, Job, MeasuredThroughput, Problem, Running, problem_from_dict
from elasticopt.service.protocol import ServiceError, finite

__all__ = ["Translation", "ValueJob", "translate"]

#: Pool name of a cluster given as ``{"gpus": G, "gpus_per_node": g}``.
DEFAULT_POOL = "default"
#: The objective of caller values (the model's objectives are ``elasticopt.models.OBJECTIVES``).
VALUES = "values"


@dataclass(frozen=True)
class ValueJob:
    """How a caller-values job was mapped: the shift and the priced options."""

    offset: float
    idle_value: float
    #: (gpus, batch) -> {nodes spanned (None = unspecified): caller value}
    priced: dict[tuple[int, int], dict[int | None, float]]


@dataclass(frozen=True)
class Translation:
    """The model problem of a request and what the service needs to answer it.

    Attributes
    ----------
    problem
        The model problem (jobs that cannot run anywhere are left out).
    pool
        The pool name every allocation is in.
    node_gpus
        ``node_gpus[i]`` = GPUs of node i (global node index).
    current
        Job id -> current placement ``[(node, gpus), ...]`` from the request.
    value_jobs
        Job id -> :class:`ValueJob` for the ``values`` objective.
    left_out
        Jobs left idle without being solved (no option in the cluster's pool).
    """

    problem: Problem
    pool: str
    node_gpus: tuple[int, ...]
    current: dict[str, list[tuple[int, int]]]
    value_jobs: dict[str, ValueJob] = field(default_factory=dict)
    left_out: tuple[str, ...] = ()

    def offset_total(self) -> float:
        """Sum of the value shifts (caller objective = model objective + this)."""
        return sum(v.offset for v in self.value_jobs.values())


def _cluster(doc: dict[str, Any]) -> tuple[str, int, tuple[int, ...]]:
    """(pool name, GPUs per node, GPUs of every node) of the request's one pool."""
    cl = doc.get("cluster")
    if cl is None:
        raise ServiceError("invalid_request", "cluster: expected this field to be present", "cluster",
                           "a cluster ({'gpus': G} or {'pools': {...}})", "nothing")
    if "pools" in cl:
        pools = cl["pools"]
        if len(pools) > 1:
            raise ServiceError(
                "unsupported",
                f"cluster.pools: {len(pools)} pools given; the allocation model of this version has one GPU "
                "type (heterogeneous pools come with the general model)",
                "cluster.pools",
                "one pool",
                sorted(pools),
            )
        (name, pool), = pools.items()
        g = pool["gpus_per_node"]
        return name, g, (g,) * pool["nodes"]
    G, g = cl["gpus"], cl.get("gpus_per_node", 8)
    return DEFAULT_POOL, g, (g,) * (G // g) + ((G % g,) if G % g else ())


def _value_rows(jd: dict[str, Any], i: int, pool: str, may_idle: bool) -> tuple[list[list[float]], ValueJob]:
    where = f"jobs[{i}]"
    priced: dict[tuple[int, int], dict[int | None, float]] = {}
    for o, opt in enumerate(jd["options"]):
        p = f"{where}.options[{o}]"
        if opt.get("pool", pool) != pool:
            continue
        k, b = opt["gpus"], opt.get("batch", opt["gpus"])
        if b % k:
            raise ServiceError("invalid_request", f"{p}.batch: expected a multiple of gpus ({k})", f"{p}.batch",
                               f"a multiple of gpus ({k})", b)
        spans = priced.setdefault((k, b), {})
        span = opt.get("nodes")
        if span in spans:
            raise ServiceError("invalid_request", f"{p}: the option (gpus {k}, batch {b}, nodes {span}) is priced twice",
                               p, "each (gpus, batch, nodes) at most once", opt)
        spans[span] = finite(opt["value"], f"{p}.value")
    idle = finite(jd.get("idle_value", 0.0), f"{where}.idle_value")
    # the value solved for (k, b): the tightest span the caller priced (None = any span)
    best = {kb: spans[min(spans, key=lambda s: (s is not None, s or 0))] for kb, spans in priced.items()}
    if may_idle:
        offset = idle
    else:
        offset = min(best.values(), default=0.0) - 1.0
    rows = [[k, b, v - offset] for (k, b), v in sorted(best.items()) if v - offset > 0]
    return rows, ValueJob(offset=offset, idle_value=idle, priced=priced)


def translate(doc: dict[str, Any]) -> Translation:
    """Map a schema-valid request onto today's model (see the module docstring).

    Raises
    ------
    ServiceError
        ``invalid_request`` (a rule the schema cannot state, with its JSON
        path) or ``unsupported``.
    """
    pool, g, node_gpus = _cluster(doc)
    objective = doc.get("objective", "speedup")
    if objective != VALUES and objective not in OBJECTIVES:
        known = ", ".join(map(repr, (*OBJECTIVES, VALUES)))
        raise ServiceError("invalid_request", f"objective: expected one of {known}", "objective",
                           f"one of {known}", objective)
    jobs = doc.get("jobs", [])
    allow = doc.get("allow_preemption", False)
    penalty = doc.get("rescale_penalty", 0.0)
    preempt = {jd["id"]: jd.get("preemptible", allow) for jd in jobs if "running" in jd}
    mixed = len(set(preempt.values())) > 1
    if mixed and penalty:
        raise ServiceError(
            "unsupported",
            "running jobs with different 'preemptible' together with a rescale_penalty cannot be expressed by "
            "this version's model (one allow_preemption flag)",
            "rescale_penalty",
            "0 when running jobs differ in 'preemptible'",
            penalty,
        )
    model_allow = (not mixed) and bool(next(iter(preempt.values()), allow))
    inst_jobs: list[dict[str, Any]] = []
    request_index: list[int] = []  # request_index[m] = index in the request of the model's job m
    current: dict[str, list[tuple[int, int]]] = {}
    value_jobs: dict[str, ValueJob] = {}
    left_out: list[str] = []
    for i, jd in enumerate(jobs):
        where = f"jobs[{i}]"
        has_values = "options" in jd
        if has_values != (objective == VALUES):
            need = "'options' with caller values" if objective == VALUES else "'throughput' or 'profile'"
            raise ServiceError("invalid_request", f"{where}: objective {objective!r} needs {need} for every job",
                               where, need, "fields " + ", ".join(sorted(jd)))
        run = jd.get("running")
        may_idle = run is None or preempt[jd["id"]]
        if run is not None and "nodes" in run:
            current[jd["id"]] = [(int(n), int(c)) for n, c in run["nodes"]]
        if run is not None and run.get("pool", pool) != pool:
            raise ServiceError("invalid_request", f"{where}.running.pool: expected the cluster's pool {pool!r}",
                               f"{where}.running.pool", repr(pool), run.get("pool"))
        in_pool = pool in jd.get("pools", [pool])
        out: dict[str, Any] = {"id": jd["id"]}
        if has_values:
            rows, vj = _value_rows(jd, i, pool, may_idle) if in_pool else ([], None)
            if vj is not None:
                value_jobs[jd["id"]] = vj
            if rows:
                out["throughput"] = rows
        else:
            for key in ("throughput", "profile", "batch", "gpus", "remaining_samples", "weight"):
                if key in jd:
                    out[key] = jd[key]
            if run is not None and "batch" not in run:
                raise ServiceError("invalid_request", f"{where}.running.batch: expected this field to be present",
                                   f"{where}.running.batch", "the running job's global batch", "nothing")
        if not in_pool or (has_values and "throughput" not in out):
            if not may_idle:
                raise ServiceError(
                    "invalid_request",
                    f"{where}: a running job that may not be preempted has no option in pool {pool!r}",
                    where, "an option in the cluster's pool", "none",
                )
            left_out.append(jd["id"])
            if has_values and jd["id"] not in value_jobs:
                idle = finite(jd.get("idle_value", 0.0), f"{where}.idle_value")
                value_jobs[jd["id"]] = ValueJob(offset=idle, idle_value=idle, priced={})
            continue
        if run is not None and (model_allow or not may_idle):
            out["running"] = {"gpus": run["gpus"], "batch": run.get("batch", run["gpus"])}
        inst_jobs.append(out)
        request_index.append(i)
    priority = None
    if "priority" in doc:
        skip = set(left_out)
        priority = [j for j in doc["priority"] if j not in skip]
    try:
        if objective == VALUES:
            problem = _values_problem(inst_jobs, node_gpus, g, model_allow, priority)
        else:
            problem = _instance_problem(inst_jobs, node_gpus, g, objective, model_allow, penalty, priority)
    except ValidationError as exc:  # InstanceError too: the model's own checks, paths of the model's jobs
        path = re.sub(r"^jobs\[(\d+)\]", lambda m: f"jobs[{request_index[int(m.group(1))]}]", exc.path)
        raise ServiceError("invalid_request", f"{path}: expected {exc.expected}", path, exc.expected,
                           exc.found) from None
    return Translation(problem, pool, node_gpus, current, value_jobs, tuple(left_out))


def _instance_problem(jobs: list[dict[str, Any]], node_gpus: tuple[int, ...], g: int, objective: str,
                      allow: bool, penalty: float, priority: list[str] | None) -> Problem:
    """Jobs given by throughput or profile: through the model's loader (its defaults and checks)."""
    inst: dict[str, Any] = {
        "format": INSTANCE_FORMAT,
        "cluster": {"gpus": sum(node_gpus), "gpus_per_node": g},
        "objective": objective,
        "allow_preemption": allow,
        "jobs": jobs,
    }
    if penalty:
        inst["rescale_penalty"] = penalty
    if priority is not None:
        inst["priority"] = priority
    return problem_from_dict(inst, file="request")


def _values_problem(jobs: list[dict[str, Any]], node_gpus: tuple[int, ...], g: int, allow: bool,
                    priority: list[str] | None) -> Problem:
    """Caller-value jobs: every field is explicit, so the model objects are built directly (no defaults)."""
    built = []
    for jd in jobs:
        rows = jd["throughput"]
        run = jd.get("running")
        built.append(
            Job(
                id=jd["id"],
                throughput=MeasuredThroughput.from_rows(rows),
                batch_min=min(b for _, b, _ in rows),
                batch_max=max(b for _, b, _ in rows),
                max_local=max(b // k for k, b, _ in rows),
                running=Running(run["gpus"], run["batch"]) if run else None,
            )
        )
    return Problem(Cluster(sum(node_gpus), g), tuple(built), objective="throughput", allow_preemption=allow,
                   priority=tuple(priority) if priority is not None else None)
