"""Generator families on heterogeneous, node-structured clusters (docs/design.md §2).

``hetero``
    Mixed GPU pools.  ``cluster="sia"`` (default): Sia's 64-GPU cluster scaled
    by G / 64 — 6 nodes x 4 T4, 2 x 8 A100, 3 x 8 V100 (the "others" are
    Gavel's V100 profiles); ``cluster="gavel"``: Gavel's heterogeneous cluster
    (K80 : P100 : V100 = 1 : 1 : 1, 4 GPUs per node) with G GPUs in all.
    Each job is a network with a fitted profile on some of the types (ResNet-50
    has one on every type, YOLOv3 only on T4...), a window of its batch range,
    a GPU limit; about a third run, on a type and nodes of their own.
    Node-aware: each option packed (fewest nodes) or spread.
``placement``
    One pool of 8-GPU nodes, fragmented: on each node a random share of the
    GPUs is held by work outside the problem; running jobs sit on the free
    GPUs of known nodes; sizes that do not divide 8 (3, 5, 6, 12) occur, so
    the totals do not imply placement.

Same seed, same problem.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from elasticopt.models import Cluster, Job, Problem, Running
from elasticopt.models.problem import Pool
from elasticopt.profiles import get_profile, hetero_profile_names, profile_names

__all__ = ["HETERO_FAMILIES", "NETWORK_PROFILES", "hetero_pools"]

#: Network -> per GPU type, its fitted profile (only the types where one was measured).
NETWORK_PROFILES: dict[str, dict[str, str]] = {
    "resnet50": {"a100": "a100/resnet50", "t4": "t4/imagenet", "v100": "v100/resnet50", "p100": "p100/resnet50",
                 "k80": "k80/resnet50"},
    "resnet18-cifar": {"a100": "a100/resnet50_cifar10", "t4": "t4/cifar10", "v100": "v100/resnet18",
                       "p100": "p100/resnet18", "k80": "k80/resnet18"},
    "transformer": {"a100": "a100/bert", "t4": "t4/bert", "v100": "v100/transformer", "p100": "p100/transformer",
                    "k80": "k80/transformer"},
    "lm": {"a100": "a100/gpt2", "v100": "v100/lm", "p100": "p100/lm", "k80": "k80/lm"},
    "recommendation": {"t4": "t4/ncf", "v100": "v100/recommendation", "p100": "p100/recommendation",
                       "k80": "k80/recommendation"},
    "deepspeech2": {"a100": "a100/deepspeech2", "t4": "t4/deepspeech2"},
    "yolov3": {"t4": "t4/yolov3"},
    "vgg16": {"a100": "a100/vgg16"},
}


def _pool_of(gpus: int, g: int) -> Pool:
    """``gpus`` GPUs as nodes of ``g``, the last one partly free when g does not divide them."""
    full, rest = divmod(gpus, g)
    if not rest:
        return Pool(full, g)
    return Pool(full + 1, g, (tuple(range(g)),) * full + (tuple(range(rest)),))


#: Sia's 64-GPU cluster: type -> (GPUs, GPUs per node).
SIA = {"t4": (24, 4), "a100": (16, 8), "v100": (24, 8)}
#: Gavel's heterogeneous cluster (cluster_specs_heterogeneous.json, 300:300:300): type -> (share, GPUs per node).
GAVEL = {"k80": (1, 4), "p100": (1, 4), "v100": (1, 4)}


def hetero_pools(cluster: str, gpus: int) -> dict[str, Pool]:
    """G GPUs split over the types in the cluster's proportions (Sia: exactly its cluster at G = 64)."""
    if cluster == "sia":
        spec = {t: (n / 64, g) for t, (n, g) in SIA.items()}
    elif cluster == "gavel":
        spec = {t: (w / 3, g) for t, (w, g) in GAVEL.items()}
    else:
        from elasticopt.errors import ValidationError

        raise ValidationError("cluster", "'sia' or 'gavel'", cluster)
    counts = {t: int(round(gpus * share)) for t, (share, _) in spec.items()}
    first = next(iter(spec))
    counts[first] += gpus - sum(counts.values())  # the rounding rest goes to the first type
    return {t: _pool_of(c, spec[t][1]) for t, c in counts.items() if c > 0}


def _batch_window(rng, profs: list) -> tuple[int, int, int] | None:
    lo = max(p.batch_min for p in profs)
    hi = min(p.batch_max for p in profs)
    if hi < lo:
        return None
    grid = [b for b in (2**i for i in range(31)) if lo <= b <= hi] or [lo]
    start = int(rng.integers(len(grid)))
    top = grid[min(len(grid) - 1, start + int(rng.integers(0, 2)))]
    return grid[start], top, max(p.max_local for p in profs)


