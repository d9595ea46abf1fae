"""A stand-in of Sia's simulator (siasosp23/artifacts aaf7a0d, sia-simulator/cluster.py, sia.py, job.py).

Written from its public code:

- ``node_infos`` is ``{cluster: {node_idx: NodeInfo({"nvidia.com/gpu": n}, preemptible=False)}}`` (one
  cluster per GPU type, node indices 0..N-1);
- ``Cluster`` picks its job objects, ``JobInfo`` s and how it applies answers by
  ``isinstance(policy, sia.SiaPolicy)`` (``cluster.py:36, :184, :344``) and ``assert False`` s on any other
  class (``cluster.py:100``): :class:`Cluster` does the same against the host module :data:`HOST_SIA`
  (written to a folder and imported as ``sia``, as the simulator's own is);
- ``get_sia_multi_job_info``: per-cluster dicts ``speedup_fn`` (None where the job has no profile yet),
  ``min_replicas`` (0), ``max_replicas`` (2 x the most profiled replicas, at least 1; the target count for
  ``rigid`` / ``scale-gpus`` jobs, 1 for ncf), ``scale_unit`` (pipeline stages), plus ``category``,
  ``num_restarts``, ``num_migrations``, ``age``, ``used_gpu_seconds``, ``wasted_gpu_seconds``,
  ``cluster_throughput_ratios`` (``{src: {dst: ratio}}``; for rigid jobs ``{cluster: throughput}``),
  ``cluster_throughputs`` (one-GPU throughput per cluster), ``scaling_underway``;
- answers ``{job: (cluster, [node_idx per GPU])}``, read as ``cluster, alloc = allocations.get(job,
  (None, ()))`` and turned into a placement by grouping consecutive equal node indices.

:func:`accept` raises on anything the simulator would mis-handle.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np

from pollux_standin import GPU, NodeInfo, SpeedupFunction

# The host's sia.py as far as a drop-in meets it: the class the cluster dispatches on, and the per-model
# restart penalties of its policy.
HOST_SIA = '''
def get_restart_penalty(jobname):
    if "deepspeech" in jobname:
        return 25
    elif "imagenet" in jobname:
        return 250
    elif "cifar" in jobname:
        return 30
    elif "bert" in jobname:
        return 120
    elif "yolov3" in jobname:
        return 45
    else:
        return 30


class SiaPolicy(object):
    def __init__(self, p_fairness=-0.5, restart_penalty=30, migrate_penalty=45, lambda_a=0.01, lambda_n=1.1,
                 project_throughputs=False, share_max_replicas=False, sched_interval=60, enable_bsz_tuning=True):
        raise RuntimeError("the host's own SiaPolicy was built")

    def optimize(self, jobs, nodes, base_allocations):
        raise RuntimeError("the host's own SiaPolicy.optimize was called")
'''


def install_host(folder: Path):
    """Write :data:`HOST_SIA` as ``folder/sia.py`` and import it as ``sia`` (replacing any earlier one)."""
    (folder / "sia.py").write_text(HOST_SIA)
    sys.modules.pop("sia", None)
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module("sia")
    finally:
        sys.path.remove(str(folder))


class GoodputSpeedup(SpeedupFunction):
    """Sia's ``SpeedupFunction``: ``__call__`` is the speedup over one replica on this type, ``get_goodput``
    the raw goodput (``base`` samples/s at one replica), both asserting on numpy inputs as the host's."""

    def __init__(self, alpha: float, beta_node: float, base: float):
        super().__init__(alpha, beta_node)
        self.base = base
        self.points: list[tuple[float, float]] = []

    def get_goodput(self, num_nodes, num_replicas, return_speedup_only=False):
        s = self(num_nodes, num_replicas)
        self.points.extend(zip(np.atleast_1d(num_nodes).tolist(), np.atleast_1d(num_replicas).tolist()))
        return s if return_speedup_only else s * self.base


class SiaJobInfo:
    """``utils.JobInfo`` as ``Cluster.get_sia_multi_job_info`` fills it (its asserts included)."""

    def __init__(self, resources, speedup_fn, creation_timestamp, attained_service, min_replicas, max_replicas,
                 preemptible=True):
        for k, v in max_replicas.items():
            assert v > 0, f"max_replicas = 0 for cluster: {k}"
        for k in min_replicas:
            assert min_replicas[k] <= max_replicas[k], "min/max-replicas invalid"
        self.resources = resources
        self.speedup_fn = speedup_fn
        self.creation_timestamp = creation_timestamp
        self.attained_service = attained_service
        self.min_replicas = min_replicas
        self.max_replicas = max_replicas
        self.preemptible = preemptible
        self.age = None
        self.num_restarts = None
        self.num_migrations = None


