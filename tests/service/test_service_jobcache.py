"""The service's per-job translation cache (elasticopt/service/jobcache.py): a request is answered exactly as
without it -- on random sequences of requests as a host sends them (jobs arriving, leaving, changing value,
starting to run; the cluster, the preemption flag and the priority changing; invalid requests among them) --
and it is used."""

from __future__ import annotations

import copy
import dataclasses
import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elasticopt.generate import generate_instance
from elasticopt.models import problem_to_dict
from elasticopt.profiles import get_profile
from elasticopt.profiles.registry import register_profile, unregister_profile
from elasticopt.service import AllocationService
from elasticopt.service.jobcache import JobCache
from elasticopt.service.translate import translate

from service_helpers import check_response

PROFILE_JOBS = problem_to_dict(generate_instance("paper", 12, 16, seed=3))["jobs"]
ONE_POOL = [{"gpus": 8, "gpus_per_node": 4}, {"gpus": 16, "gpus_per_node": 8}]
POOLS = [{"pools": {"a": {"nodes": 2, "gpus_per_node": 4}, "b": {"nodes": 1, "gpus_per_node": 8}}},
         {"pools": {"a": {"nodes": 1, "gpus_per_node": 4}, "b": {"nodes": 2, "gpus_per_node": 8}}},
         {"pools": {"b": {"nodes": 1, "gpus_per_node": 8}}}]


