"""A validated request onto the allocation model (docs/integrations.md §"Onto the model").

The request is mapped onto an instance document and built by the model's own
loader (:func:`~elasticopt.models.problem_from_dict`) -- caller values by the
model's constructors, whose checks apply -- : format 1 for a plain
one-pool request (so the service answers exactly what ``elasticopt solve``
answers on the same instance), format 2 (docs/design.md §7) for node pools,
typed throughput rows and caller values.  The service re-implements none of
the model's rules; what it adds:

- caller values (``objective: "values"``) become the model's ``value``
  objective, shifted per job that may idle by its ``idle_value`` (the model's
  idle is worth 0; a constant per job moves every allocation's total by the
  same amount, and the response adds it back); options not above the idle
  value are dropped (idle is at least as good with 0 GPUs).  An option priced
  on the fewest nodes (``nodes`` = ceil(k / g)) is a *packed* option; one
  without ``nodes`` may be placed anywhere; one priced on more nodes is offered
  as "anywhere" at the lowest such value (a placement on more nodes than
  priced is not excluded by the model);
- per-job ``preemptible`` maps onto the model's one ``allow_preemption``: a
  running job that may not be preempted keeps ``running``, a running job that
  may is sent as queued; exact unless a rescale penalty is set (then mixed
  preemptibility is ``unsupported``);
- the jobs' current nodes stay in the service: its placement step keeps a job
  whose option did not change where it is (:mod:`elasticopt.service.placement`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from collections.abc import Callable, Sequence
from typing import Any

from elasticopt.errors import ValidationError
from elasticopt.models import FORMAT as FORMAT_1
from elasticopt.models import Problem, problem_from_dict
from elasticopt.models.objectives import objective_names
from elasticopt.models.instance_format2 import FORMAT_2, cluster_from_dict
from elasticopt.models import Cluster, Job, MeasuredThroughput, Running
from elasticopt.models.rules import divides
from elasticopt.profiles.registry import registry_changes
from elasticopt.service.jobcache import CachedJob, JobCache
from elasticopt.service.protocol import ServiceError, finite

__all__ = ["Translation", "ValueJob", "PoolNodes", "translate", "translate_instance", "VALUES", "SERVICE_FIELDS"]

#: The objective of caller values (the model's objectives: the registry, ``objective_names()``).
VALUES = "values"


@dataclass(frozen=True)
class PoolNodes:
    """The nodes of one pool: GPUs of each node, GPUs per (full) node, global index of its first node."""

    node_gpus: tuple[int, ...]
    gpus_per_node: int
    first: int


@dataclass(frozen=True)
class ValueJob:
    """How a caller-values job was mapped: the shift and its values by (pool, gpus, batch, packed)."""

    offset: float
    idle_value: float
    priced: dict[tuple[str, int, int, bool], float]


@dataclass(frozen=True)
class Translation:
    """The model problem of a request and what the service needs to answer it.

    Attributes
    ----------
    problem
        The model problem (jobs that cannot run anywhere are left out).
    pools
        Pool name -> its nodes, in request order (global node indices follow it).
    current
        Job id -> (pool, current placement ``[(global node, gpus), ...]``).
    value_jobs
        Job id -> :class:`ValueJob` for the ``values`` objective.
    left_out
        Jobs left idle without being solved (no option they may use).
    request_index
        ``request_index[m]``: the index in the request of the model's job ``m`` (empty: the same).
    pieces
        Per request job, what it translated to (with a job cache only, else None): what a session's next
        request reuses for the jobs it keeps (:mod:`elasticopt.service.translate_changes`).
    context
        The job cache's key of the request's context (None: no cache).
    """

    problem: Problem
    pools: dict[str, PoolNodes]
    current: dict[str, tuple[str, list[tuple[int, int]]]]
    value_jobs: dict[str, ValueJob] = field(default_factory=dict)
    left_out: tuple[str, ...] = ()
    request_index: tuple[int, ...] = ()
    pieces: tuple[CachedJob, ...] | None = None
    context: bytes | None = None

    def request_path(self, path: str) -> str:
        """A model path (``jobs[m].values``) as the request's (``jobs[i].values``, ``i`` its index there)."""
        return _request_path(path, self.request_index)

    def offset_total(self) -> float:
        """Sum of the value shifts (caller objective = model objective + this)."""
        return sum(v.offset for v in self.value_jobs.values())


