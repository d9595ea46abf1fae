"""GPUs for every job of a target: keep running jobs where they are, place the rest.

The model places an allocation on the nodes from scratch (docs/design.md §2
"Placement"); a job moved to other GPUs pays a restart like any rescale.
Where the executor runs jobs on named GPUs (the simulated one), the
autoscaler turns a policy's target (GPU type, k, packed) per job into GPUs
with :func:`place_targets`, per pool, by the model's one placer keeping
running jobs in place (:func:`elasticopt.models.placement.pack`): a job whose
type and k did not change keeps its GPUs (a packed job only if they are on
its fewest nodes), an unpacked job that shrinks keeps part of them, one that
grows keeps them all and adds GPUs; the others go best fit on the fewest
nodes.  Where keeping jobs in place leaves a packed job no fewest nodes, the
pool is placed as the policy proposed (``Allocation.nodes``: a solver's
placement, which fits the nodes), else packed from scratch, moving jobs.

:func:`order_for_gpus` then orders the executor calls so that no job is put on
GPUs another job still holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from elasticopt.errors import ValidationError
from elasticopt.models import Cluster
from elasticopt.models.placement import pack
from elasticopt.models.problem import Pool
from elasticopt.scheduling.actions import Action, Placed

__all__ = ["place_targets", "order_for_gpus", "gpus_of"]


def gpus_of(placed: Placed) -> set[tuple[str, int, int]]:
    """The GPUs of a placement as ``(type, node, index)`` triples."""
    t, nodes = placed
    return {(t, n, i) for n, ix in nodes for i in ix}


def _place_pool(
    pool: Pool,
    gpu_type: str,
    jobs: Sequence[tuple[str, int, bool]],
    current: Mapping[str, Placed],
) -> tuple[dict[str, Placed] | None, bool]:
    """Keep-in-place placement of one pool's jobs (None if the placer found none); also whether it kept them."""
    cur = []
    for jid, _, _ in jobs:
        c = current.get(jid)
        cur.append(dict(c[1]) if c is not None and c[0] == gpu_type else None)
    res = pack(pool, [(k, packed) for _, k, packed in jobs], cur)
    if res.status != "placed":
        return None, False
    out = {jid: (gpu_type, tuple(sorted(d.items()))) for (jid, _, _), d in zip(jobs, res.nodes)}
    return out, res.kept


def _checked(cluster: Cluster, gpu_type: str, jobs: Sequence[tuple[str, int, bool]],
             proposal: Mapping[str, Placed]) -> dict[str, Placed]:
    """The proposal for one pool's jobs, checked GPU by GPU (ValidationError naming the job)."""
    pool = cluster.pools[gpu_type]  # type: ignore[index]
    free = {(n, i) for n, ix in enumerate(pool.free_gpus()) for i in ix}
    out = {}
    for jid, k, _ in jobs:
        p = proposal.get(jid)
        if p is None or p[0] != gpu_type:
            raise ValidationError(f"allocation.nodes[{jid!r}]", f"a placement on {gpu_type!r}", p)
        mine = {(n, i) for n, ix in p[1] for i in ix}
        if len(mine) != k or sum(len(ix) for _, ix in p[1]) != k or not mine <= free:
            raise ValidationError(f"allocation.nodes[{jid!r}]", f"{k} distinct free GPUs of {gpu_type!r}", p)
        free -= mine
        out[jid] = (gpu_type, tuple(sorted((int(n), tuple(sorted(ix))) for n, ix in p[1])))
    return out


def place_targets(
    cluster: Cluster,
    targets: Mapping[str, tuple[str, int, bool]],
    current: Mapping[str, Placed],
    proposal: Mapping[str, Placed] | None = None,
) -> dict[str, Placed]:
    """GPUs for every job with a target (module docstring).

    Parameters
    ----------
    cluster
        The pools (free GPU indices per node).
    targets
        Job id -> (GPU type, k, packed) for every job that is to hold GPUs, in priority order
        (earlier jobs keep their GPUs first).
    current
        Job id -> where a running job's GPUs are now.
    proposal
        Optional placement of every target job that fits the nodes (a solver's), used for a
        pool where keeping jobs in place would spread a packed job.

    Raises
    ------
    ValidationError
        If a pool's targets exceed its free GPUs, or a proposal used does not fit.
    """
    by_type: dict[str, list[tuple[str, int, bool]]] = {}
    for jid, (t, k, packed) in targets.items():
        if t not in cluster.pools:  # type: ignore[operator]
            raise ValidationError(f"allocation[{jid!r}].gpu_type", "a GPU type of the cluster: "
                                  + ", ".join(cluster.types), t)
        by_type.setdefault(t, []).append((jid, k, packed))
    out: dict[str, Placed] = {}
    for t, jobs in by_type.items():
        pool = cluster.pools[t]  # type: ignore[index]
        need = sum(k for _, k, _ in jobs)
        if need > pool.gpus:
            raise ValidationError(f"allocation[{t!r}]", f"at most the pool's {pool.gpus} free GPUs", need)
        placed, kept = _place_pool(pool, t, jobs, current)
        if not kept and proposal and all(j in proposal for j, _, _ in jobs):
            placed = _checked(cluster, t, jobs, proposal)
        if placed is None:
            raise ValidationError(f"allocation[{t!r}]", "packed jobs that fit the nodes of the pool",
                                  ", ".join(f"{j}:{k}" for j, k, p in jobs if p))
        out.update(placed)
    return out


def order_for_gpus(actions: Sequence[Action], held: Mapping[str, Placed]) -> list[Action]:
    """The actions in an order in which no job is put on GPUs another job still holds.

    ``held``: where every running job's GPUs are before the actions.  The given order (stops,
    shrinks, moves, grows, starts) is kept where it allows; an action waits until the GPUs it
    needs are released.  A cycle (jobs trading GPUs) is broken by stopping one of its jobs first
    and starting it afterwards (a stop and a start instead of a rescale).
    """
    # only jobs with an action change GPUs, and a target's GPUs are free of every job kept as it is:
    # the GPUs to watch are those the acting jobs hold now
    acting = {a.job_id for a in actions}
    holding = {jid: gpus_of(p) for jid, p in held.items() if jid in acting}
    owner = {g: jid for jid, gs in holding.items() for g in gs}
    pending = list(actions)
    out: list[Action] = []

    def apply(act: Action) -> None:
        for g in holding.pop(act.job_id, ()):
            del owner[g]
        if act.placement is not None:
            holding[act.job_id] = gpus_of(act.placement)
            for g in holding[act.job_id]:
                owner[g] = act.job_id
        out.append(act)

    while pending:
        for i, act in enumerate(pending):
            need = gpus_of(act.placement) if act.placement is not None else set()
            if all(owner.get(g, act.job_id) == act.job_id for g in need):
                apply(pending.pop(i))
                break
        else:  # every pending action waits for another: stop the first one's job, start it later
            act = pending.pop(0)
            apply(Action("stop", act.job_id))
            pending.append(Action("start", act.job_id, act.gpus, act.batch, act.placement))
    return out
