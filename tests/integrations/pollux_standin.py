"""A stand-in of Pollux's simulator interface (petuum/adaptdl, osdi21-artifact, simulator/).

Written from the shapes of its public code: ``JobInfo`` / ``NodeInfo``
(``resources`` {"nvidia.com/gpu": n}, ``preemptible``), a speedup function
``speedup_fn(num_nodes, num_replicas)`` relative to one replica (0 for 0
replicas), ``age`` and ``num_restarts`` set by the simulator on every call,
node keys 0..N-1, allocations ``{job: [node key per replica]}`` turned into a
placement by grouping consecutive equal keys, and a restart counted whenever a
job's allocation changes (not its first).  :meth:`Cluster.accept` raises on
anything the simulator would mis-handle.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

GPU = "nvidia.com/gpu"


class NodeInfo:
    """``simulator/utils.py``: ``NodeInfo(resources, preemptible)``, both required."""

    def __init__(self, resources, preemptible):
        self.resources = resources
        self.preemptible = preemptible


class SpeedupFunction:
    """Goodput-style speedup with the calling contract of AdaptDL's ``simulator/speedup.py``: numpy
    scalars or arrays in (its asserts ``0 <= num_nodes <= num_replicas`` and ``(num_nodes > 0) ==
    (num_replicas > 0)`` fail on plain lists, as the real one's do), a Python float out for scalar
    input, an array of the broadcast shape otherwise; 0 for 0 replicas, 1 for one replica on one node.
    Compute scales with replicas, synchronisation grows with replicas and nodes.  ``calls`` counts the
    calls."""

    def __init__(self, alpha: float, beta_node: float):
        self.alpha, self.beta_node = alpha, beta_node
        self.calls = 0

    def _rate(self, nodes: np.ndarray, replicas: np.ndarray) -> np.ndarray:
        sync = self.alpha * np.log2(np.maximum(replicas, 1)) + self.beta_node * np.maximum(nodes - 1, 0)
        return np.where(replicas > 0, replicas / (1.0 + sync), 0.0)

    def __call__(self, num_nodes, num_replicas):
        self.calls += 1
        assert np.all(np.less_equal(0, num_nodes))
        assert np.all(np.less_equal(num_nodes, num_replicas))
        assert np.all((num_nodes > 0) == (num_replicas > 0))
        output_scalar = np.isscalar(num_nodes) and np.isscalar(num_replicas)
        nodes = np.asarray(num_nodes, dtype=float)
        replicas = np.asarray(num_replicas, dtype=float)
        speedup = self._rate(nodes, replicas) / self._rate(np.float64(1), np.float64(1))
        return speedup.item() if output_scalar else speedup


class JobInfo:
    def __init__(self, resources, speedup_fn, creation_timestamp, attained_service, min_replicas, max_replicas,
                 preemptible=True):
        assert max_replicas > 0  # as simulator/utils.py's JobInfo
        assert max_replicas >= min_replicas
        self.resources = resources
        self.speedup_fn = speedup_fn
        self.creation_timestamp = creation_timestamp
        self.attained_service = attained_service
        self.min_replicas = min_replicas
        self.max_replicas = max_replicas
        self.preemptible = preemptible
        self.age = None
        self.num_restarts = None


@dataclass
class SimJob:
    name: str
    submission_time: float
    work: float  # seconds of single-replica progress
    speedup: SpeedupFunction
    max_replicas: int
    preemptible: bool = True
    progress: float = 0.0
    placement: tuple = ()
    num_restarts: int | None = None
    completion_time: float | None = None
    rescale_until: float = 0.0

    def reallocate(self, placement: list[int]) -> None:
        """Pollux's Job.reallocate: a new placement restarts the job (not its first)."""
        if placement:
            self.placement = tuple(placement)
            self.num_restarts = 0 if self.num_restarts is None else self.num_restarts + 1
        else:
            self.placement = ()


@dataclass
class Cluster:
    """The simulator's scheduling loop around ``policy.optimize``."""

    policy: object
    num_nodes: int
    gpus_per_node: int
    jobs: list[SimJob]
    restart_s: float = 30.0
    now: float = 0.0
    allocations: dict = field(default_factory=dict)
    decisions: int = 0

    def node_infos(self):
        return {i: NodeInfo({GPU: self.gpus_per_node}, preemptible=False) for i in range(self.num_nodes)}

    def job_infos(self):
        out = {}
        for job in self.jobs:
            if job.submission_time <= self.now and job.completion_time is None:
                info = JobInfo({GPU: 1}, job.speedup, job.submission_time, job.progress, 0, job.max_replicas,
                               job.preemptible)
                info.age = self.now - job.submission_time
                info.num_restarts = job.num_restarts or 0
                out[job.name] = info
        return out

    def accept(self, allocations, job_infos, node_infos) -> None:
        """Everything the simulator relies on, checked."""
        used = {k: 0 for k in node_infos}
        for key, alloc in allocations.items():
            assert key in job_infos, f"allocation for unknown job {key!r}"
            assert isinstance(alloc, list), f"{key}: allocation must be a list of node keys"
            assert alloc == sorted(alloc), f"{key}: replicas not grouped by node: {alloc}"
            if alloc:
                info = job_infos[key]
                assert info.min_replicas <= len(alloc) <= info.max_replicas, f"{key}: {len(alloc)} replicas"
            for node in alloc:
                assert node in node_infos, f"{key}: unknown node {node!r}"
                used[node] += 1
        for node, n in used.items():
            assert n <= node_infos[node].resources[GPU], f"node {node}: {n} replicas > {node_infos[node].resources[GPU]} GPUs"
        for key, info in job_infos.items():
            if not info.preemptible and self.allocations.get(key):
                assert allocations.get(key), f"non-preemptible running job {key} was preempted"

    def step(self, interval_s: float = 60.0) -> None:
        infos = self.job_infos()
        if infos:
            nodes = self.node_infos()
            self.allocations = {k: v for k, v in self.allocations.items() if k in infos}
            result = self.policy.optimize(infos, nodes, self.allocations, nodes[0])
            allocations, desired = result
            assert isinstance(desired, int) and desired >= 0
            self.accept(allocations, infos, nodes)
            self.decisions += 1
            for job in self.jobs:
                if job.name in infos and allocations.get(job.name) != self.allocations.get(job.name):
                    alloc = allocations.get(job.name, [])
                    placement = []
                    for i in range(len(alloc)):
                        if i == 0 or alloc[i] != alloc[i - 1]:
                            placement.append(1)
                        else:
                            placement[-1] += 1
                    job.reallocate(placement)
                    job.rescale_until = self.now + (self.restart_s if placement else 0.0)
            self.allocations = allocations
        for job in self.jobs:
            if job.placement and job.completion_time is None and job.submission_time <= self.now:
                run = max(0.0, self.now + interval_s - max(self.now, job.rescale_until))
                job.progress += run * job.speedup(len(job.placement), sum(job.placement))
                if job.progress >= job.work:
                    job.completion_time = self.now + interval_s
        self.now += interval_s

    def run(self, max_steps: int = 500) -> None:
        for _ in range(max_steps):
            if all(j.completion_time is not None for j in self.jobs):
                return
            self.step()
        raise AssertionError("jobs did not finish")