def _pools(doc: dict[str, Any]) -> tuple[dict[str, PoolNodes], dict[str, Any], Cluster]:
    """The pools with global node numbering, the model's cluster document and its :class:`Cluster`, checked by
    the model first (integers, not ``4.0``; its size limits): nothing is built from a request's sizes before."""
    cl = doc.get("cluster")
    if cl is None:
        raise ServiceError("invalid_request", "cluster: expected this field to be present", "cluster",
                           "a cluster ({'gpus': G} or {'pools': {...}})", "nothing")
    model_doc = {"gpus": cl["gpus"], "gpus_per_node": cl.get("gpus_per_node", 8)} if "pools" not in cl else \
        {"pools": {t: dict(p) for t, p in cl["pools"].items()}}
    try:
        cluster = cluster_from_dict(model_doc, "request")
    except ValidationError as exc:
        raise ServiceError("invalid_request", f"{exc.path}: expected {exc.expected}", exc.path, exc.expected,
                           exc.found) from None
    return _pool_nodes(cluster), model_doc, cluster


def _pool_nodes(cluster: Cluster) -> dict[str, PoolNodes]:
    """Per pool its nodes' free GPUs, numbered across pools in the cluster's order from 0."""
    pools, first = {}, 0
    for t, pool in cluster.pools.items():  # type: ignore[union-attr]
        pools[t] = PoolNodes(pool.free_per_node(), pool.gpus_per_node, first)
        first += pool.nodes
    return pools