def _job(kind: str, i: int, rng: random.Random, pools: list[str]) -> dict:
    """One job of a request of ``kind`` (values / throughput / profile)."""
    if kind == "profile":
        return dict(copy.deepcopy(rng.choice(PROFILE_JOBS)), id=f"j{i}")
    if kind == "throughput":
        rate = rng.choice([50.0, 80.0, 100.0])
        job = {"id": f"j{i}", "throughput": [[k, 32 * k, round(rate * k ** rng.choice([0.7, 0.9]), 1)]
                                             for k in (1, 2, 4)]}
        if rng.random() < 0.3:
            job["weight"] = rng.choice([0.5, 2.0])
        return job
    options = [{"gpus": k, "pool": rng.choice(pools), "value": round(rng.uniform(-1, 4), 1)}
               for k in sorted(rng.sample([1, 2, 3, 4, 8], rng.randint(1, 3)))]
    for o in options:
        if rng.random() < 0.3:
            o["nodes"] = -(-o["gpus"] // 4) if o["pool"] == "a" else 1
    options = list({(o["pool"], o["gpus"], o.get("nodes")): o for o in options}.values())
    job = {"id": f"j{i}", "options": options}
    if rng.random() < 0.3:
        job["running"] = {"gpus": 1, "batch": 1, "pool": options[0]["pool"], "nodes": [[0, 1]]}
    if rng.random() < 0.3:
        job["preemptible"] = rng.random() < 0.5
    if rng.random() < 0.2:
        job["pools"] = rng.sample(pools, rng.randint(0, len(pools)))
    if rng.random() < 0.3:
        job["idle_value"] = round(rng.uniform(-1, 1), 1)
    return job


def _request(kind: str, cluster: dict, jobs: list[dict], rng: random.Random, allow: bool) -> dict:
    doc = {"format": "elasticopt-request/1", "cluster": copy.deepcopy(cluster), "jobs": copy.deepcopy(jobs),
           "objective": "values" if kind == "values" else "speedup", "allow_preemption": allow}
    if rng.random() < 0.3:
        doc["priority"] = [j["id"] for j in reversed(jobs)]
    return doc


def _sequence(rng: random.Random, steps: int) -> list[dict]:
    """A host's requests: the first one twice, then one change at a time (some changes make it invalid)."""
    kind = rng.choice(["values", "throughput", "profile"])
    clusters = POOLS if kind == "values" else ONE_POOL
    cluster = rng.choice(clusters)
    names = lambda: list(cluster.get("pools", {"gpu": 0}))  # noqa: E731
    jobs = [_job(kind, i, rng, names()) for i in range(rng.randint(1, 6))]
    allow, nxt = rng.random() < 0.5, 100
    out = [_request(kind, cluster, jobs, rng, allow)]
    out.append(copy.deepcopy(out[0]))
    for _ in range(steps):
        change = rng.choice(["add", "remove", "edit", "edit", "cluster", "allow", "same", "duplicate", "invalid"])
        if change == "add" or not jobs:
            jobs.append(_job(kind, nxt, rng, names()))
            nxt += 1
        elif change == "remove":
            jobs.pop(rng.randrange(len(jobs)))
        elif change == "edit":
            i = rng.randrange(len(jobs))
            jobs[i] = dict(_job(kind, 0, rng, names()), id=jobs[i]["id"])
        elif change == "cluster":
            cluster = rng.choice(clusters)
            if kind == "values":  # options on a pool the cluster lost: the job is re-drawn on the new pools
                jobs = [j if all(o["pool"] in names() for o in j["options"]) else
                        dict(_job(kind, 0, rng, names()), id=j["id"]) for j in jobs]
        elif change == "allow":
            allow = not allow
        doc = _request(kind, cluster, jobs, rng, allow)
        if change == "duplicate":
            doc["jobs"].append(copy.deepcopy(rng.choice(doc["jobs"])))
        elif change == "invalid":
            job = rng.choice(doc["jobs"])
            job["options" if kind == "values" else "id"] = rng.choice([[], "", 3])
        out.append(doc)
    return out


def _answer(service: AllocationService, doc: dict) -> dict:
    resp = check_response(service.handle(json.dumps(doc).encode()))
    resp.pop("timings", None)
    return resp


@settings(max_examples=max(40, settings().max_examples), deadline=None)
@given(rng=st.randoms(use_true_random=False), steps=st.integers(1, 8))
def test_a_request_is_answered_as_without_the_cache(rng: random.Random, steps: int):
    cached, plain = AllocationService(), AllocationService(cache_jobs=0)
    docs = _sequence(rng, steps)
    for n, doc in enumerate(docs):
        assert _answer(cached, doc) == _answer(plain, doc), (n, doc)
    assert len(plain.job_cache) == 0 and plain.job_cache.hits == 0
    first = _answer(plain, docs[0])
    if first["ok"] and docs[0]["jobs"]:
        assert cached.job_cache.hits >= len(docs[0]["jobs"])  # the repeated first request: every job a hit


def _values_request(n: int = 6) -> dict:
    return {"format": "elasticopt-request/1", "objective": "values", "allow_preemption": True,
            "cluster": {"pools": {"a": {"nodes": 2, "gpus_per_node": 4}}},
            "jobs": [{"id": f"j{i}", "options": [{"gpus": k, "value": 1.0 + 0.1 * i * k} for k in (1, 2, 4)]}
                     for i in range(n)]}


def test_a_repeated_request_translates_no_job_again_and_a_changed_job_is_translated():
    service = AllocationService()
    doc = _values_request()
    first = _answer(service, doc)
    assert service.job_cache.hits == 0 and service.job_cache.misses == 6 and len(service.job_cache) == 6
    assert _answer(service, doc) == first
    assert service.job_cache.hits == 6
    doc["jobs"][0]["options"][2]["value"] = 100.0  # j0 on 4 GPUs now worth the most
    changed = _answer(service, doc)
    assert service.job_cache.hits == 11 and service.job_cache.misses == 7
    assert changed["allocation"]["j0"]["gpus"] == 4 and changed["allocation"]["j0"]["value"] == 100.0


def test_the_same_job_in_another_cluster_is_translated_again():
    """Its options' packed flags depend on the pool's GPUs per node: not reused across clusters."""
    cache = JobCache()
    doc = _values_request(1)
    doc["jobs"][0]["options"] = [{"gpus": 4, "value": 2.0, "nodes": 1}]
    assert translate(doc, cache=cache).problem.jobs[0].values == {("a", 4, 4, "packed"): 2.0}
    other = dict(doc, cluster={"pools": {"a": {"nodes": 4, "gpus_per_node": 2}}})
    with pytest.raises(Exception, match="nodes: 4 GPUs need at least 2 nodes"):
        translate(other, cache=cache)  # a cached job would have skipped this check
    assert cache.hits == 0


def test_a_duplicate_id_of_a_job_left_out_is_refused():
    """A job left out of the model (no option above its idle value) under the id of a job in it took that job's
    values in the response: an ``internal`` KeyError (found by the sequences above); the ids are checked in the
    request now, with the request's indices."""
    doc = _values_request(2)
    doc["jobs"].append({"id": "j0", "options": [{"gpus": 1, "value": -1.0}]})
    for service in (AllocationService(), AllocationService(cache_jobs=0)):
        err = _answer(service, doc)["error"]
        assert err["code"] == "invalid_request" and err["path"] == "jobs[2].id"
        assert err["message"] == "jobs[2].id: expected a unique id (jobs[0] has it too)"


def test_a_duplicate_id_next_to_a_cached_job_is_refused_as_without_the_cache():
    service, plain = AllocationService(), AllocationService(cache_jobs=0)
    doc = _values_request(3)
    _answer(service, doc)
    doc["jobs"].append(dict(doc["jobs"][1], options=[{"gpus": 1, "value": 9.0}]))  # j1 again, a new job
    resp = _answer(service, doc)
    assert not resp["ok"] and resp["error"]["path"] == "jobs[3].id" and resp == _answer(plain, doc)


def test_a_profile_registered_again_is_not_served_from_the_cache():
    service = AllocationService()
    job = PROFILE_JOBS[0]
    base = get_profile(job["profile"])
    doc = {"format": "elasticopt-request/1", "cluster": {"gpus": 8, "gpus_per_node": 8},
           "jobs": [dict(job, profile="test-jobcache/model")]}
    try:
        register_profile(dataclasses.replace(base, name="test-jobcache/model"), replace=True)
        before = _answer(service, doc)
        register_profile(dataclasses.replace(base, name="test-jobcache/model"), replace=True)  # registered again
        again = _answer(service, doc)
        assert before["ok"] and service.job_cache.hits == 0 and again == before
        slow = dataclasses.replace(base.params, sync_base_s=100 * base.params.sync_base_s + 1.0,
                                   compute_per_sample_s=10 * base.params.compute_per_sample_s)
        register_profile(dataclasses.replace(base, name="test-jobcache/model", params=slow),
                         replace=True)  # a slower model under the same name: a different answer
        assert service.job_cache.hits == 0 and _answer(service, doc)["objective"] != before["objective"]
    finally:
        unregister_profile("test-jobcache/model")


def test_a_known_job_skips_the_quick_check_but_the_rest_of_the_request_is_still_checked():
    service = AllocationService()
    doc = _values_request(2)
    _answer(service, doc)
    assert service.job_cache.known_valid(service.job_cache.encode(doc["jobs"])) == [True, True]
    bad = dict(doc, time_limit_s="soon")
    resp = _answer(service, bad)
    assert not resp["ok"] and resp["error"]["path"] == "time_limit_s"


def test_the_cache_keeps_at_most_max_jobs_and_refuses_a_bad_size():
    service = AllocationService(cache_jobs=3)
    _answer(service, _values_request(6))
    assert len(service.job_cache) == 3
    assert AllocationService(cache_jobs=0).job_cache.encode([{"id": "a"}]) is None
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="max_jobs: expected an integer >= 0"):
            JobCache(bad)  # type: ignore[arg-type]