def _running(rng, job: Job, cluster: Cluster, used: dict[str, list[int]]) -> Job:
    """Make ``job`` running on a small option of a type with room, on the fullest-free nodes."""
    opts = [o for o in job.typed_options(cluster, True) if o.gpus <= 8]
    rng.shuffle(opts)
    for o in opts:
        pool = cluster.pools[o.gpu_type]
        left = list(used[o.gpu_type])
        g = pool.gpus_per_node
        span = -(-o.gpus // g) if o.packed else pool.nodes
        order = sorted(range(pool.nodes), key=lambda n: -left[n])[:span]
        need, nodes = o.gpus, []
        for n in order:
            if need <= 0:
                break
            take = min(left[n], need)
            if take:
                left[n] -= take
                need -= take
                nodes.append(n)
        if need > 0:
            continue  # no room on the nodes: try another option
        used[o.gpu_type] = left
        run = Running(o.gpus, o.batch, o.gpu_type, tuple(nodes))
        return replace(job, running=run)
    return job


def _hetero(rng, jobs: int, gpus: int, gpus_per_node: int, *, cluster: str = "sia", running_fraction: float = 0.3,
            **_) -> tuple[Cluster, list[Job], str]:
    pools = hetero_pools(cluster, gpus)
    cl = Cluster(pools=pools)
    known = set(profile_names()) | set(hetero_profile_names())
    nets = []
    for net, by_type in NETWORK_PROFILES.items():
        models = {t: get_profile(p) for t, p in by_type.items() if t in pools and p in known}
        if models:
            nets.append((net, models))
    used = {t: list(p.free_per_node()) for t, p in pools.items()}
    out = []
    for i in range(jobs):
        net, models = nets[int(rng.integers(len(nets)))]
        if len(models) > 1 and rng.random() < 0.3:  # some jobs are restricted to part of the types
            keep = rng.choice(sorted(models), size=int(rng.integers(1, len(models))), replace=False)
            models = {str(t): models[str(t)] for t in sorted(keep)}  # str keys, not numpy strings
        win = _batch_window(rng, list(models.values()))
        if win is None:
            continue
        bmin, bmax, mloc = win
        kcap = 2 ** int(rng.integers(1, 5))  # 2..16 GPUs
        job = Job(f"h{i:04d}-{net}", dict(models), bmin, bmax, mloc, gpus_max=kcap,
                  remaining_samples=float(int(rng.integers(10**6, 10**8))))
        if not job.typed_options(cl, True):
            continue
        if rng.random() < running_fraction:
            job = _running(rng, job, cl, used)
        out.append(job)
    return cl, out, "speedup"


def _placement(rng, jobs: int, gpus: int, gpus_per_node: int, *, running_fraction: float = 0.4,
               busy_fraction: float = 0.25, **_) -> tuple[Cluster, list[Job], str]:
    from elasticopt.models import MeasuredThroughput

    g = 8
    nodes = max(1, gpus // g)
    free = []
    for _n in range(nodes):
        busy = int(rng.binomial(g, busy_fraction))
        idx = sorted(rng.choice(g, size=g - busy, replace=False).tolist())
        free.append(tuple(idx))
    pools = {"a100": Pool(nodes, g, tuple(free))}
    cl = Cluster(pools=pools)
    used = {"a100": [len(f) for f in free]}
    sizes = [1, 2, 3, 4, 5, 6, 8, 12, 16]
    out = []
    for i in range(jobs):
        base = float(rng.uniform(100, 2000))
        alpha = float(rng.uniform(0.6, 0.95))
        spread = float(rng.uniform(0.6, 0.9))  # throughput kept when the job's GPUs are spread
        local = 2 ** int(rng.integers(3, 6))
        kmax = sizes[int(rng.integers(2, len(sizes)))]
        pts, packed = {}, {}
        for k in sizes:
            if k > kmax:
                break
            t = base * k**alpha
            if k == 1:
                pts[(k, k * local)] = round(t, 3)
                continue
            pts[(k, k * local)] = round(t * spread, 3)
            packed[(k, k * local)] = round(t, 3)
        job = Job(f"p{i:04d}", {"a100": MeasuredThroughput(pts, packed=packed)}, local, kmax * local, local,
                  remaining_samples=float(int(rng.integers(10**6, 10**8))))
        if rng.random() < running_fraction:
            job = _running(rng, job, cl, used)
        out.append(job)
    return cl, out, "speedup"


#: Family name -> maker ``(rng, jobs, gpus, gpus_per_node, **options) -> (cluster, jobs, objective)``.
HETERO_FAMILIES = {"hetero": _hetero, "placement": _placement}


def build(family: str, rng, jobs: int, gpus: int, gpus_per_node: int, objective: str | None, **kw) -> Problem:
    """The problem of a family of :data:`HETERO_FAMILIES` (node-aware)."""
    cl, job_list, default = HETERO_FAMILIES[family](rng, jobs, gpus, gpus_per_node, **kw)
    return Problem(cl, tuple(job_list), objective or default, node_aware=True)
