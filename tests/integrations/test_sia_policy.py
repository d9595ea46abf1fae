"""SiaPolicy against a stand-in of Sia's simulator interface (clusters of typed nodes)."""

from __future__ import annotations

import pytest

from elasticopt.integrations import sia
from elasticopt.integrations.sia import SiaPolicy
from pollux_standin import GPU, SpeedupFunction
from sia_standin import SiaJobInfo, accept, node_infos

DROPIN = sia  # the conftest's client fixture uses this file's client


@pytest.fixture(scope="module")
def policy(client):
    return SiaPolicy(client=client)


def _job(i: int, clusters, age: float = 100.0, max_replicas: int = 8, all_clusters=None) -> SiaJobInfo:
    every = list(all_clusters or clusters)
    fn = {c: (SpeedupFunction(0.05 * (i + 1), 0.2) if c in clusters else None) for c in every}
    info = SiaJobInfo({GPU: 1}, fn, 0.0, 0.0, {c: 0 for c in every},
                      {c: (max_replicas if c in clusters else 1) for c in every})
    info.age, info.num_restarts, info.num_migrations = age, 0, 0
    return info


def test_one_gpu_type_cluster(policy):
    nodes = node_infos({"t4": (3, 4)})
    infos = {f"j{i}": _job(i, ["t4"], age=10.0 * (5 - i)) for i in range(5)}
    alloc = policy.optimize(infos, nodes, {})
    accept(alloc, infos, nodes)
    assert all(alloc[k][0] == "t4" and alloc[k][1] for k in infos)  # 5 jobs, 12 GPUs: everyone runs
    assert sum(len(v[1]) for v in alloc.values()) == 12  # p < 0 with speedups rising in replicas: all GPUs used


def test_running_job_keeps_its_nodes_when_its_count_is_kept(policy):
    nodes = node_infos({"a100": (2, 8)})
    infos = {"old": _job(0, ["a100"], age=40.0, max_replicas=4)}
    infos["old"].num_restarts = 1  # restarted once: changing it costs more than it gains
    alloc = policy.optimize(infos, nodes, {"old": ("a100", [1, 1])})
    assert alloc["old"] == ("a100", [1, 1])


def test_several_gpu_types_each_job_on_one_type_and_the_faster_type_used(policy):
    nodes = node_infos({"t4": (2, 4), "a100": (1, 8)})
    infos = {f"j{i}": _job(i, ["t4", "a100"], age=10.0 * (4 - i), max_replicas=4) for i in range(3)}
    for info in infos.values():  # an A100 replica is twice a T4 replica (Sia's one-replica throughputs)
        info.cluster_throughputs = {"t4": 1.0, "a100": 2.0}
    alloc = policy.optimize(infos, nodes, {})
    accept(alloc, infos, nodes)
    assert all(alloc[k][1] for k in infos)
    on_a100 = sum(len(v[1]) for v in alloc.values() if v[0] == "a100")
    assert on_a100 == 8  # the A100 node is used in full


def test_a_job_not_profiled_on_a_type_gets_one_replica_there_at_most(policy):
    nodes = node_infos({"t4": (1, 4), "a100": (1, 8)})
    infos = {"only-t4": _job(0, ["t4"], max_replicas=4, all_clusters=["t4", "a100"])}
    alloc = policy.optimize(infos, nodes, {})
    accept(alloc, infos, nodes)
    cluster, replicas = alloc["only-t4"]
    assert (cluster == "t4" and len(replicas) == 4) or (cluster == "a100" and len(replicas) == 1)
    assert cluster == "t4"  # 4 T4 replicas are worth more than one unprofiled A100 replica


def test_an_idle_job_answers_none_and_an_empty_tuple(policy):
    nodes = node_infos({"t4": (1, 2)})
    infos = {f"j{i}": _job(i, ["t4"], age=10.0 * (3 - i), max_replicas=1) for i in range(3)}
    alloc = policy.optimize(infos, nodes, {})
    accept(alloc, infos, nodes)
    assert sorted(len(v[1]) for v in alloc.values()) == [0, 1, 1]
    assert [v for v in alloc.values() if not v[1]] == [(None, ())]
    assert alloc["j2"] == (None, ())  # the youngest waits


def test_populate_valid_configs_is_accepted(policy):
    assert policy.populate_valid_configs({"t4": 2}, {"t4": 4}, {"t4": 2}) is None
