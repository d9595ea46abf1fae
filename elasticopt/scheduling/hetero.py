"""Heterogeneous clusters for the simulator: presets, pool files, and workloads whose jobs run on several GPU types.

A cluster is node pools, one per GPU type (:class:`~elasticopt.models.Cluster`).
:func:`cluster_preset` names them: ``sia-64`` (Sia's 64 GPUs: 6 nodes x 4 T4,
2 x 8 A100, 3 x 8 V100), ``sia-N`` (the same proportions with N GPUs), ``gavel-N``
(K80 : P100 : V100 = 1 : 1 : 1 on 4-GPU nodes), ``TYPE:NODESxGPUS,...`` (e.g.
``t4:6x4,a100:2x8``), or a JSON file ``{"pools": {type: {"nodes", "gpus_per_node"}}}``.

:func:`generate_hetero_workload` draws jobs as :func:`generate_workload` does
(Poisson arrivals at a load, Philly sizes and durations), each one a network
with a fitted profile on some of the cluster's types
(:data:`~elasticopt.generate_hetero.NETWORK_PROFILES`; where the types' batch
ranges do not meet, one job kind per type): its throughput per type
(``JobSpec.throughputs``), the batch range all its types accept, and a
submitted type (drawn in proportion to the types' GPUs) with a submitted
(k, b) on it; its work is its duration at that option.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from elasticopt.errors import InstanceError, ValidationError
from elasticopt.models import Cluster
from elasticopt.models.jsontext import describe, read_json
from elasticopt.models.cluster import pool_from_dict
from elasticopt.models.problem import Pool
from elasticopt.models.rules import fits
from elasticopt.scheduling.jobspec import JobSpec
from elasticopt.scheduling.workload_generator import check_workload_size, philly_shapes

__all__ = ["cluster_preset", "generate_hetero_workload"]


def _spec_pools(text: str) -> dict[str, Pool]:
    pools = {}
    for part in text.split(","):
        t, _, shape = part.partition(":")
        nodes, _, g = shape.partition("x")
        if not (t and nodes.isdigit() and g.isdigit() and int(nodes) > 0 and int(g) > 0) or t in pools:
            raise ValidationError("--cluster", "TYPE:NODESxGPUS,... with distinct types (e.g. t4:6x4,a100:2x8)", text)
        pools[t] = Pool(int(nodes), int(g))
    return pools


def _file_pools(path: Path) -> dict[str, Pool]:
    file = str(path)
    doc = read_json(path, "pools file")  # the loader discipline of every input file (elasticopt.models.jsontext)
    pools_doc = doc.get("pools") if isinstance(doc, dict) else None
    if not isinstance(pools_doc, dict) or not pools_doc:
        raise InstanceError(file, "pools", '{"pools": {TYPE: {"nodes": N, "gpus_per_node": G}, ...}}', describe(doc))
    pools = {}
    for t, p in pools_doc.items():
        where = f"pools.{t}"
        if not t:
            raise InstanceError(file, where, "a GPU type name (a non-empty string)", t)
        if not isinstance(p, dict):
            raise InstanceError(file, where, '{"nodes": N >= 1, "gpus_per_node": G >= 1}', describe(p))
        for f in ("nodes", "gpus_per_node"):
            v = p.get(f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InstanceError(file, f"{where}.{f}", "an integer >= 1", describe(v))
        try:
            pools[t] = pool_from_dict(p, where)  # every Pool field; an unknown one (or a size over a limit) is an error
        except ValidationError as exc:
            raise InstanceError(file, exc.path, exc.expected, exc.found, exc.hint) from None
    return pools


def cluster_preset(name: str | os.PathLike[str]) -> Cluster:
    """The cluster a name describes (module docstring).

    Raises
    ------
    ValidationError
        For a name that is none of the forms, naming the forms.
    """
    from elasticopt.generate_hetero import hetero_pools

    text = str(name)
    family, _, size = text.partition("-")
    if family in ("sia", "gavel") and size.isdigit() and int(size) > 0:
        return Cluster(pools=hetero_pools(family, int(size)))
    if text.endswith(".json"):
        return Cluster(pools=_file_pools(Path(text)))
    if ":" in text:
        return Cluster(pools=_spec_pools(text))
    raise ValidationError("--cluster", "sia-64, sia-N, gavel-N, TYPE:NODESxGPUS,... or a pools .json file", text)


def _networks(cluster: Cluster) -> list[tuple[str, dict]]:
    """Networks with a fitted profile on at least one of the cluster's types: (name, type -> model)."""
    from elasticopt.generate_hetero import NETWORK_PROFILES
    from elasticopt.profiles import get_profile, hetero_profile_names, profile_names

    known = set(profile_names()) | set(hetero_profile_names())
    out = []
    for net, by_type in NETWORK_PROFILES.items():
        models = {t: get_profile(p) for t, p in by_type.items() if t in cluster.types and p in known}
        if not models:
            continue
        if max(m.batch_min for m in models.values()) <= min(m.batch_max for m in models.values()):
            out.append((net, models))
        else:  # the types' batch ranges do not meet: one job kind per type
            out.extend((f"{net}@{t}", {t: m}) for t, m in sorted(models.items()))
    if not out:
        raise ValidationError("cluster", "GPU types with fitted profiles (a100, t4, v100, p100, k80)", cluster.types)
    return out


