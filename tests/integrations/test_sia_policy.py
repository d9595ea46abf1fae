"""SiaPolicy against a stand-in of a Sia-style simulator interface (nodes with GPU types)."""

from __future__ import annotations


import pytest

from elasticopt.integrations import sia
from elasticopt.integrations.sia import SiaPolicy, default_gpu_type
from pollux_standin import GPU, JobInfo, NodeInfo, SpeedupFunction

DROPIN = sia  # the conftest's client fixture uses this file's client


@pytest.fixture(scope="module")
def policy(client):
    return SiaPolicy(client=client)


def _nodes(types: dict[str, tuple[int, int]]) -> dict[str, NodeInfo]:
    return {f"{t}-{i}": NodeInfo({GPU: g}) for t, (n, g) in types.items() for i in range(n)}


def _job(i: int, types, age: float = 100.0, max_replicas: int = 8) -> JobInfo:
    fn = {t: SpeedupFunction(0.05 * (i + 1), 0.2) for t in types}
    info = JobInfo({GPU: 1}, fn, 0.0, 0.0, 0, max_replicas)
    info.age, info.num_restarts = age, 0
    return info


def accept(allocations, job_infos, node_infos) -> None:
    """All replicas of a job on known nodes of one GPU type, within every node's GPUs."""
    used = {k: 0 for k in node_infos}
    for key, alloc in allocations.items():
        assert key in job_infos
        assert len({default_gpu_type(n, node_infos[n]) for n in alloc}) <= 1, f"{key} spans GPU types: {alloc}"
        if alloc:
            assert 1 <= len(alloc) <= job_infos[key].max_replicas
        for n in alloc:
            used[n] += 1
    assert all(used[n] <= node_infos[n].resources[GPU] for n in used)


def test_one_gpu_type_cluster(policy):
    nodes = _nodes({"t4": (3, 4)})
    infos = {f"j{i}": _job(i, ["t4"], age=10.0 * (5 - i)) for i in range(5)}
    alloc, desired = policy.optimize(infos, nodes, {})
    accept(alloc, infos, nodes)
    assert desired == 3 and all(alloc[k] for k in infos)  # 5 jobs, 12 GPUs: everyone runs
    assert sum(len(v) for v in alloc.values()) == 12  # p < 0 with speedups rising in replicas: all GPUs used


def test_running_job_keeps_its_nodes_when_its_count_is_kept(policy):
    nodes = _nodes({"a100": (2, 8)})
    infos = {"old": _job(0, ["a100"], age=5.0, max_replicas=4)}
    infos["old"].num_restarts = 1  # young and restarted: changing it costs more than it gains
    alloc, _ = policy.optimize(infos, nodes, {"old": ["a100-1", "a100-1"]})
    assert alloc["old"] == ["a100-1", "a100-1"]


def test_several_gpu_types_each_job_on_one_type_and_the_faster_type_used(policy):
    nodes = _nodes({"t4": (2, 4), "a100": (1, 8)})
    infos = {f"j{i}": _job(i, ["t4", "a100"], age=10.0 * (4 - i), max_replicas=4) for i in range(3)}
    for info in infos.values():  # an A100 replica is twice a T4 replica
        t4 = info.speedup_fn["t4"]
        info.speedup_fn = {"t4": t4, "a100": lambda n, k, f=t4: 2 * f(n, k)}
    alloc, desired = policy.optimize(infos, nodes, {})
    accept(alloc, infos, nodes)
    assert desired == 3 and all(alloc[k] for k in infos)
    on_a100 = sum(len(v) for v in alloc.values() if v and v[0].startswith("a100"))
    assert on_a100 == 8  # the A100 node is used in full


def test_a_job_restricted_to_one_type_stays_there(policy):
    nodes = _nodes({"t4": (1, 4), "a100": (1, 8)})
    infos = {"only-t4": _job(0, ["t4"], max_replicas=4)}
    alloc, _ = policy.optimize(infos, nodes, {})
    assert alloc["only-t4"] and all(n.startswith("t4") for n in alloc["only-t4"])
