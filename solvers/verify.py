"""Independent check of a solution against its problem.

:func:`verify` does not use the option table or any backend: it recomputes each
assigned job's feasibility from the :class:`~elasticopt.models.Job` rules, the
capacity, and the integer objective from the chosen options' values (one objective pass over every
allocated job's options, :func:`~elasticopt.models.objectives.jobs_values`; under an objective whose
values are per option, ``Objective.per_option``, over the options at the chosen (type, k, b) only: the
same report, ``tests/test_verify_per_option.py``).  What it enumerates and prices is a function of
immutable objects (job, cluster, objective, penalty), kept for the same objects, which the service hands
from request to request (``tests/test_verify_reuse.py``).
"""

from __future__ import annotations

import math
from itertools import repeat
from dataclasses import dataclass, field

from elasticopt.errors import ValidationError
from elasticopt.models.placement import place
from elasticopt.models.problem import Job, Option, Problem
from elasticopt.models.objectives import get_objective, jobs_values
from elasticopt.models.table import job_values
from elasticopt.solvers.solution import Solution, Status

__all__ = ["VerifyReport", "verify", "min_gpu_need"]


@dataclass(frozen=True)
class VerifyReport:
    """Outcome of :func:`verify`: ``ok`` iff ``errors`` is empty."""

    ok: bool
    errors: tuple[str, ...] = ()
    objective: int | None = None
    objective_value: float | None = None
    gpus_used: int = 0
    notes: tuple[str, ...] = field(default=())
    values: dict[str, float] = field(default_factory=dict)
    """Per allocated job, the value of its chosen option as recomputed (objective units before scaling)."""

    def __bool__(self) -> bool:
        return self.ok


def min_gpu_need(problem: Problem) -> tuple[int, list[str]]:
    """GPUs the jobs that may not idle need at least, and those jobs.

    A job with no option fitting the cluster counts as needing G + 1.
    """
    G = problem.cluster.gpus
    need, must = 0, []
    for job in problem.jobs:
        if problem.idle_allowed(job):
            continue
        opts = _offered(problem, job)
        need += min(o.gpus for o in opts) if opts else G + 1
        must.append(job.id)
    return need, must


def _offered(problem: Problem, job) -> list[Option]:
    """The job's options that the objective offers (a value that is not nan)."""
    opts = job.typed_options(problem.cluster, problem.node_aware)
    return [o for o, v in zip(opts, job_values(problem, job, opts)) if not math.isnan(v)]


#: What :meth:`Job.typed_options` enumerated, by (job, cluster, node-aware, chosen (type, k, b) or None for all):
#: a pure function of immutable objects, reused for the same objects (the service's job cache hands the same
#: ``Job`` and ``Cluster`` objects from request to request); each entry holds its job and cluster, so their ids
#: cannot be another object's while it lives.  Cleared when full.
_OPTIONS: dict[tuple[int, int, bool, tuple | None], tuple[Job, object, list[Option]]] = {}
_OPTIONS_MAX = 8192

#: Those options priced, by the same key and the objective's object and the rescale penalty: per option
#: ``(type, k, b, packed) -> (Option, v)`` (the first option of that key, as the scan it replaces took).  An
#: option's value is a function of its job, the cluster (the current option's type and nodes), the objective
#: and the penalty alone -- ``verify`` prices the allocated jobs without the others, and the model's objective
#: is a sum over jobs -- so it is reused for the same objects; the entry holds them.  Cleared when full.
_PRICED: dict[tuple, tuple[Job, object, object, dict[tuple[str | None, int, int, bool], tuple[Option, float]]]] = {}


def _typed_options(job: Job, cluster: object, node_aware: bool,
                   at: tuple[str | None, int, int] | None = None) -> list[Option]:
    """``job.typed_options(cluster, node_aware[, {at}])``, reused for the same job and cluster objects."""
    key = (id(job), id(cluster), node_aware, at)
    hit = _OPTIONS.get(key)
    if hit is not None and hit[0] is job and hit[1] is cluster:
        return hit[2]
    opts = job.typed_options(cluster, node_aware, None if at is None else {at})  # type: ignore[arg-type]
    if len(_OPTIONS) >= _OPTIONS_MAX:
        _OPTIONS.clear()
    _OPTIONS[key] = (job, cluster, opts)
    return opts


