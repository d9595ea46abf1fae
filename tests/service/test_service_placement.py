"""The packing step: always a valid placement, running jobs kept where they still fit."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import elasticopt.service.placement as placement_module
from elasticopt.service import AllocationService
from elasticopt.service.placement import NodeAssignment, check_placement, place

from service_helpers import ROOT, check_response
from test_service_jobcache import _sequence


@st.composite
def cases(draw):
    nodes = draw(st.lists(st.integers(1, 8), min_size=1, max_size=6))
    free = sum(nodes)
    alloc, current = {}, {}
    # running jobs first: laid out on the nodes for real
    left = list(nodes)
    for j in range(draw(st.integers(0, 4))):
        n = draw(st.integers(0, len(nodes) - 1))
        if left[n] == 0:
            continue
        c = draw(st.integers(1, left[n]))
        left[n] -= c
        keep = draw(st.booleans())
        alloc[f"r{j}"] = c if keep else draw(st.sampled_from([None, max(1, c - 1), c + 1]))
        current[f"r{j}"] = [(n, c)]
    for j in range(draw(st.integers(0, 5))):
        alloc[f"q{j}"] = draw(st.one_of(st.none(), st.integers(1, 8)))
    # drop jobs until the total fits
    for jid in list(alloc):
        if sum(k or 0 for k in alloc.values()) > free:
            alloc[jid] = None
    return nodes, alloc, current


@given(cases())
def test_placement_is_valid_and_keeps_unchanged_running_jobs(case):
    nodes, alloc, current = case
    pl = place(nodes, alloc, current)
    assert check_placement(nodes, alloc, pl) == []
    for jid, k in alloc.items():
        if k and jid in current and sum(c for _, c in current[jid]) == k:
            assert pl.moved[jid] is False and pl.nodes[jid] == tuple(current[jid])


def test_new_job_goes_on_one_node_when_one_has_room_and_spreads_minimally_otherwise():
    pl = place([8, 8, 4], {"a": 4, "b": 12}, {})
    assert pl.nodes["b"] == ((0, 8), (2, 4)) or pl.nodes["b"] == ((0, 8), (1, 4))
    assert len(pl.nodes["a"]) == 1
    assert check_placement([8, 8, 4], {"a": 4, "b": 12}, pl) == []


def test_check_placement_rejects_overfull_nodes_and_miscounts():
    bad = NodeAssignment(nodes={"a": ((0, 5),), "b": ((0, 4),)}, moved={"a": True, "b": True})
    errs = check_placement([8], {"a": 5, "b": 3}, bad)
    assert any("node 0" in e for e in errs) and any("'b'" in e for e in errs)



# -- a pool where no job runs: the solution's own placement is the answer ------------------------------------------

def _answers(docs: list) -> list:
    """Each request's answer by a fresh service, timings dropped."""
    out = []
    for doc in docs:
        resp = AllocationService(cache_jobs=0).handle(json.dumps(doc).encode())
        resp.pop("timings", None)
        out.append(resp)
    return out


@settings(max_examples=30, deadline=None)
@given(rng=st.randoms(use_true_random=False))
def test_a_pool_where_no_job_runs_is_answered_as_the_placer_places_it_from_scratch(rng):
    docs = _sequence(rng, 4)
    answers = _answers(docs)
    with pytest.MonkeyPatch.context() as mp:  # the placer for every pool, as before the solution's was used
        mp.setattr(placement_module, "_solution_nodes", lambda *a: None)
        assert _answers(docs) == answers


def test_the_solution_placement_is_taken_where_no_job_runs_and_busy_gpus_stay_free(monkeypatch):
    doc = dict(json.loads((ROOT / "instances" / "placement-fragmented-12.json").read_text()), id="frag")  # format 2
    taken, real = [], placement_module._solution_nodes
    monkeypatch.setattr(placement_module, "_solution_nodes", lambda *a: taken.append(a[0]) or real(*a))
    resp = check_response(AllocationService().handle(json.dumps(doc).encode()))
    assert resp["ok"] and resp["verified"] and taken, resp
    free, first = {}, 0
    for pool in doc["cluster"]["pools"].values():
        for n in range(pool["nodes"]):
            free[first + n] = len(pool["free"][n]) if "free" in pool else pool["gpus_per_node"]
        first += pool["nodes"]
    used: dict[int, int] = {}
    for a in resp["allocation"].values():
        if a:
            assert sum(c for _, c in a["nodes"]) == a["gpus"] and a["moved"]
            for n, c in a["nodes"]:
                used[n] = used.get(n, 0) + c
    assert used and all(c <= free[n] for n, c in used.items()), (used, free)


@settings(max_examples=20, deadline=None)
@given(rng=st.randoms(use_true_random=False))
def test_a_verified_solution_placement_is_answered_as_the_checked_one(rng):
    """Where ``verify`` passed the solution's own placement, ``check_placement`` is not run again on it: the
    answers equal those of the same requests unverified (every placement checked), and a check of each
    verified answer's allocation by ``check_placement`` finds nothing."""
    docs = _sequence(rng, 4)
    verified, unverified = _answers(docs), _answers([dict(d, verify=False) for d in docs])
    for on, off in zip(verified, unverified):
        assert on["ok"] == off["ok"] and on.get("allocation") == off.get("allocation"), json.dumps([on.get("allocation"), off.get("allocation")])


def test_check_placement_runs_unless_verify_passed_the_solutions_own(monkeypatch):
    doc = dict(json.loads((ROOT / "instances" / "placement-fragmented-12.json").read_text()), id="frag")
    calls, real = [], placement_module.check_placement
    monkeypatch.setattr(placement_module, "check_placement", lambda *a: calls.append(a) or real(*a))
    assert AllocationService().handle(json.dumps(doc).encode())["verified"] and not calls
    assert not AllocationService().handle(json.dumps(dict(doc, verify=False)).encode())["verified"] and calls
