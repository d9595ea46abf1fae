"""PolluxPolicy inside a stand-in of Pollux's simulator: accepted allocations, exact objective, restarts."""

from __future__ import annotations

import itertools
import math

import pytest

from elasticopt.integrations import pollux
from elasticopt.integrations.pollux import PolluxPolicy, fairness_utility
from pollux_standin import GPU, Cluster, JobInfo, NodeInfo, SimJob, SpeedupFunction

DROPIN = pollux  # the conftest's client fixture uses this file's client


def _jobs(n: int, max_replicas: int = 8) -> list[SimJob]:
    return [
        SimJob(f"job-{i}", submission_time=60.0 * (i // 3), work=600.0 + 300 * (i % 4),
               speedup=SpeedupFunction(alpha=0.05 + 0.1 * (i % 3), beta_node=0.2), max_replicas=max_replicas)
        for i in range(n)
    ]


def test_simulation_runs_to_completion_with_accepted_allocations(client):
    sim = Cluster(PolluxPolicy(client=client), num_nodes=3, gpus_per_node=4, jobs=_jobs(10))
    sim.run()
    assert sim.decisions > 5
    assert all(j.completion_time is not None for j in sim.jobs)


def test_http_transport_gives_the_same_decisions(http_server, client):
    infos = {f"j{i}": _info(i, age=100.0 * (i + 1)) for i in range(5)}
    nodes = {i: NodeInfo({GPU: 4}, preemptible=False) for i in range(2)}
    a_stdio, _ = PolluxPolicy(client=client).optimize(infos, nodes, {}, nodes[0])
    a_http, _ = PolluxPolicy(url=http_server).optimize(infos, nodes, {}, nodes[0])
    assert {k: len(v) for k, v in a_stdio.items()} == {k: len(v) for k, v in a_http.items()}


def _info(i: int, age: float, restarts: int = 0, max_replicas: int = 4, preemptible: bool = True) -> JobInfo:
    info = JobInfo({GPU: 1}, SpeedupFunction(0.1 + 0.15 * i, 0.3), 0.0, 0.0, 0, max_replicas, preemptible)
    info.age, info.num_restarts = age, restarts
    return info


def _lexicographic_value(infos, counts, prev, per_node, p, delta):
    """(jobs with replicas, sum of utilities): the lexicographic variant (``lexicographic=True``)."""
    running, total = 0, 0.0
    for key, k in counts.items():
        if k == 0:
            continue
        info = infos[key]
        s = info.speedup_fn(-(-k // per_node), k)
        cur = len(prev.get(key, []))
        if cur and k != cur:
            s *= max(info.age - info.num_restarts * delta, 0) / (info.age + delta)
        if s <= 0:
            return None
        running += 1
        total += fairness_utility(s, p)
    return running, total


def _pollux_fitness(infos, counts, prev, per_node, nodes, p, delta):
    """Pollux's own fitness (pollux.py ``Problem._evaluate``, restated): the speedup rebased to the fair share
    (ceil(GPUs / jobs) replicas on ceil(nodes / GPUs) nodes), times the dominant share times the node count,
    times the restart factor where the placement changes (a start included), plus 1e-3, power mean with p
    (larger is better)."""
    total_gpus = per_node * nodes
    fair_k, fair_n = -(-total_gpus // len(infos)), -(-nodes // total_gpus)
    terms = []
    for key, info in infos.items():
        k = counts.get(key, 0)
        x = 0.0
        if k:
            x = info.speedup_fn(-(-k // per_node), k) / info.speedup_fn(fair_n, fair_k) / per_node
            if k != len(prev.get(key, [])):
                x *= max(info.age - info.num_restarts * delta, 0.0) / (info.age + delta)
        terms.append(x + 1e-3)
    if p == 0:
        return sum(math.log(max(t - 1e-3, 1e-3)) for t in terms) / len(terms)
    return (sum(t ** p for t in terms) / len(terms)) ** (1.0 / p)


@pytest.mark.parametrize("p", [-1.0, 0.0, 0.5])
@pytest.mark.parametrize("seed", range(4))
def test_decision_is_the_exact_optimum_of_pollux_objective(client, p, seed):
    nodes = {i: NodeInfo({GPU: 2}, preemptible=False) for i in range(2)}
    n = 3 + seed % 3
    # young jobs (5, 30, 105 s...): Pollux's factor on a start makes its optimum differ from "most jobs first"
    infos = {f"j{i}": _info(i + seed, age=5.0 + 25.0 * i * i, restarts=i % 2, max_replicas=3) for i in range(n)}
    prev = {"j0": [0, 0]} if seed % 2 else {"j1": [1]}
    alloc, desired = PolluxPolicy(p_fairness=p, client=client).optimize(infos, nodes, prev, nodes[0])
    assert desired == 2
    got = _pollux_fitness(infos, {k: len(v) for k, v in alloc.items()}, prev, 2, 2, p, 30.0)
    best = max(_pollux_fitness(infos, dict(zip(infos, combo)), prev, 2, 2, p, 30.0)
               for combo in itertools.product(range(4), repeat=n) if sum(combo) <= 4)
    assert got == pytest.approx(best, rel=1e-6)


def test_a_queued_job_that_starts_pays_the_restart_factor(client):
    """Pollux's factor applies to every change of placement: a job of age 10 s (factor 10 / 40) is worth a
    quarter of an equal job of age 1000 s when started, so the older one gets the only GPU; a running job
    keeps its count without the factor."""
    nodes = {0: NodeInfo({GPU: 1}, preemptible=False)}
    infos = {"young": _info(0, age=10.0), "old": _info(0, age=1000.0)}
    req, _ = PolluxPolicy(client=client).build_request(infos, nodes, {})
    by_id = {j["id"]: j["options"][0]["value"] for j in req["jobs"]}
    x_young, x_old = -1.0 / by_id["young"] - 1e-3, -1.0 / by_id["old"] - 1e-3
    assert x_young / x_old == pytest.approx((10.0 / 40.0) / (1000.0 / 1030.0), rel=1e-6)
    req, _ = PolluxPolicy(client=client).build_request(infos, nodes, {"young": [0]})
    kept = {j["id"]: j["options"][0]["value"] for j in req["jobs"]}["young"]
    assert -1.0 / kept - 1e-3 == pytest.approx(x_young * 4.0, rel=1e-6)  # no factor where nothing changes


@pytest.mark.parametrize("seed", range(3))
def test_the_lexicographic_variant_is_its_exact_optimum(client, seed):
    nodes = {i: NodeInfo({GPU: 2}, preemptible=False) for i in range(2)}
    n = 3 + seed % 3
    infos = {f"j{i}": _info(i + seed, age=50.0 + 40 * i, restarts=i % 2, max_replicas=3) for i in range(n)}
    prev = {"j0": [0, 0]} if seed % 2 else {"j1": [1]}
    alloc, _ = PolluxPolicy(client=client, lexicographic=True).optimize(infos, nodes, prev, nodes[0])
    got = _lexicographic_value(infos, {k: len(v) for k, v in alloc.items()}, prev, 2, -1.0, 30.0)
    best = None
    for combo in itertools.product(range(4), repeat=n):
        v = _lexicographic_value(infos, dict(zip(infos, combo)), prev, 2, -1.0, 30.0) if sum(combo) <= 4 else None
        if v is not None and (best is None or (v[0], round(v[1], 9)) > (best[0], round(best[1], 9))):
            best = v
    assert got[0] == best[0] and got[1] == pytest.approx(best[1], abs=1e-5)


def test_the_host_speedup_function_is_called_once_per_job_when_vectorised(client):
    nodes = {i: NodeInfo({GPU: 8}, preemptible=False) for i in range(4)}
    infos = {f"j{i}": _info(i, age=100.0, max_replicas=16) for i in range(6)}
    PolluxPolicy(client=client).optimize(infos, nodes, {}, nodes[0])
    assert [info.speedup_fn.calls for info in infos.values()] == [1] * 6


def test_young_job_with_restarts_keeps_its_replicas(client):
    nodes = {i: NodeInfo({GPU: 4}, preemptible=False) for i in range(2)}
    infos = {"old": _info(0, age=10.0, restarts=1, max_replicas=8)}  # factor (10 - 30) / 40 < 0
    alloc, _ = PolluxPolicy(client=client).optimize(infos, nodes, {"old": [1]}, nodes[0])
    assert alloc["old"] == [1]  # unchanged: no restart, same node


def test_non_preemptible_running_job_is_never_preempted(client):
    nodes = {0: NodeInfo({GPU: 2}, preemptible=False)}
    infos = {f"j{i}": _info(i, age=1000.0 * (3 - i), max_replicas=2) for i in range(3)}
    infos["j2"].preemptible = False
    alloc, _ = PolluxPolicy(client=client).optimize(infos, nodes, {"j2": [0, 0]}, nodes[0])
    assert alloc["j2"]
    assert sum(len(v) for v in alloc.values()) <= 2


def test_more_jobs_than_gpus_runs_as_many_as_fit_oldest_first_on_ties(client):
    nodes = {0: NodeInfo({GPU: 2}, preemptible=False)}
    same = SpeedupFunction(0.1, 0.3)
    infos = {}
    for i in range(4):
        infos[f"j{i}"] = JobInfo({GPU: 1}, same, 0.0, 0.0, 0, 4)
        infos[f"j{i}"].age, infos[f"j{i}"].num_restarts = 100.0 * (i + 1), 0
    alloc, _ = PolluxPolicy(client=client).optimize(infos, nodes, {}, nodes[0])
    assert sorted(k for k, v in alloc.items() if v) == ["j2", "j3"]  # the two oldest, one GPU each


def test_unequal_nodes_are_refused_with_a_clear_error(client):
    nodes = {0: NodeInfo({GPU: 2}, preemptible=False), 1: NodeInfo({GPU: 4}, preemptible=False)}
    with pytest.raises(Exception, match="different GPU counts"):
        PolluxPolicy(client=client).optimize({"a": _info(0, 10.0)}, nodes, {}, nodes[0])
    assert math.isfinite(fairness_utility(2.0, -1.0))


class _LimitClient:
    """A service that ran out of time before any allocation (as the placement fallback can)."""

    def __init__(self):
        self.docs = []

    def request(self, doc):
        self.docs.append(doc)
        return {"ok": True, "status": "limit", "allocation": {}, "message": "time limit"}


def test_a_call_that_ends_at_the_limit_without_an_allocation_keeps_everyone_in_place():
    nodes = {i: NodeInfo({GPU: 4}, preemptible=False) for i in range(2)}
    infos = {"a": _info(0, age=100.0), "b": _info(1, age=50.0)}
    client = _LimitClient()
    alloc, desired = PolluxPolicy(client=client).optimize(infos, nodes, {"a": [0, 0]}, nodes[0])
    assert alloc == {"a": [0, 0], "b": []} and desired == 2
    assert client.docs[0]["time_limit_s"] == 10.0  # bounded by default


def test_spread_offers_each_count_anywhere_at_its_widest_layout_and_runs(client):
    infos = {f"j{i}": _info(i, age=100.0 * (i + 1), max_replicas=6) for i in range(3)}
    nodes = {i: NodeInfo({GPU: 4}, preemptible=False) for i in range(3)}
    doc, _ = PolluxPolicy(client=client, spread=True).build_request(infos, nodes, {})
    for job in doc["jobs"]:
        spans = {(o["gpus"], o["nodes"]) for o in job["options"]}
        for k in range(1, 7):
            assert (k, -(-k // 4)) in spans  # packed, as without spread
            assert (k, min(k, 3)) in spans  # and at its widest layout where that is wider
    plain, _ = PolluxPolicy(client=client).build_request(infos, nodes, {})
    assert all(o["nodes"] == -(-o["gpus"] // 4) for j in plain["jobs"] for o in j["options"])
    sim = Cluster(PolluxPolicy(client=client, spread=True), num_nodes=3, gpus_per_node=4, jobs=_jobs(10))
    sim.run()
    assert all(j.completion_time is not None for j in sim.jobs)


def _fitness_of_lists(infos, alloc, prev, per_node, nodes, p, delta):
    """Pollux's fitness of node lists: every job whose list changes pays the restart factor (a move at the
    same count included), as Pollux's ``Problem._evaluate`` and its simulator's ``reallocate`` do."""
    total_gpus = per_node * nodes
    fair_k, fair_n = -(-total_gpus // len(infos)), -(-nodes // total_gpus)
    terms = []
    for key, info in infos.items():
        got = list(alloc.get(key, []))
        k, x = len(got), 0.0
        if k:
            x = info.speedup_fn(len(set(got)), k) / info.speedup_fn(fair_n, fair_k) / per_node
            if got != list(prev.get(key, [])):
                x *= max(info.age - info.num_restarts * delta, 0.0) / (info.age + delta)
        terms.append(x + 1e-3)
    return -sum(t ** p for t in terms)


def _moved_at_same_count(alloc, prev):
    return sorted(j for j, cur in prev.items() if len(alloc.get(j, [])) == len(cur) and alloc[j] != cur)


def test_priced_moves_keep_running_jobs_where_moving_them_is_worth_less(client):
    """Two young running jobs hold 2 GPUs of nodes 0 and 1; a new job is worth most on a whole node, which
    moves one of them (restart factor 10/75 at age 45 s, one restart). With ``price_moves`` the new job
    takes 2 GPUs beside it instead, and Pollux's own fitness of the answer is higher."""
    nodes = {i: NodeInfo({GPU: 4}, preemptible=False) for i in range(3)}
    infos = {"A": _info(5, age=45.0, restarts=1, max_replicas=2), "B": _info(5, age=45.0, restarts=1, max_replicas=2),
             "D": _info(0, age=5000.0, max_replicas=4), "C": _info(0, age=10.0, max_replicas=4)}
    prev = {"A": [0, 0], "B": [1, 1], "D": [2, 2, 2, 2]}
    plain, _ = PolluxPolicy(client=client, price_moves=False).optimize(infos, nodes, prev, nodes[0])
    priced_policy = PolluxPolicy(client=client, price_moves=True)
    priced, _ = priced_policy.optimize(infos, nodes, prev, nodes[0])
    assert len(_moved_at_same_count(plain, prev)) == 1 and len(plain["C"]) == 4
    assert _moved_at_same_count(priced, prev) == [] and len(set(priced["C"])) == 1
    assert priced_policy.last_response["warnings"] == []
    fit = [_fitness_of_lists(infos, a, prev, 4, 3, -1.0, 30.0) for a in (plain, priced)]
    assert fit[1] > fit[0]


@pytest.mark.parametrize("seed", [0, 1, 2, 5, 17, 19, 26, 38])
def test_priced_moves_never_lower_pollux_fitness(client, seed):
    """Whatever the answer, ``price_moves`` keeps it or one of higher fitness by Pollux's own rule (every job
    whose placement changes restarts): the first answer is among the candidates it compares. Seeds 0 and 1
    move no running job; the others move one at its count without ``price_moves`` (19, 26, 38: a young job
    with restarts, whose factor is 0, so that move costs it its whole value)."""
    rng = __import__("random").Random(seed)
    nodes = {i: NodeInfo({GPU: 4}, preemptible=False) for i in range(3)}
    infos, prev, free = {}, {}, [4, 4, 4]
    for i in range(5):
        info = _info(rng.randrange(6), age=rng.choice([20.0, 45.0, 400.0, 3000.0]), restarts=rng.randrange(3),
                     max_replicas=rng.choice([2, 4, 6]))
        infos[f"j{i}"] = info
        k = rng.choice([0, 1, 2, 3])
        n = rng.randrange(3)
        if k and free[n] >= k:
            prev[f"j{i}"], free[n] = [n] * k, free[n] - k
    plain, _ = PolluxPolicy(client=client, price_moves=False).optimize(infos, nodes, prev, nodes[0])
    priced, _ = PolluxPolicy(client=client, price_moves=True).optimize(infos, nodes, prev, nodes[0])
    assert bool(_moved_at_same_count(plain, prev)) == (seed not in (0, 1))
    fit = [_fitness_of_lists(infos, a, prev, 4, 3, -1.0, 30.0) for a in (plain, priced)]
    assert fit[1] >= fit[0] - 1e-9 * abs(fit[0])
    if seed in (19, 26, 38):
        assert fit[1] > fit[0] + 500  # the zero-valued move is gone


def test_the_requests_that_price_moves_share_the_calls_time_limit(client):
    """A call that prices moves sends no request after its time limit, and each gets what is left of it."""
    import time

    class Slow:
        def __init__(self):
            self.limits = []

        def request(self, doc):
            self.limits.append(doc.get("time_limit_s"))
            time.sleep(0.6)
            return client.request(doc)

    nodes = {i: NodeInfo({GPU: 4}, preemptible=False) for i in range(3)}
    infos = {"A": _info(5, age=45.0, restarts=1, max_replicas=2), "B": _info(5, age=45.0, restarts=1, max_replicas=2),
             "D": _info(0, age=5000.0, max_replicas=4), "C": _info(0, age=10.0, max_replicas=4)}
    prev = {"A": [0, 0], "B": [1, 1], "D": [2, 2, 2, 2]}
    PolluxPolicy(client=client).optimize(infos, nodes, prev, nodes[0])  # the service's start is not this call's
    slow = Slow()
    t0 = time.monotonic()
    PolluxPolicy(client=slow, time_limit_s=1.0).optimize(infos, nodes, prev, nodes[0])
    took = time.monotonic() - t0
    # the first answer moves A (C packed on a whole node); one try (C without 4 replicas) starts before the limit
    assert len(slow.limits) == 2 and slow.limits[0] == 1.0 and 0 < slow.limits[1] < 1.0 - 0.6
    assert took < 1.0 + 0.6 + 0.5  # the last try starts before the limit and takes one request's time
    unlimited = Slow()
    PolluxPolicy(client=unlimited, time_limit_s=None).optimize(infos, nodes, prev, nodes[0])
    assert len(unlimited.limits) == 3 and set(unlimited.limits) == {None}  # C without 4, then without 3 replicas
