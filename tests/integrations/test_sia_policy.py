"""SiaPolicy against a stand-in of Sia's simulator interface (clusters of typed nodes)."""

from __future__ import annotations

import sys

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


# ---- the host's class, its JobInfos and its objective's parts (stand-in of cluster.py / sia.py) ----------------

import importlib.util  # noqa: E402
from pathlib import Path  # noqa: E402

from sia_standin import Cluster, GoodputSpeedup, install_host, job_info  # noqa: E402

DROPIN_FILE = Path(sia.__file__)


@pytest.fixture
def hosted(tmp_path):
    """The drop-in file loaded fresh next to a host ``sia`` module, as the simulator's folder has it."""
    host = install_host(tmp_path)
    spec = importlib.util.spec_from_file_location("elasticopt_sia_under_test", DROPIN_FILE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    yield host, mod
    sys.modules.pop("sia", None)


def test_the_drop_in_is_the_hosts_class_and_sias_cluster_accepts_it(hosted, client):
    host, mod = hosted
    policy = mod.SiaPolicy(client=client, p_fairness=-0.5, restart_penalty=30)
    cluster = Cluster(policy, host)  # cluster.py:36/:100: isinstance(policy, sia.SiaPolicy) or assert False
    assert issubclass(mod.SiaPolicy, host.SiaPolicy) and mod.HostSiaPolicy is host.SiaPolicy
    policy = mod.SiaPolicy(client=client, p_fairness=-0.5, restart_penalty=30, lambda_a=0.01, lambda_n=1.1,
                           project_throughputs=True, share_max_replicas=True,
                           enable_bsz_tuning=True)  # multi_simulator.py's keywords
    policy.populate_valid_configs({"rtx": 1}, {"rtx": 8}, {"rtx": 3})
    cluster = Cluster(policy, host)
    nodes = node_infos({"rtx": (1, 8)})
    fn = GoodputSpeedup(0.05, 0.2, 10.0)
    infos = {"cifar10-0": job_info("cifar10-0", ["rtx"], {"rtx": fn}, {"rtx": 8})}
    placements = cluster.optimize_policy(infos, nodes)
    assert placements["cifar10-0"] == ("rtx", (8,))


def test_without_the_host_the_file_stands_alone(monkeypatch):
    monkeypatch.setenv("ELASTICOPT_SIA_HOST_MODULE", "no_such_host_module_here")
    spec = importlib.util.spec_from_file_location("elasticopt_sia_alone", DROPIN_FILE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.HostSiaPolicy is object and mod.SiaPolicy.__bases__ == (object,)
    assert mod.restart_penalty_of("imagenet-3") == 250.0 and mod.restart_penalty_of("ncf-1") == 30.0


def test_an_unprofiled_type_is_priced_by_projection_so_no_pool_stays_idle(policy):
    """Three jobs profiled only on the slow type; the fast type (2x by Sia's ratios) has no profile for
    any. Projected, both pools are used in full; the old offer (one replica at the slowest rate) left the
    fast pool idle but for single replicas."""
    nodes = node_infos({"rtx": (1, 4), "dgx": (1, 8)})
    infos = {}
    for i in range(3):
        info = job_info(f"cifar10-{i}", ["rtx", "dgx"], {"rtx": GoodputSpeedup(0.05, 0.2, 10.0)},
                        {"rtx": 8, "dgx": 1}, age=200.0 - i, tput={"rtx": 10.0, "dgx": 20.0})
        info.share_max = True
        infos[f"cifar10-{i}"] = info
    p = SiaPolicy(client=policy.client, share_max_replicas=True)
    alloc = p.optimize(infos, nodes, {})
    accept(alloc, infos, nodes)
    assert sum(len(a) for c, a in alloc.values() if c == "dgx") == 8, alloc  # the fast pool in full
    assert sum(len(a) for c, a in alloc.values() if c == "rtx") == 4, alloc


def test_a_job_profiled_nowhere_starts_on_the_slowest_type_with_a_free_gpu(policy):
    """Sia values its first unit alike on every type; the drop-in breaks that tie toward the slowest type, where
    profiling it costs least (the fast pool stays with jobs whose profiles show they use it)."""
    nodes = node_infos({"dgx": (1, 8), "aws": (1, 4), "rtx": (1, 8)})
    tput = {"rtx": 1.0, "dgx": 3.0, "aws": 0.5}
    infos = {"bert-0": job_info("bert-0", ["dgx", "aws", "rtx"], {}, {"dgx": 1, "aws": 1, "rtx": 1}, tput=tput)}
    assert policy.optimize(infos, nodes, {}) == {"bert-0": ("aws", [0])}
    # the slowest pool full (a running job that may not move): the next slowest
    infos["cifar10-1"] = job_info("cifar10-1", ["dgx", "aws", "rtx"], {}, {"dgx": 4, "aws": 4, "rtx": 4}, tput=tput,
                                  category="rigid", scaling_underway=True)
    alloc = policy.optimize(infos, nodes, {"cifar10-1": ("aws", [0, 0, 0, 0])})
    assert alloc["bert-0"] == ("rtx", [0]) and alloc["cifar10-1"] == ("aws", [0, 0, 0, 0]), alloc
    values = lambda p: [o["value"] for o in p.build_request({"bert-0": infos["bert-0"]}, nodes, {})[0]["jobs"][0][
        "options"]]  # noqa: E731
    slowest = values(policy)
    assert slowest[1] > slowest[2] > slowest[0] and max(slowest) - min(slowest) < 1e-3  # aws > rtx > dgx, a tie
    for how, first in (("fastest", "dgx"), ("alike", None)):
        other = SiaPolicy(client=policy.client, first_unit=how)
        if first:
            assert other.optimize({"bert-0": infos["bert-0"]}, nodes, {}) == {"bert-0": (first, [0])}
        else:
            assert len(set(values(other))) == 1  # Sia: one unit valued alike
    assert SiaPolicy(client=policy.client, first_by_throughput=True).first_unit == "fastest"
    assert SiaPolicy(client=policy.client, first_by_throughput=False).first_unit == "alike"
    with pytest.raises(ValueError, match="first_unit must be one of slowest, alike, fastest, got 'fast'"):
        SiaPolicy(client=policy.client, first_unit="fast")


def test_the_restart_penalty_is_sias_per_model_one(policy):
    """One GPU now, two on offer at speedup 1.6: a cifar10 job (delta 30 s, factor 300/330) rescales, an
    imagenet job (delta 250 s, factor 300/550) of the same age does not."""
    nodes = node_infos({"rtx": (1, 2)})
    fn = GoodputSpeedup(0.25, 0.0, 1.0)  # 2 replicas: 2 / 1.25 = 1.6
    for name, grows in (("cifar10-0", True), ("imagenet-0", False)):
        infos = {name: job_info(name, ["rtx"], {"rtx": fn}, {"rtx": 2}, age=300.0)}
        alloc = policy.optimize(infos, nodes, {name: ("rtx", [0])})
        assert len(alloc[name][1]) == (2 if grows else 1), (name, alloc)
    assert policy.penalty_of("imagenet-0") == 250.0 and policy.penalty_of("deepspeech2-1") == 25.0


def test_restart_penalties_s_override_sias_table(policy):
    """The same cifar10 job with delta 250 s from ``restart_penalties_s`` (factor 300/550, 1.6 x 0.55 < 1) stays
    at one GPU; a job the table does not name keeps Sia's penalty; bad tables are refused."""
    nodes = node_infos({"rtx": (1, 2)})
    fn = GoodputSpeedup(0.25, 0.0, 1.0)
    slow = SiaPolicy(client=policy.client, restart_penalties_s={"cifar": 250, "yolov3": 80})
    infos = {"cifar10-0": job_info("cifar10-0", ["rtx"], {"rtx": fn}, {"rtx": 2}, age=300.0)}
    alloc = slow.optimize(infos, nodes, {"cifar10-0": ("rtx", [0])})
    assert len(alloc["cifar10-0"][1]) == 1, alloc
    assert slow.penalty_of("yolov3-7") == 80.0 and slow.penalty_of("imagenet-0") == 250.0
    assert slow.penalty_of("deepspeech2-1") == 25.0
    for bad in ({"cifar": -1}, {"": 5}, {"cifar": True}, {"cifar": float("nan")}):
        with pytest.raises(ValueError, match="restart_penalties_s: expected"):
            SiaPolicy(client=policy.client, restart_penalties_s=bad)


def test_round_decimals_ties_what_sias_matrix_cannot_tell_apart(policy):
    """A cifar10 job on 1 GPU (s = 1, s^-0.5 = 1), 2 GPUs on offer at s = 2 / (1 + a) x 300/330 = 1.006
    (s^-0.5 = 0.99702): unrounded the move gains 0.003 and is taken; rounded to 2 decimals as Sia's matrix
    holds it both are 1.00 and the tie goes to the current option.  A real gain (s = 1.6 x 300/330, 0.83)
    is still taken; bad values are refused."""
    nodes = node_infos({"rtx": (1, 2)})
    rounded = SiaPolicy(client=policy.client, round_decimals=2)
    a = 2 * 300 / 330 / 1.006 - 1
    for fn, grows_rounded in ((GoodputSpeedup(a, 0.0, 1.0), False), (GoodputSpeedup(0.25, 0.0, 1.0), True)):
        infos = {"cifar10-0": job_info("cifar10-0", ["rtx"], {"rtx": fn}, {"rtx": 2}, age=300.0)}
        assert len(policy.optimize(infos, nodes, {"cifar10-0": ("rtx", [0])})["cifar10-0"][1]) == 2
        alloc = rounded.optimize(infos, nodes, {"cifar10-0": ("rtx", [0])})
        assert len(alloc["cifar10-0"][1]) == (2 if grows_rounded else 1), alloc
    for bad in (-1, 13, 2.0, True, "2"):
        with pytest.raises(ValueError, match="round_decimals: expected"):
            SiaPolicy(client=policy.client, round_decimals=bad)


def test_projection_source_widest_or_sias_first_profiled_type(policy):
    """A job profiled on rtx (first in the host's order, 2 replicas, a = 0.5) and on dgx (8 replicas, a = 0.05),
    not on aws (type ratio 0.5 to each; the stand-in's rate is r / (1 + a log2 r)): aws at 4 GPUs (one node)
    is priced from dgx by default (the type profiled widest: 4 / (1 + 0.05 x 2) x 0.5 = 1.818 x the one-GPU
    rate) and from rtx with ``projection_source="first"``, as Sia's ``_compute_goodputs_v2`` takes
    ``[k for k in speedup_fn if ...][0]`` (4 / (1 + 0.5 x 2) x 0.5 = 1.0); bad names are refused."""
    fns = {"rtx": GoodputSpeedup(0.5, 0.0, 1.0), "dgx": GoodputSpeedup(0.05, 0.0, 1.0)}
    info = job_info("cifar10-0", ["rtx", "dgx", "aws"], fns, {"rtx": 2, "dgx": 8, "aws": 8},
                    tput={"rtx": 1.0, "dgx": 1.0, "aws": 0.5})
    nodes = node_infos({"rtx": (2, 8), "dgx": (2, 8), "aws": (2, 4)})
    keys, per_node = policy._pools(nodes)
    first = SiaPolicy(client=policy.client, projection_source="first")
    for p, want in ((policy, 4 / (1 + 0.05 * 2) * 0.5), (first, 4 / (1 + 0.5 * 2) * 0.5)):
        aws4 = [v for c, k, n, v in p.job_options("cifar10-0", info, keys, per_node) if (c, k) == ("aws", 4)]
        assert aws4 == [pytest.approx(want, rel=1e-6)], (p.projection_source, aws4)
    with pytest.raises(ValueError, match="projection_source must be one of widest, first, got 'last'"):
        SiaPolicy(client=policy.client, projection_source="last")


def test_scale_unit_counts_and_the_replicas_asked_for(policy):
    nodes = node_infos({"dgx": (1, 8)})
    fn = GoodputSpeedup(0.05, 0.2, 1.0)
    infos = {"gpt_pmp-0": job_info("gpt_pmp-0", ["dgx"], {"dgx": fn}, {"dgx": 3}, scale_unit={"dgx": 2})}
    alloc = SiaPolicy(client=policy.client, sia_configs=False).optimize(infos, nodes, {})
    accept(alloc, infos, nodes)
    assert len(alloc["gpt_pmp-0"][1]) == 6  # 3 replicas of 2 GPUs
    assert {r for _, r in fn.points} == {1.0, 2.0, 3.0}  # the speedup is asked for replicas, not GPUs


def test_scaling_underway_keeps_the_allocation(policy):
    nodes = node_infos({"rtx": (1, 4)})
    fast = GoodputSpeedup(0.01, 0.0, 1.0)
    infos = {"old": job_info("cifar10-old", ["rtx"], {"rtx": fast}, {"rtx": 4}, age=1000.0),
             "new": job_info("cifar10-new", ["rtx"], {"rtx": fast}, {"rtx": 4}, age=10.0, scaling_underway=True)}
    alloc = policy.optimize(infos, nodes, {"new": ("rtx", [0, 0, 0])})
    accept(alloc, infos, nodes)
    assert alloc["new"] == ("rtx", [0, 0, 0]) and len(alloc["old"][1]) == 1
    assert policy.last_response is not None


def test_a_rigid_job_gets_its_count_on_its_fastest_type(policy):
    nodes = node_infos({"rtx": (1, 8), "dgx": (1, 8)})
    infos = {"ncf-0": job_info("ncf-0", ["rtx", "dgx"], {}, {"rtx": 4, "dgx": 4}, category="rigid",
                               tput={"rtx": 100.0, "dgx": 300.0})}
    alloc = policy.optimize(infos, nodes, {})
    accept(alloc, infos, nodes)
    assert alloc["ncf-0"] == ("dgx", [0, 0, 0, 0])


def test_sias_config_list_on_request(policy):
    nodes = node_infos({"dgx": (2, 8)})
    fn = GoodputSpeedup(0.05, 0.2, 1.0)
    infos = {"bert-0": job_info("bert-0", ["dgx"], {"dgx": fn}, {"dgx": 6})}
    assert len(policy.optimize(infos, nodes, {})["bert-0"][1]) == 4  # Sia's 1, 2, 4, 8, 16: at most 6 -> 4
    every = SiaPolicy(client=policy.client, sia_configs=False)
    assert len(every.optimize(infos, nodes, {})["bert-0"][1]) == 6  # every count


def test_a_call_that_ends_at_the_limit_without_an_allocation_keeps_everyone_in_place():
    class LimitClient:
        def request(self, doc):
            assert doc["time_limit_s"] == 10.0  # bounded by default
            return {"ok": True, "status": "limit", "allocation": {}, "message": "time limit"}

    nodes = node_infos({"rtx": (1, 4)})
    fn = GoodputSpeedup(0.05, 0.2, 1.0)
    infos = {k: job_info(k, ["rtx"], {"rtx": fn}, {"rtx": 4}) for k in ("a", "b")}
    alloc = SiaPolicy(client=LimitClient()).optimize(infos, nodes, {"a": ("rtx", [0, 0])})
    assert alloc == {"a": ("rtx", [0, 0]), "b": (None, ())}