def test_serve_takes_cache_jobs_and_refuses_a_bad_count():
    import subprocess
    import sys

    serve = [sys.executable, "-m", "elasticopt", "serve", "--stdio", "--no-warm-up"]
    line = json.dumps(_values_request()) + "\n"
    out = subprocess.run(serve + ["--cache-jobs", "0"], input=line * 2, capture_output=True, text=True, timeout=120)
    first, second = (json.loads(x) for x in out.stdout.splitlines())
    first.pop("timings"), second.pop("timings")
    assert out.returncode == 0 and first["ok"] and first == second
    bad = subprocess.run(serve + ["--cache-jobs", "-1"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--cache-jobs: expected an integer >= 0 (0 keeps none), found '-1'" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_a_known_job_changed_to_hold_a_value_no_parse_accepts_is_refused_as_without_the_cache():
    """Only a job's exact JSON is known: the same job with an integer past 2**53, or past 64 bits (orjson reads
    it as a float), is new, screened, and refused as an uncached service refuses it."""
    service, plain = AllocationService(), AllocationService(cache_jobs=0)
    doc = _values_request(2)
    assert _answer(service, doc)["ok"]
    for big in ("9007199254740993", "123456789012345678901234567890"):
        text = json.dumps(doc).replace('"gpus": 1, "value": 1.0}', '"gpus": %s, "value": 1.0}' % big, 1)
        cached, fresh = service.handle(text.encode()), plain.handle(text.encode())
        cached.pop("timings", None), fresh.pop("timings", None)
        assert not cached["ok"] and cached == fresh and cached["error"]["path"].startswith("jobs[0].options[0]")


def test_threads_sharing_the_cache_get_the_answers_of_a_service_without_it():
    """The HTTP transport answers requests in parallel threads (only the solve is serialised): the cache is
    looked up and filled by several at once."""
    from concurrent.futures import ThreadPoolExecutor

    docs = [doc for seed in range(6) for doc in _sequence(random.Random(seed), 5)]
    plain = AllocationService(cache_jobs=0)
    expected = [_answer(plain, doc) for doc in docs]
    shared = AllocationService(cache_jobs=64)  # small: entries are dropped while others are looked up
    with ThreadPoolExecutor(max_workers=6) as pool:
        for _ in range(2):
            assert list(pool.map(lambda d: _answer(shared, d), docs)) == expected
    assert shared.job_cache.hits > 0 and len(shared.job_cache) <= 64