def job_info(name: str, clusters: list[str], fns: dict, max_replicas: dict, *, age: float = 100.0,
             restarts: int = 0, category: str = "adaptive", scale_unit: dict | None = None,
             tput: dict | None = None, scaling_underway: bool = False, attained: float | None = None) -> SiaJobInfo:
    """One job's ``JobInfo`` as Sia's cluster builds it; ``tput`` the one-GPU throughput per type."""
    tput = tput or {c: 1.0 for c in clusters}
    info = SiaJobInfo({GPU: 1}, {c: fns.get(c) for c in clusters}, 0.0,
                      age if attained is None else attained, {c: 0 for c in clusters}, dict(max_replicas))
    info.used_gpu_seconds, info.wasted_gpu_seconds = 0.0, 0.0
    info.category = category
    info.num_restarts, info.num_migrations, info.age = restarts, 0, age
    info.cluster_throughput_ratios = {c: {d: tput[c] / tput[d] for d in clusters if d != c} for c in clusters}
    info.cluster_throughputs = dict(tput)
    if category == "rigid":
        info.cluster_throughput_ratios = dict(tput)  # Sia: a rigid job's throughputs per type
    info.scaling_underway = scaling_underway
    info.scale_unit = dict(scale_unit or {c: 1 for c in clusters})
    return info


def node_infos(clusters: dict[str, tuple[int, int]]) -> dict[str, dict[int, NodeInfo]]:
    """``Cluster.get_node_infos``: ``{cluster: {idx: NodeInfo}}`` from ``{cluster: (nodes, GPUs per node)}``."""
    return {c: {i: NodeInfo({GPU: g}, preemptible=False) for i in range(n)} for c, (n, g) in clusters.items()}


class Cluster:
    """``cluster.Cluster``'s policy dispatch: only an instance of the host's ``sia.SiaPolicy`` gets Sia's job
    infos and answers applied as ``(cluster, alloc)``; anything else is refused as the host refuses it."""

    def __init__(self, policy, host):
        if isinstance(policy, host.SiaPolicy):
            self.kind = "sia"
        else:
            assert False, f"unsupported policy {policy.__class__.__name__}"
        self.policy = policy
        self.allocations: dict = {}

    def optimize_policy(self, job_infos, nodes):
        allocations = self.policy.optimize(job_infos, nodes, self.allocations)
        accept(allocations, job_infos, nodes)
        placements = {}
        for job in job_infos:
            cluster, alloc = allocations.get(job, (None, ()))
            placement = []
            for i in range(len(alloc)):
                if i == 0 or alloc[i] != alloc[i - 1]:
                    placement.append(1)
                else:
                    placement[-1] += 1
            placements[job] = (cluster, tuple(placement))
        self.allocations = allocations
        return placements


def accept(allocations, job_infos, nodes) -> None:
    """What ``Cluster.optimize_policy`` relies on, checked."""
    used = {(c, i): 0 for c in nodes for i in nodes[c]}
    for key in allocations:
        assert key in job_infos, f"allocation for unknown job {key!r}"
    for key, info in job_infos.items():
        assert key in allocations, f"{key}: no entry (Sia's policy answers for every job)"
        cluster, alloc = allocations.get(key, (None, ()))
        if cluster is None:
            assert len(alloc) == 0, f"{key}: replicas without a cluster"
            continue
        assert cluster in nodes, f"{key}: unknown cluster {cluster!r}"
        assert list(alloc) == sorted(alloc), f"{key}: replicas not grouped by node: {alloc}"
        assert len(alloc) >= 1
        unit = info.scale_unit[cluster] if isinstance(getattr(info, "scale_unit", None), dict) else 1
        assert len(alloc) % unit == 0, f"{key}: {len(alloc)} GPUs, not a multiple of its scale unit {unit}"
        bound = max(info.max_replicas.values()) if getattr(info, "share_max", False) else info.max_replicas[cluster]
        assert info.min_replicas[cluster] <= len(alloc) // unit <= bound, f"{key}: {len(alloc)} GPUs"
        for n in alloc:
            assert isinstance(n, int) and n in nodes[cluster], f"{key}: unknown node {n!r} of {cluster}"
            used[cluster, n] += 1
    for (c, i), n in used.items():
        assert n <= nodes[c][i].resources[GPU], f"{c} node {i}: {n} replicas > {nodes[c][i].resources[GPU]} GPUs"