def _priced_options(problem: Problem, jobs: list[Job], at: list[tuple[str | None, int, int] | None]
                    ) -> list[dict[tuple[str | None, int, int, bool], tuple[Option, float]]]:
    """Per job its options (all, or those at ``at[i]``) by ``(type, k, b, packed)`` with their values
    (:func:`~elasticopt.models.objectives.jobs_values`, one pass over the jobs not priced before)."""
    cluster, aware, penalty = problem.cluster, problem.node_aware, problem.rescale_penalty
    objective = get_objective(problem.objective)
    out: list[dict | None] = []
    missed: list[int] = []
    for i, job in enumerate(jobs):
        hit = _PRICED.get((id(job), id(cluster), aware, at[i], id(objective), penalty))
        if hit is not None and hit[0] is job and hit[1] is cluster and hit[2] is objective:
            out.append(hit[3])
        else:
            out.append(None)
            missed.append(i)
    if missed:
        typed = [_typed_options(jobs[i], cluster, aware, at[i]) for i in missed]
        if len(_PRICED) + len(missed) > _OPTIONS_MAX:
            _PRICED.clear()
        for i, opts, vals in zip(missed, typed, jobs_values(problem, [jobs[i] for i in missed], typed)):
            table: dict[tuple[str | None, int, int, bool], tuple[Option, float]] = {}
            for o, v in zip(opts, vals):
                table.setdefault((o.gpu_type, o.gpus, o.batch, o.packed), (o, v))
            job = jobs[i]
            _PRICED[(id(job), id(cluster), aware, at[i], id(objective), penalty)] = (job, cluster, objective, table)
            out[i] = table
    return out  # type: ignore[return-value]


def _tie(problem: Problem, solution: Solution) -> dict[str, int]:
    if not problem.priority:
        return {}
    p = len(problem.priority)
    return {jid: p - r for r, jid in enumerate(problem.priority)}


