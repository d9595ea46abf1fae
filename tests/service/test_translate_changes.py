"""A session's request translated from its last one (``elasticopt.service.translate_changes``) against the
reference, the whole request's translation: the same problem, jobs in the same order, the same caller
values, current nodes (in the request's order, which the placer reads) and jobs left out."""

from __future__ import annotations

import copy
import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import elasticopt.service.dispatch as dispatch
from elasticopt.service import AllocationService
from elasticopt.service.session import session_update
from elasticopt.service.translate import Translation, translate
from elasticopt.service.translate_changes import CONTEXT_FIELDS, Marks, marks_of

from test_service_jobcache import ONE_POOL, POOLS, _job, _sequence, _values_request


def _same(got: Translation, ref: Translation) -> None:
    p, q = got.problem, ref.problem
    assert p.jobs == q.jobs
    assert (p.cluster, p.objective, p.allow_preemption, p.rescale_penalty, p.priority, p.node_aware) == \
        (q.cluster, q.objective, q.allow_preemption, q.rescale_penalty, q.priority, q.node_aware)
    assert got.pools == ref.pools
    assert list(got.current.items()) == list(ref.current.items())
    assert list(got.value_jobs.items()) == list(ref.value_jobs.items())
    assert (got.left_out, got.request_index) == (ref.left_out, ref.request_index)


class _Spy:
    """translate_changes as the service calls it, each translation it returns checked against the whole
    request's (translated anew, without the cache)."""

    def __init__(self, real):
        self.real, self.used, self.declined = real, 0, 0
        self.failed: list[AssertionError] = []  # (the service answers an exception as an internal error)

    def __call__(self, merged, sent, screened, cache):
        out = self.real(merged, sent, screened, cache)
        if out is None:
            self.declined += 1
            return None
        self.used += 1
        tr, marks = out
        try:
            _same(tr, translate(copy.deepcopy(merged.doc)))
            assert marks == marks_of(merged.doc["jobs"], merged.doc.get("allow_preemption", False))
        except AssertionError as exc:
            self.failed.append(exc)
        return out


def _pool_rows(doc: dict, rng: random.Random) -> dict:
    """Some of a one-pool throughput request's rows written with their pool (which makes the model's format 2)."""
    doc = copy.deepcopy(doc)
    if "pools" not in doc["cluster"]:
        for jd in doc["jobs"]:
            if "throughput" in jd and rng.random() < 0.3:
                jd["throughput"] = [["gpu", *row] if len(row) == 3 else row for row in jd["throughput"]]
    return doc


def _job_changes(rng: random.Random, steps: int) -> list[dict]:
    """A host's requests whose jobs alone change (come, leave, change, start running, change their
    ``preemptible`` or their rows' form), in a fixed context: what the fast path takes."""
    kind = rng.choice(["values", "throughput", "profile"])
    cluster = rng.choice(POOLS if kind == "values" else ONE_POOL)
    names = list(cluster.get("pools", {"gpu": 0}))
    jobs = [_job(kind, i, rng, names) for i in range(rng.randint(1, 8))]
    base = {"format": "elasticopt-request/1", "cluster": cluster, "allow_preemption": rng.random() < 0.5,
            "objective": "values" if kind == "values" else "speedup"}
    ranked = rng.random() < 0.4  # a priority list (some of the jobs, in some order) sent with the changes
    out, nxt = [], 100
    for _ in range(steps + 1):
        out.append(dict(copy.deepcopy(base), jobs=copy.deepcopy(jobs)))
        if ranked:
            out[-1]["priority"] = rng.sample([jd["id"] for jd in jobs], rng.randint(0, len(jobs)))
        for _ in range(rng.randint(1, 3)):
            change = rng.choice(["add", "remove", "edit", "flag"])
            if change == "add" or not jobs:
                jobs.append(_job(kind, nxt, rng, names))
                nxt += 1
            elif change == "remove":
                jobs.pop(rng.randrange(len(jobs)))
            elif change == "edit":
                i = rng.randrange(len(jobs))
                jobs[i] = dict(_job(kind, 0, rng, names), id=jobs[i]["id"])
            elif kind == "values":
                jd = jobs[rng.randrange(len(jobs))]
                jd["preemptible"] = not jd.get("preemptible", False)
    return [_pool_rows(doc, rng) for doc in out]