def _submitted(model, k: int, cap: int, rng: np.random.Generator, bmin: int, bmax: int,
               mloc: int) -> tuple[int, int] | None:
    """A feasible (k', b) on ``model``: k' the largest power of two <= k that has one, else the smallest above."""
    sizes = [k >> i for i in range(k.bit_length())] + [k << i for i in range(1, 31) if k << i <= cap]
    for kk in sizes:
        opts = sorted(b for c, b in model.candidates(kk, bmin, bmax) if c == kk and fits(kk, b, kk, kk, bmin, bmax, mloc)
                      and (model.samples_per_s(kk, b) or 0) > 0)
        if opts:
            return kk, int(opts[rng.integers(0, len(opts))])
    return None


def generate_hetero_workload(
    n_jobs: int,
    cluster: Cluster,
    load: float,
    *,
    seed: int = 0,
    duration_max_s: float | None = 48 * 3600.0,
    duration_scale: float = 1.0,
    max_submitted_fraction: float = 0.25,
) -> list[JobSpec]:
    """Jobs for a heterogeneous cluster (module docstring); same seed, same workload.

    Parameters
    ----------
    n_jobs
        Number of jobs.
    cluster
        The pools (their types choose the networks and submitted types).
    load
        Offered load: submitted GPU-seconds arriving per second over the cluster's GPUs.
    seed, duration_max_s, duration_scale, max_submitted_fraction
        As :func:`~elasticopt.scheduling.workload_generator.generate_workload` (the cap is a
        fraction of the submitted type's GPUs).
    """
    check_workload_size(n_jobs, load, seed=seed, duration_max_s=duration_max_s, duration_scale=duration_scale)
    rng = np.random.default_rng(seed)
    nets = _networks(cluster)
    shapes = philly_shapes(n_jobs, rng, None)
    drafts = []
    for i, sh in enumerate(shapes):
        for _try in range(100):  # a network whose submitted option exists on the drawn type
            net, models = nets[int(rng.integers(len(nets)))]
            bmin = max(m.batch_min for m in models.values())
            bmax = min(m.batch_max for m in models.values())
            mloc = max(m.max_local for m in models.values())  # each profile keeps to its own memory
            types = sorted(models)
            weights = np.array([cluster.capacity(t) for t in types], dtype=float)
            t = types[int(rng.choice(len(types), p=weights / weights.sum()))]
            cap = max(1, int(cluster.capacity(t) * max_submitted_fraction))
            k = min(sh.gpus, cap)
            opt = _submitted(models[t], 1 << (k.bit_length() - 1), cap, rng, bmin, bmax, mloc)
            if opt is not None:
                break
        else:
            raise ValidationError("generate_hetero_workload", "networks with a feasible option on the cluster", None)
        d = sh.duration_s * duration_scale
        if duration_max_s is not None:
            d = min(d, duration_max_s)
        drafts.append((i, net, models, t, opt, d, (bmin, bmax, mloc)))
    mean_work = float(np.mean([opt[0] * d for *_, opt, d, _ in drafts]))
    arrivals = np.cumsum(rng.exponential(mean_work / (load * cluster.gpus), len(drafts)))
    arrivals -= arrivals[0]
    jobs = []
    for (i, net, models, t, (k, b), d, (bmin, bmax, mloc)), at in zip(drafts, arrivals.tolist()):
        jobs.append(JobSpec(
            id=f"job-{i:05d}-{net}", throughput=models[t], batch_min=bmin, batch_max=bmax, max_local=mloc,
            total_samples=d * models[t].samples_per_s(k, b), submitted_gpus=k, submitted_batch=b,
            arrival_s=round(at, 3), throughputs=dict(models), submitted_type=t,
        ))
    return jobs