def _value_rows(jd: dict[str, Any], i: int, pools: dict[str, PoolNodes], allowed: list[str],
                may_idle: bool) -> tuple[dict[tuple[str, int, int, bool], float], ValueJob]:
    """The options of a caller-values job, (pool, gpus, batch, packed) -> shifted value, and its mapping."""
    where = f"jobs[{i}]"
    default_pool = next(iter(pools))
    per_node = {t: pn.gpus_per_node for t, pn in pools.items()}
    spans: dict[tuple[str, int, int], dict[int | None, float]] = {}
    isfinite = math.isfinite
    for o, opt in enumerate(jd["options"]):  # (the paths are formatted only for an error: 16,000 at 1,000 jobs)
        t = opt.get("pool", default_pool)
        g = per_node.get(t)
        if g is None:
            p = f"{where}.options[{o}]"
            raise ServiceError("invalid_request", f"{p}.pool: expected a pool of the cluster", f"{p}.pool",
                               "one of " + ", ".join(map(repr, pools)), t)
        k = opt["gpus"]
        b = opt.get("batch", k)
        if not divides(k, b):
            p = f"{where}.options[{o}]"
            raise ServiceError("invalid_request", f"{p}.batch: expected a multiple of gpus ({k})", f"{p}.batch",
                               f"a multiple of gpus ({k})", b)
        span = opt.get("nodes")
        if span is not None and span < -(-k // g):
            p, tight = f"{where}.options[{o}]", -(-k // g)
            raise ServiceError("invalid_request", f"{p}.nodes: {k} GPUs need at least {tight} nodes of this pool",
                               f"{p}.nodes", f"an integer >= {tight}", span)
        per = spans.setdefault((t, k, b), {})
        if span in per:
            p = f"{where}.options[{o}]"
            raise ServiceError("invalid_request", f"{p}: the option (pool {t}, gpus {k}, batch {b}, nodes {span}) "
                               "is priced twice", p, "each (pool, gpus, batch, nodes) at most once", opt)
        v = float(opt["value"])
        per[span] = v if isfinite(v) else finite(v, f"{where}.options[{o}].value")  # (finite raises)
    idle = finite(jd.get("idle_value", 0.0), f"{where}.idle_value")
    offset = idle if may_idle else 0.0
    priced: dict[tuple[str, int, int, bool], float] = {}
    for (t, k, b), per in spans.items():
        if t not in allowed:
            continue
        tight = -(-k // pools[t].gpus_per_node)
        if tight in per:
            priced[(t, k, b, True)] = per.pop(tight)
        if per:  # unspecified or more nodes: offered anywhere, at the lowest of those values
            priced[(t, k, b, False)] = min(per.values())
    keep = {key: v - offset for key, v in priced.items() if not may_idle or v - offset > 0}
    return keep, ValueJob(offset=offset, idle_value=idle, priced=priced)


def _rows(jd: dict[str, Any], i: int, pools: dict[str, PoolNodes]) -> list[list[Any]]:
    """Format-2 throughput rows of a throughput job (3-wide rows name the one pool)."""
    out = []
    for r, row in enumerate(jd["throughput"]):
        if len(row) == 3:
            if len(pools) > 1:
                raise ServiceError("invalid_request", f"jobs[{i}].throughput[{r}]: expected [pool, gpus, batch, "
                                   "samples_per_s] (the cluster has several pools)", f"jobs[{i}].throughput[{r}]",
                                   "[pool, gpus, batch, samples_per_s(, \"packed\")]", row)
            row = [next(iter(pools)), *row]
        out.append(list(row))
    return out


def translate(doc: dict[str, Any], screened: bool = False, cache: JobCache | None = None,
              encoded: list[bytes | None] | None = None, context: tuple[bool, bool] | None = None) -> Translation:
    """Map a schema-valid request onto the model (see the module docstring).

    ``screened``: the request's text holds no NaN, Infinity, 16-digit run or 3-digit exponent (the model
    loader's own screen, :func:`elasticopt.models.fastload.fast_parse`), so the loader may take its
    compiled-schema fast path (300 -> 45 ms for a 1,000-job profile request); else its full checks run.

    ``cache``: jobs translated by earlier requests (:class:`~elasticopt.service.jobcache.JobCache`): a job
    whose JSON and context it holds is not translated again; the problem is the one built without it.
    ``encoded``: the jobs' JSON as :meth:`~elasticopt.service.jobcache.JobCache.encode` wrote it, if at hand.
    ``context``: the model's ``(allow_preemption, general)`` where ``doc`` holds some jobs of a larger request
    whose jobs decide them (:mod:`elasticopt.service.translate_changes`); None: decided by ``doc``'s jobs.

    Raises
    ------
    ServiceError
        ``invalid_request`` (a rule the schema cannot state, with its JSON
        path) or ``unsupported``.
    """
    pools, cluster, model_cluster = _pools(doc)
    objective = doc.get("objective", "speedup")
    if objective != VALUES and objective not in objective_names():
        known = ", ".join(map(repr, (*objective_names(), VALUES)))
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
            "the model (one allow_preemption flag)",
            "rescale_penalty",
            "0 when running jobs differ in 'preemptible'",
            penalty,
        )
    model_allow = (not mixed) and bool(next(iter(preempt.values()), allow))
    if context is not None:
        model_allow, general = context
    else:
        general = objective == VALUES or len(pools) > 1 or any(
            len(row) != 3 for jd in jobs for row in jd.get("throughput", ()))
    inst_jobs: list[dict[str, Any]] = []
    request_index: list[int] = []  # request_index[m] = index in the request of the model's job m
    # with a cache: slots[m] = the model's job m as cached, or None where it is built now from inst_jobs[r]
    # (built[r] = (m, i): its model index and request index); keys[i]: job i's key to keep it under after the
    # request is translated, None for a job the cache holds already or cannot key
    ctx = None if cache is None else cache.context(doc["cluster"], objective, allow, model_allow, general, penalty,
                                                   registry_changes())
    if ctx is not None and (encoded is None or len(encoded) != len(jobs)):
        encoded = cache.encode(jobs)  # type: ignore[union-attr]
    if encoded is None:
        ctx = None
    found = None if ctx is None else cache.get_many(ctx, encoded)  # type: ignore[union-attr, arg-type]
    slots: list[Job | None] = []
    built: list[tuple[int, int]] = []
    keys: list[tuple[bytes, bytes] | None] = []
    current: dict[str, tuple[str, list[tuple[int, int]]]] = {}
    value_jobs: dict[str, ValueJob] = {}
    left_out: list[str] = []
    seen: dict[str, int] = {}  # job id -> its request index: ids are distinct in the request, not only in the
    # model (a job left out of it under another job's id took that job's values and allocation: a KeyError)
    for i, jd in enumerate(jobs):
        first = seen.setdefault(jd["id"], i)
        if first != i:
            raise ServiceError("invalid_request", f"jobs[{i}].id: expected a unique id (jobs[{first}] has it too)",
                               f"jobs[{i}].id", f"a unique id (jobs[{first}] has it too)", jd["id"])
        hit = None if found is None else found[i]
        if hit is not None:
            keys.append(None)  # (kept already)
            if hit.value_job is not None:
                value_jobs[jd["id"]] = hit.value_job
            if hit.current is not None:
                current[jd["id"]] = hit.current
            if hit.job is None:
                left_out.append(jd["id"])
            else:
                slots.append(hit.job)
                request_index.append(i)
            continue
        keys.append(None if ctx is None or encoded[i] is None else (ctx, encoded[i]))  # type: ignore[index]
        where = f"jobs[{i}]"
        has_values = "options" in jd
        if has_values != (objective == VALUES):
            need = "'options' with caller values" if objective == VALUES else "'throughput' or 'profile'"
            raise ServiceError("invalid_request", f"{where}: objective {objective!r} needs {need} for every job",
                               where, need, "fields " + ", ".join(sorted(jd)))
        for r, t in enumerate(jd.get("pools", ())):
            if t not in pools:
                raise ServiceError("invalid_request", f"{where}.pools[{r}]: expected a pool of the cluster",
                                   f"{where}.pools[{r}]", "one of " + ", ".join(map(repr, pools)), t)
        allowed = [t for t in pools if t in jd.get("pools", list(pools))]
        run = jd.get("running")
        may_idle = run is None or preempt[jd["id"]]
        run_pool = None
        if run is not None:
            run_pool = run.get("pool", next(iter(pools)) if len(pools) == 1 else None)
            if run_pool not in pools:
                raise ServiceError("invalid_request", f"{where}.running.pool: expected a pool of the cluster",
                                   f"{where}.running.pool", "one of " + ", ".join(map(repr, pools)), run_pool)
            if "nodes" in run:
                current[jd["id"]] = (run_pool, [(int(n), int(c)) for n, c in run["nodes"]])
        out: dict[str, Any] = {"id": jd["id"]}
        if has_values:
            options, vj = _value_rows(jd, i, pools, allowed, may_idle)
            value_jobs[jd["id"]] = vj
            if options:
                out["options"] = options
        else:
            for key in ("profile", "batch", "gpus", "remaining_samples", "weight", "progress"):
                if key in jd:
                    out[key] = jd[key]
            if "throughput" in jd:
                out["throughput"] = _rows(jd, i, pools) if general else jd["throughput"]
            if "pools" in jd:
                out["types"] = allowed
            if run is not None and "batch" not in run:
                raise ServiceError("invalid_request", f"{where}.running.batch: expected this field to be present",
                                   f"{where}.running.batch", "the running job's global batch", "nothing")
        if not allowed or (has_values and "options" not in out):
            if not may_idle:
                raise ServiceError("invalid_request",
                                   f"{where}: a running job that may not be preempted has no option it may use",
                                   where, "an option in a pool it may use", "none")
            left_out.append(jd["id"])
            continue
        if run is not None and (model_allow or not may_idle):
            out["running"] = {"gpus": run["gpus"], "batch": run.get("batch", run["gpus"])}
            if "restart_cost_s" in run:
                out["running"]["restart_cost_s"] = run["restart_cost_s"]
            if general:
                out["running"]["type"] = run_pool
        built.append((len(slots), i))
        slots.append(None)
        inst_jobs.append(out)
        request_index.append(i)
    priority = None
    if "priority" in doc:
        skip = set(left_out)
        priority = [j for j in doc["priority"] if j not in skip]
    if ctx is None:
        problem = _build_problem(objective, inst_jobs, request_index, model_cluster, cluster, model_allow, general,
                                 penalty, priority, screened)
        return Translation(problem, pools, current, value_jobs, tuple(left_out), tuple(request_index))
    try:
        problem = _with_cached_jobs(cache, ctx, slots, built, priority,  # type: ignore[arg-type]
                                    lambda index: _build_problem(objective, inst_jobs, index, model_cluster, cluster,
                                                                 model_allow, general, penalty, None, screened))
    except (ServiceError, ValidationError):  # worded exactly as without the cache (which jobs came first)
        return translate(doc, screened)
    kept = {i: slots[m] for m, i in built}  # the jobs built now, by request index; the others left out
    pieces = list(found)  # type: ignore[arg-type]
    for i, (jd, key, hit) in enumerate(zip(jobs, keys, found)):  # type: ignore[arg-type]
        if hit is None:
            pieces[i] = entry = CachedJob(kept.get(i), value_jobs.get(jd["id"]), current.get(jd["id"]))
            if key is not None:
                cache.put(key, entry)  # type: ignore[union-attr]
    return Translation(problem, pools, current, value_jobs, tuple(left_out), tuple(request_index), tuple(pieces),
                       ctx)


def _with_cached_jobs(cache: JobCache, ctx: bytes, slots: list[Job | None], built: list[tuple[int, int]],
                      priority: list[str] | None, build: Callable[[list[int]], Problem]) -> Problem:
    """The problem of a request some of whose jobs the cache held (``slots[m]``: the model's job ``m``, None
    where it is built now; ``built``: (model index, request index) of those).  The jobs not cached go through
    the model's checks (``build(request indices)``: a problem of them alone); the request's rules across jobs
    -- distinct ids, priority -- are checked on the whole problem, whose problem-level fields are the ones
    built in this context before: the same ``Cluster`` object from request to request, which ``verify``
    reuses its enumerations by.  ``slots`` is filled in place.

    Raises
    ------
    ServiceError, ValidationError
        As the model's checks do (the caller translates the request again without the cache, to word it).
    """
    template = cache.template(ctx)
    if built or template is None:
        sub = build([i for _, i in built])
        for (m, _), job in zip(built, sub.jobs):
            slots[m] = job
        if template is None:
            template = sub
            cache.put_template(ctx, sub)
    jobs, prio = tuple(slots), tuple(priority) if priority is not None else None
    # Every job passed the model's per-job checks against this context's cluster and objective (the cached
    # ones in the request that built them, the others in ``build`` now), and the ids are distinct in the
    # request: what is left of ``Problem``'s checks is the priority list's; where it fails, the constructor
    # words the error (1 ms of per-job checks at 1,000 jobs otherwise, at every request)
    if prio is None or (len(set(prio)) == len(prio) and set(prio) <= {j.id for j in jobs}):  # type: ignore[union-attr]
        return Problem.assembled(template.cluster, jobs, template.objective,  # type: ignore[arg-type]
                                 template.allow_preemption, template.rescale_penalty, prio, template.node_aware)
    return Problem(template.cluster, jobs, template.objective,  # type: ignore[arg-type]
                   template.allow_preemption, template.rescale_penalty, prio, template.node_aware)


def _build_problem(objective: str, inst_jobs: list[dict[str, Any]], index: Sequence[int], model_cluster: Cluster,
                   cluster: dict[str, Any], model_allow: bool, general: bool, penalty: Any,
                   priority: list[str] | None, screened: bool) -> Problem:
    """The model's problem of the translated jobs, by the model's constructors or loader (errors at the
    request's paths: ``index[m]`` is the request index of ``inst_jobs[m]``)."""
    try:
        if objective == VALUES:
            return _values_problem(inst_jobs, model_cluster, model_allow, priority)
        inst: dict[str, Any] = {
            "format": FORMAT_2 if general else FORMAT_1,
            "cluster": cluster,
            "objective": objective,
            "allow_preemption": model_allow,
            "jobs": inst_jobs,
        }
        if penalty:
            inst["rescale_penalty"] = penalty
        if priority is not None:
            inst["priority"] = priority
        # built here from a request the request schema passed: with its values screened, the loader's
        # schema pass would only repeat that one (10 of 20 ms at 1,000 jobs); the constructors check
        try:
            return problem_from_dict(inst, file="request", _screened=screened, _trusted=screened)
        except ValidationError:
            if not screened:
                raise
            # invalid: worded by every check, as when unscreened (the constructors may name another field
            # first: a row's 1.0 GPUs passes the request schema, and max_local derived from it failed)
            return problem_from_dict(inst, file="request")
    except ValidationError as exc:  # InstanceError too: the model's checks, paths of the model's jobs
        path = _request_path(exc.path, index)
        raise ServiceError("invalid_request", f"{path}: expected {exc.expected}", path, exc.expected,
                           exc.found) from None


def _request_path(path: str, request_index: Sequence[int]) -> str:
    if not request_index:
        return path
    return re.sub(r"^jobs\[(\d+)\]", lambda m: f"jobs[{request_index[int(m.group(1))]}]", path)


#: Request fields that are the service's, not the model's: taken off an instance document before its loader.
SERVICE_FIELDS: tuple[str, ...] = ("id", "op", "solver", "time_limit_s", "reduce", "verify")


def translate_instance(doc: dict[str, Any], screened: bool = False) -> Translation:
    """An instance document of any format ``elasticopt solve`` reads (format 1 or 2), built by the model's
    own loader; the service's fields (:data:`SERVICE_FIELDS`) are taken off first.  Nodes are numbered as
    for a request: pools in document order, from 0; a pool's ``free`` GPUs are its nodes' capacities.

    Raises
    ------
    ServiceError
        ``invalid_request`` with the loader's JSON path, expectation and finding.
    """
    inst = {k: v for k, v in doc.items() if k not in SERVICE_FIELDS}
    try:
        problem = problem_from_dict(inst, file="request", _screened=screened)
    except ValidationError as exc:
        raise ServiceError("invalid_request", f"{exc.path}: expected {exc.expected}", exc.path, exc.expected,
                           exc.found) from None
    return Translation(problem, _pool_nodes(problem.cluster), {})


def _values_problem(jobs: list[dict[str, Any]], cluster: Cluster, allow: bool,
                    priority: list[str] | None, trusted: bool = True) -> Problem:
    """Caller-value jobs through the model's constructors: every field is explicit and every row feasible by
    construction, so the loader's schema pass (the bulk of its time) is skipped; the jobs by
    :meth:`~elasticopt.models.Job.assembled` and their 1.0 tables by
    :meth:`~elasticopt.profiles.throughput.MeasuredThroughput.assembled` (``trusted``), as every field was
    checked by the request schema and :func:`_value_rows` (ids, integers >= 1, finite values, k dividing b),
    else by ``Job(...)``, ``MeasuredThroughput(...)`` and their checks (the same jobs: a test builds both);
    the problem with its checks."""
    built = []
    table = MeasuredThroughput.assembled if trusted else lambda p, pk: MeasuredThroughput(p, packed=pk)
    for jd in jobs:  # options: (pool, gpus, batch, packed) -> value (from _value_rows); throughput 1.0 each
        points: dict[str, dict[tuple[int, int], float]] = {}
        packed: dict[str, dict[tuple[int, int], float]] = {}
        values: dict[tuple[Any, ...], float] = {}
        for (t, k, b, pk), v in jd["options"].items():
            (packed if pk else points).setdefault(t, {})[(k, b)] = 1.0
            values[(t, k, b, "packed") if pk else (t, k, b)] = float(v)
        batches = [key[2] for key in values]
        run = jd.get("running")
        built.append((Job.assembled if trusted else Job)(
            id=jd["id"],
            throughput={t: table(points.get(t, {}), packed.get(t, {})) for t in sorted(set(points) | set(packed))},
            batch_min=min(batches),
            batch_max=max(batches),
            max_local=max(key[2] // key[1] for key in values),
            running=Running(run["gpus"], run["batch"], run.get("type"),
                            restart_cost_s=run.get("restart_cost_s", 0.0)) if run else None,
            values=values,
        ))
    return Problem(cluster, tuple(built), objective="value", allow_preemption=allow,
                   priority=tuple(priority) if priority is not None else None)