def _run_session(docs: list[dict]) -> _Spy:
    """``docs`` sent as one session's requests (whole first, then changes) with :class:`_Spy` in the service."""
    real = dispatch.translate_changes
    spy = _Spy(real)
    dispatch.translate_changes = spy
    try:
        service = AllocationService()
        last, revision = None, 0
        for doc in docs:
            try:
                delta = None if last is None else session_update(last, doc, "host", revision)
            except ValueError:
                delta = None
            resp = service.handle(json.dumps(dict(doc, session="host") if delta is None else delta).encode())
            if resp["ok"]:
                last, revision = doc, resp["session"]["revision"]
    finally:
        dispatch.translate_changes = real
    assert not spy.failed, spy.failed[0]
    return spy


@pytest.fixture
def spy(monkeypatch):
    s = _Spy(dispatch.translate_changes)
    monkeypatch.setattr(dispatch, "translate_changes", s)
    return s


TOTAL = {"used": 0}


@settings(max_examples=max(60, settings().max_examples), deadline=None)
@given(rng=st.randoms(use_true_random=False), steps=st.integers(1, 12))
def test_a_translation_from_the_last_one_is_the_whole_requests(rng: random.Random, steps: int):
    spy = _run_session(_job_changes(rng, steps))
    TOTAL["used"] += spy.used


@settings(max_examples=max(30, settings().max_examples), deadline=None)
@given(rng=st.randoms(use_true_random=False), steps=st.integers(1, 8))
def test_the_same_where_the_context_changes_too(rng: random.Random, steps: int):
    """The service's session sequences (cluster, allow_preemption and priority changes, duplicate ids, invalid
    jobs): where the fast path answers, it answers as the whole request's translation."""
    _run_session([_pool_rows(doc, rng) for doc in _sequence(rng, steps)])


def test_the_fast_path_was_taken_by_the_random_sessions():
    """(runs after the property test above: pytest keeps a file's order) not a test that cannot fail."""
    assert TOTAL["used"] >= 100, TOTAL


def test_kept_jobs_are_not_translated_again_and_a_context_field_translates_the_whole(spy):
    service = AllocationService()
    doc = _values_request(6)
    doc["jobs"][1]["running"] = {"gpus": 1, "batch": 1, "nodes": [[0, 1]]}
    assert service.handle(dict(doc, session="s"))["ok"]
    cached = len(service.job_cache)
    new = copy.deepcopy(doc)
    new["jobs"][2]["options"][0]["value"] = 9.0
    new["jobs"].append({"id": "late", "options": [{"gpus": 2, "value": 5.0}]})
    hits, misses = service.job_cache.hits, service.job_cache.misses
    resp = service.handle(session_update(doc, new, "s", 1))
    assert resp["ok"] and spy.used == 1 and not spy.failed
    # only the two upserted jobs went through the job cache (two misses), the four kept ones not at all
    assert (service.job_cache.hits, service.job_cache.misses) == (hits, misses + 2)
    assert len(service.job_cache) == cached + 2
    rev = resp["session"]["revision"]
    resp = service.handle({"format": "elasticopt-request/1", "session": "s", "base": rev, "priority": ["late", "j0"]})
    assert resp["ok"] and spy.used == 2 and spy.declined == 0  # the priority is the whole request's, not a job's
    for field, value in (("allow_preemption", True), ("rescale_penalty", 0.5),
                         ("cluster", {"pools": {"a": {"nodes": 3, "gpus_per_node": 4}}})):
        assert field in CONTEXT_FIELDS
        rev = resp["session"]["revision"]
        resp = service.handle({"format": "elasticopt-request/1", "session": "s", "base": rev, field: value})
        assert resp["ok"] and spy.declined >= 1 and spy.used == 2, field
        spy.declined = 0
    # a running job that may not be preempted among preemptible ones: the model's allow_preemption changes
    rev = resp["session"]["revision"]
    fixed = dict(new["jobs"][1], preemptible=False)
    resp = service.handle({"format": "elasticopt-request/1", "session": "s", "base": rev, "upsert": [fixed]})
    assert resp["ok"] and spy.declined == 1 and spy.used == 2


def test_marks_count_running_flags_and_pool_rows():
    jobs = [{"id": "a", "running": {}}, {"id": "b", "running": {}, "preemptible": False},
            {"id": "c", "throughput": [["gpu", 1, 1, 1.0]]}, {"id": "d", "throughput": [[1, 1, 1.0]]}]
    assert marks_of(jobs, True) == Marks(1, 1, 1)
    assert marks_of(jobs, False) == Marks(0, 2, 1)
    assert marks_of(jobs, True).moved(jobs[:3], jobs[3:], True) == Marks()