def _check_nodes(problem: Problem, solution: Solution, chosen: dict[str, Option], errors: list[str]) -> None:
    """Each running job's GPUs: on free GPUs of nodes of its type, no GPU twice, packed jobs on the fewest nodes."""
    taken: dict[tuple[str, int, int], str] = {}
    for jid, opt in chosen.items():
        nodes = solution.placement.get(jid)
        if nodes is None:
            errors.append(f"job {jid!r} has no placement")
            continue
        pool = problem.cluster.pools[opt.gpu_type]  # type: ignore[index]
        free = pool.free_gpus()
        count = 0
        for name, ix in nodes.items():
            t, _, idx = name.rpartition("/")
            if t != opt.gpu_type or not idx.isdigit() or int(idx) >= pool.nodes:
                errors.append(f"job {jid!r} placed on {name!r}, not a node of type {opt.gpu_type!r}")
                continue
            n = int(idx)
            for gi in ix:
                if gi not in free[n]:
                    errors.append(f"job {jid!r} placed on GPU {gi} of {name!r}, which is not free")
                elif (t, n, gi) in taken:
                    errors.append(f"GPU {gi} of {name!r} given to both {taken[(t, n, gi)]!r} and {jid!r}")
                else:
                    taken[(t, n, gi)] = jid
            count += len(ix)
        if count != opt.gpus:
            errors.append(f"job {jid!r} placed on {count} GPUs, its option has {opt.gpus}")
        if opt.packed and len([1 for ix in nodes.values() if ix]) > -(-opt.gpus // pool.gpus_per_node):
            errors.append(f"job {jid!r} is packed but spans {len(nodes)} nodes, more than ceil(k / g)")


#: Per cluster object: node name ``TYPE/INDEX`` -> its type, and every free GPU as ``(name, index)`` (a pure
#: function of the immutable cluster, which the service hands from request to request; the entry holds it).
_FREE: dict[int, tuple[object, dict[str, str], frozenset[tuple[str, int]]]] = {}


def _free_gpus(cluster) -> tuple[dict[str, str], frozenset[tuple[str, int]]]:
    hit = _FREE.get(id(cluster))
    if hit is not None and hit[0] is cluster:
        return hit[1], hit[2]
    node_type, free = {}, set()
    for t, pool in cluster.pools.items():
        for n, gpus in enumerate(pool.free_gpus()):
            name = f"{t}/{n}"
            node_type[name] = t
            free.update((name, g) for g in gpus)
    if len(_FREE) >= 64:
        _FREE.clear()
    _FREE[id(cluster)] = (cluster, node_type, frozenset(free))
    return node_type, _FREE[id(cluster)][2]


def _nodes_plainly_ok(problem: Problem, solution: Solution, chosen: dict[str, Option]) -> bool:
    """True only where :func:`_check_nodes` finds nothing: every chosen job placed on nodes of its type named
    ``TYPE/INDEX``, on free GPUs, none twice (within a job or across jobs), its GPU count, packed jobs on their
    fewest nodes.  Per job only its nodes' types, its count and its spread; the GPUs of all jobs at once, as
    ``(node, index)`` pairs: all free (a subset of the cluster's free ones) and none twice (as many distinct as
    given) -- in C, not a look-up per GPU (8x faster than GPU by GPU at 1,000 jobs).  False means "not shown
    here": the reference then words what is wrong (a test holds the two to the same verdict)."""
    pools = problem.cluster.pools
    node_type, free = _free_gpus(problem.cluster)
    placement = solution.placement
    given: list[tuple[str, int]] = []
    add = given.extend
    for jid, opt in chosen.items():
        nodes = placement.get(jid)
        if nodes is None:
            return False
        count, spans, t = 0, 0, opt.gpu_type
        for name, ix in nodes.items():
            if node_type.get(name) != t:
                return False
            add(zip(repeat(name), ix))
            count += len(ix)
            spans += 1 if ix else 0
        if count != opt.gpus:
            return False
        if opt.packed and spans > -(-count // pools[t].gpus_per_node):  # type: ignore[index]
            return False
    return free.issuperset(given) and len(set(given)) == len(given)


def _placeable(problem: Problem, chosen: dict[str, Option]) -> str:
    """'placed', 'impossible' or 'unknown': can the chosen options be placed at all (exhaustive search)."""
    worst = "placed"
    for t, pool in problem.cluster.pools.items():  # type: ignore[union-attr]
        packed = [o.gpus for o in chosen.values() if o.gpu_type == t and o.packed]
        loose = [o.gpus for o in chosen.values() if o.gpu_type == t and not o.packed]
        if not packed:
            continue
        res = place(pool, packed, loose).status
        if res == "impossible":
            return res
        if res == "unknown":
            worst = res
    return worst


def verify(problem: Problem, solution: Solution) -> VerifyReport:
    """Recompute feasibility and objective of ``solution`` for ``problem``.

    Parameters
    ----------
    problem
        The problem that was solved.
    solution
        Any backend's solution.

    Returns
    -------
    VerifyReport
        ``ok`` False with the reasons when the allocation is infeasible (an
        option the job does not have, a type over its capacity, packed jobs
        that cannot be placed on the nodes, a placement that is wrong), the
        objective does not match, a claimed INFEASIBLE is wrong, or a bound is
        below the objective.
    """
    if not isinstance(problem, Problem):
        raise ValidationError("problem", "the Problem that was solved", problem)
    if not isinstance(solution, Solution):
        raise ValidationError("solution", "a Solution (what elasticopt.solve returns)", solution)
    errors: list[str] = []
    notes: list[str] = []
    cluster = problem.cluster
    if solution.status is Status.INFEASIBLE:
        need, must = min_gpu_need(problem)
        simple = len(cluster.types) == 1 and not any(o.packed for j in problem.jobs for o in _offered(problem, j))
        if need <= cluster.gpus and simple:
            errors.append(f"claimed INFEASIBLE, but the jobs that must run need {need} <= {cluster.gpus} GPUs")
        return VerifyReport(ok=not errors, errors=tuple(errors))
    if not solution.status.has_allocation or solution.objective is None:
        return VerifyReport(ok=True, notes=(f"status {solution.status.value}: nothing to check",))
    ids = set(problem.job_ids)
    extra = set(solution.allocation) - ids
    if extra:
        errors.append(f"allocation names unknown jobs: {sorted(extra)}")
    bonus = _tie(problem, solution)
    S, B = solution.scale, solution.tie_scale
    used = {t: 0 for t in cluster.types}
    total_u, total_v = 0, 0.0
    chosen: dict[str, Option] = {}
    values: dict[str, float] = {}
    default_type = cluster.types[0] if len(cluster.types) == 1 else None
    placed: list[Job] = []
    keys: list[tuple[str | None, int, int, bool]] = []  # keys[i]: placed[i]'s chosen (type, k, b, packed)
    allocation, gpu_types, packed_of = solution.allocation, solution.gpu_types, solution.packed
    missing = object()
    for job in problem.jobs:
        kb = allocation.get(job.id, missing)
        if kb is None:
            if not problem.idle_allowed(job):
                errors.append(f"running job {job.id!r} left idle but preemption is not allowed")
        elif kb is missing:
            errors.append(f"job {job.id!r} missing from the allocation")
        else:
            placed.append(job)
            keys.append((gpu_types.get(job.id, default_type), kb[0], kb[1],  # type: ignore[index]
                         bool(packed_of.get(job.id, False))))
    # under a per-option objective, price the options at the chosen (type, k, b) alone, packed and not: whether
    # the chosen option is a running job's current one (no rescale penalty) is decided among the options at the
    # current (type, k, b) alone (objectives.current_key), so it is decided as on the full list
    at = [key[:3] for key in keys] if get_objective(problem.objective).per_option else [None] * len(placed)
    for job, key, table in zip(placed, keys, _priced_options(problem, placed, at)):  # (one objective pass
        hit = table.get(key)  # over the jobs not priced before)
        if hit is None or math.isnan(hit[1]):
            t, k, b, packed = key
            what = f"({k} GPUs{'' if t is None else ' of ' + repr(t)}, batch {b}{', packed' if packed else ''})"
            errors.append(f"job {job.id!r}: {what} is not a feasible option")
            continue
        k = key[1]
        opt, v = hit
        chosen[job.id] = opt
        values[job.id] = float(v)
        used[opt.gpu_type] += k
        total_v += v
        total_u += round(v * S) * B + bonus.get(job.id, 0)
    for t, u in used.items():
        cap = cluster.capacity(t)
        if u > cap:
            if len(cluster.types) == 1:
                errors.append(f"allocation uses {u} GPUs, the cluster has {cap}")
            else:
                errors.append(f"allocation uses {u} GPUs of type {t!r}, the cluster has {cap}")
    if not errors:
        if solution.placement:
            if not _nodes_plainly_ok(problem, solution, chosen):
                _check_nodes(problem, solution, chosen, errors)
        else:
            where = _placeable(problem, chosen)
            if where == "impossible":
                errors.append("the allocation fits the GPU totals but its packed jobs cannot be placed on the nodes")
            elif where == "unknown":
                notes.append("placement not proven: the search budget ran out")
    if not errors and total_u != solution.objective:
        errors.append(f"objective is {total_u} recomputed, solution says {solution.objective}")
    if not errors and solution.objective_value is not None:
        if not math.isclose(total_v, solution.objective_value, rel_tol=1e-9, abs_tol=1e-9):
            errors.append(f"float objective is {total_v!r} recomputed, solution says {solution.objective_value!r}")
    if solution.bound is not None and solution.bound < solution.objective:
        errors.append(f"bound {solution.bound} is below the objective {solution.objective}")
    return VerifyReport(
        ok=not errors, errors=tuple(errors), objective=total_u, objective_value=total_v,
        gpus_used=sum(used.values()), notes=tuple(notes), values=values,
    )
