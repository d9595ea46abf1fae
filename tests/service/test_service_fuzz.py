"""Bad requests found by mutation fuzzing: the service answers every one with a structured error at a JSON path,
never ``internal`` (a bug's answer) and never a crash.

The request's schema (fastjsonschema, draft 7) takes ``4.0`` and ``1e300`` for integers, as JSON Schema does; the
model does not (docs/design.md §7). The service built its pools' node lists from the request's cluster before the
model had checked it, so ``cluster.gpus: 4.0`` was an ``internal`` TypeError, ``10**12`` GPUs a list of 1.25e11
nodes (MemoryError), and 14 of 400 mutated instance files sent as requests were ``internal`` errors.
"""

from __future__ import annotations

import copy
import json
import logging
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elasticopt.service import AllocationService
from elasticopt.testing.fuzz import mutate_bytes, run_request

from service_helpers import ROOT, check_response

ONE_POOL = {"format": "elasticopt-request/1", "cluster": {"gpus": 8, "gpus_per_node": 8},
            "jobs": [{"id": "a", "throughput": [[1, 32, 100.0], [2, 64, 180.0]]}]}
POOLS = {"format": "elasticopt-request/1", "cluster": {"pools": {"a": {"nodes": 2, "gpus_per_node": 4}}},
         "objective": "values",
         "jobs": [{"id": "a", "options": [{"gpus": 1, "value": 1.0}, {"gpus": 4, "value": 3.0, "nodes": 1}],
                   "running": {"gpus": 1, "batch": 1, "pool": "a", "nodes": [[0, 1]]}},
                  {"id": "b", "options": [{"gpus": 2, "value": 1.5, "pool": "a"}]}]}


@pytest.fixture(scope="module")
def service() -> AllocationService:
    return AllocationService()


@pytest.mark.parametrize("base,edit,path,expected", [
    (ONE_POOL, lambda d: d["cluster"].update(gpus=4.0), "cluster.gpus", "an integer >= 0"),
    (ONE_POOL, lambda d: d["cluster"].update(gpus=1e300), "cluster.gpus", "an integer >= 0"),
    (ONE_POOL, lambda d: d["cluster"].update(gpus_per_node=8.0), "cluster.gpus_per_node", "an integer >= 1"),
    (ONE_POOL, lambda d: d["cluster"].update(gpus=10**12), "cluster.gpus", "an integer <= 8,388,608"),
    (POOLS, lambda d: d["cluster"]["pools"]["a"].update(nodes=2.0), "cluster.pools.a.nodes", "an integer >= 0"),
    (POOLS, lambda d: d["cluster"]["pools"]["a"].update(nodes=2**30), "cluster.pools.a.nodes",
     "an integer <= 1,048,576"),
])
def test_a_cluster_the_model_refuses_is_an_invalid_request_at_its_path(service, base, edit, path, expected):
    doc = copy.deepcopy(base)
    edit(doc)
    for request in (doc, json.dumps(doc)):  # a parsed object (in-process) and text (the transports)
        resp = check_response(service.handle(request))
        assert not resp["ok"] and resp["error"]["code"] == "invalid_request", resp
        assert resp["error"]["path"] == path and resp["error"]["expected"].startswith(expected), resp


def test_the_same_requests_unmutated_are_answered(service):
    for doc in (ONE_POOL, POOLS, dict(ONE_POOL, cluster={"gpus": 12, "gpus_per_node": 8})):
        resp = check_response(service.handle(json.dumps(doc)))
        assert resp["ok"] and resp["status"] == "optimal", resp


def _sources() -> dict[str, str]:
    out = {"one pool": json.dumps(ONE_POOL), "pools, caller values": json.dumps(POOLS)}
    for name in ("tiny.json", "mixed.json", "infeasible.json", "paper-small.json", "hetero-sia-12.json",
                 "placement-fragmented-12.json"):
        text = (ROOT / "instances" / name).read_text()
        out[name] = text  # as `elasticopt solve` reads it
        out[f"{name} as a request"] = json.dumps(dict(json.loads(text), format="elasticopt-request/1"))
    return out


SOURCES = _sources()


@settings(max_examples=max(150, settings().max_examples), deadline=None)
@given(source=st.sampled_from(sorted(SOURCES)), rng=st.randoms(use_true_random=False))
def test_mutated_requests_are_answered_or_refused_at_a_path_never_internal(service, source, rng: random.Random):
    raw = mutate_bytes(SOURCES[source], rng)
    logging.disable(logging.CRITICAL)  # an internal error is logged with its traceback: the assertion shows it
    try:
        outcome, message = run_request(service, raw)  # the classes of validation/fuzz_cli.py --command serve
    finally:
        logging.disable(logging.NOTSET)
    assert outcome in ("clean error", "solved", "infeasible"), (source, raw[:300], outcome, message)
    check_response(service.handle(raw))


def test_a_value_the_model_refuses_at_compile_time_is_an_invalid_request_at_the_requests_job(service):
    """Values too large for the objective's exact integers are refused as the model compiles them: that was a
    ``solver_error`` at ``solver``; it is the request's fault, at its job (the request's index, not the model's:
    a job no option of which fits is left out of the model before it)."""
    doc = {"format": "elasticopt-request/1", "cluster": {"gpus": 8, "gpus_per_node": 8}, "objective": "values",
           "jobs": [{"id": "too-big", "options": [{"gpus": 64, "value": 1.0}]},
                    {"id": "a", "options": [{"gpus": 1, "value": 1.0}, {"gpus": 2, "value": 1e300}]}]}
    resp = check_response(service.handle(json.dumps(doc)))
    assert not resp["ok"] and resp["error"]["code"] == "invalid_request", resp
    assert resp["error"]["path"] == "jobs[1].values" and "exact integers" in resp["error"]["expected"], resp
