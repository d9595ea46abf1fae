"""A stand-in of Sia's simulator interface (siasosp23/artifacts, sia-simulator/cluster.py).

Written from its public code: ``node_infos`` is ``{cluster: {node_idx:
NodeInfo({"nvidia.com/gpu": n}, preemptible=False)}}`` (one cluster per GPU
type, node indices 0..N-1); a job's ``speedup_fn``, ``min_replicas`` and
``max_replicas`` are dicts by cluster (``get_sia_multi_job_info``), with
``age``, ``num_restarts``, ``num_migrations`` set on every call; the policy
is called as ``optimize(job_infos, node_infos, prev_allocations)`` and
returns ``{job: (cluster, [node_idx per replica])}``, read by the cluster as
``cluster, alloc = allocations.get(job, (None, ()))`` and turned into a
placement by grouping consecutive equal node indices.  :func:`accept` raises
on anything the simulator would mis-handle.
"""

from __future__ import annotations

from pollux_standin import GPU, NodeInfo


class SiaJobInfo:
    """``utils.JobInfo`` as Sia's cluster fills it for its policy: per-cluster dicts."""

    def __init__(self, resources, speedup_fn, creation_timestamp, attained_service, min_replicas, max_replicas,
                 preemptible=True):
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


def node_infos(clusters: dict[str, tuple[int, int]]) -> dict[str, dict[int, NodeInfo]]:
    """``Cluster.get_node_infos``: ``{cluster: {idx: NodeInfo}}`` from ``{cluster: (nodes, GPUs per node)}``."""
    return {c: {i: NodeInfo({GPU: g}, preemptible=False) for i in range(n)} for c, (n, g) in clusters.items()}


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
        assert info.min_replicas[cluster] <= len(alloc) <= info.max_replicas[cluster], f"{key}: {len(alloc)} replicas"
        for n in alloc:
            assert isinstance(n, int) and n in nodes[cluster], f"{key}: unknown node {n!r} of {cluster}"
            used[cluster, n] += 1
    for (c, i), n in used.items():
        assert n <= nodes[c][i].resources[GPU], f"{c} node {i}: {n} replicas > {nodes[c][i].resources[GPU]} GPUs"
