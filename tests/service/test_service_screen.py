"""The quick job check (service/screen.py) is sufficient for the request schema, and validate_request answers
exactly what the compiled schema alone answers (same acceptance, same error), on valid and mutated requests."""

from __future__ import annotations

import copy

import fastjsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from elasticopt.service.protocol import ServiceError, request_validator, validate_request
from elasticopt.service.screen import jobs_plainly_valid

_pos = st.integers(1, 64)
_num = st.one_of(st.integers(-5, 1000), st.floats(-10.0, 1e4, allow_nan=False))
_name = st.sampled_from(["a", "v100", "k80", "j-1"])

_option = st.fixed_dictionaries(
    {"gpus": _pos, "value": _num},
    optional={"batch": _pos, "nodes": _pos, "pool": _name},
)
_row3 = st.tuples(_pos, _pos, st.floats(0.5, 1e4)).map(list)
_row4 = st.tuples(_name, _pos, _pos, st.floats(0.5, 1e4)).map(list)
_row5 = st.tuples(_name, _pos, _pos, st.floats(0.5, 1e4), st.just("packed")).map(list)
_running = st.fixed_dictionaries(
    {"gpus": _pos},
    optional={"batch": _pos, "pool": _name, "restart_cost_s": st.floats(0, 100),
              "nodes": st.lists(st.tuples(st.integers(0, 9), _pos).map(list), max_size=3)},
)
_extra = {
    "idle_value": _num, "preemptible": st.booleans(), "running": _running, "pools": st.lists(_name, max_size=2),
    "remaining_samples": st.floats(1, 1e6), "weight": st.floats(0.1, 10), "progress": st.sampled_from(
        ["samples", "goodput"]),
    "batch": st.fixed_dictionaries({}, optional={"min": _pos, "max": _pos, "max_local": _pos}),
    "gpus": st.fixed_dictionaries({}, optional={"min": _pos, "max": _pos}),
}
_job = st.one_of(
    st.fixed_dictionaries({"id": _name, "options": st.lists(_option, min_size=1, max_size=4)}, optional=_extra),
    st.fixed_dictionaries({"id": _name, "profile": st.sampled_from(["resnet50", "x"])}, optional=_extra),
    st.fixed_dictionaries({"id": _name, "throughput": st.lists(st.one_of(_row3, _row4, _row5), min_size=1,
                                                                max_size=3)}, optional=_extra),
)
#: what a mutation puts in place of a value
_junk = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(-2, 2, allow_nan=False), st.just(""),
                  st.just("packed"), st.builds(list), st.builds(dict), st.builds(lambda: [1, 2]), st.just(1.0),
                  st.just(True))  # fresh containers: a mutation may change them


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


@st.composite
def _mutated(draw):
    job = draw(_job)
    for _ in range(draw(st.integers(0, 2))):
        paths = [p for p in _paths(job) if p]
        kind = draw(st.sampled_from(["replace", "delete", "add"]))
        path = draw(st.sampled_from(paths)) if paths else ()
        parent = job
        for step in path[:-1]:
            parent = parent[step]
        if kind == "replace" and path:
            parent[path[-1]] = draw(_junk)
        elif kind == "delete" and path:
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.sampled_from(["extra", "options", "profile", "throughput", "id", "value", "gpus"]))] = \
                draw(_junk)
        elif isinstance(parent, list):
            parent.append(draw(_junk))
    return job


def _outcome(doc):
    try:
        validate_request(doc)
    except ServiceError as exc:
        return exc.to_dict()
    return "ok"


def _full(doc):
    """validate_request's answer with the compiled schema alone (the path before the quick check)."""
    try:
        request_validator()(copy.deepcopy(doc))
    except fastjsonschema.JsonSchemaValueException:
        return False
    return True


@settings(max_examples=400, deadline=None)
@given(st.lists(_mutated(), max_size=3), st.booleans())
def test_the_quick_check_is_sufficient_and_validate_request_agrees_with_the_schema(jobs, good_top):
    doc = {"format": "elasticopt-request/1", "cluster": {"gpus": 8}, "jobs": jobs}
    if not good_top:
        doc["objective"] = 3  # the rest of the request breaks the schema
    if jobs_plainly_valid(jobs):
        assert all(_full({"format": "elasticopt-request/1", "jobs": [j]}) for j in jobs)
    out = _outcome(doc)
    assert (out == "ok") == _full(doc)


@settings(max_examples=200, deadline=None)
@given(st.lists(_job, min_size=1, max_size=3))
def test_valid_jobs_take_the_quick_check(jobs):
    ok = all(_full({"format": "elasticopt-request/1", "jobs": [j]}) for j in jobs)
    assert jobs_plainly_valid(jobs) == ok  # every valid shape generated here is recognised


_value_option = st.fixed_dictionaries(
    {"gpus": st.sampled_from([1, 2, 4, 8]), "value": st.floats(-5, 50, allow_nan=False)},
    optional={"batch": st.sampled_from([8, 16, 24]), "nodes": st.sampled_from([2, 3, 1]),  # mostly valid
              "pool": st.sampled_from(["a", "b"])},
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.lists(_value_option, min_size=1, max_size=5), st.booleans(), st.booleans(),
                          st.floats(-2, 5)), max_size=5))
def test_assembled_value_jobs_equal_checked_ones(specs):
    """translate's caller-value jobs by Job.assembled equal those Job(...) builds with its checks (or both fail)."""
    from functools import partial
    from unittest import mock

    from elasticopt.service import translate as tr_mod

    jobs = []
    for i, (opts, running, preemptible, idle) in enumerate(specs):
        jd = {"id": f"j{i}", "options": opts, "idle_value": idle, "preemptible": preemptible}
        if running:
            jd["running"] = {"gpus": opts[0]["gpus"], "batch": opts[0].get("batch", opts[0]["gpus"]),
                             "pool": opts[0].get("pool", "a")}
        jobs.append(jd)
    doc = {"format": "elasticopt-request/1", "objective": "values", "jobs": jobs,
           "cluster": {"pools": {"a": {"nodes": 2, "gpus_per_node": 4}, "b": {"nodes": 1, "gpus_per_node": 8}}}}

    def outcome():
        try:
            validate_request(copy.deepcopy(doc))
            return tr_mod.translate(copy.deepcopy(doc)).problem
        except ServiceError as exc:
            return exc.to_dict()

    fast = outcome()
    with mock.patch.object(tr_mod, "_values_problem", partial(tr_mod._values_problem, trusted=False)):
        checked = outcome()
    assert type(fast) is type(checked)
    if isinstance(fast, dict):
        assert fast == checked
    else:
        assert fast.jobs == checked.jobs and fast == checked
        assert all(type(j.values) is type(c.values) for j, c in zip(fast.jobs, checked.jobs))
        assert all(list(m.points) == list(c.throughput[t].points) and list(m.packed) == list(c.throughput[t].packed)
                   for j, c in zip(fast.jobs, checked.jobs) for t, m in j.throughput.items())  # the same order


def _translated(doc, screened):
    from elasticopt.models import problem_to_dict
    from elasticopt.service.translate import translate

    try:
        return problem_to_dict(translate(copy.deepcopy(doc), screened).problem)
    except ServiceError as exc:
        return exc.to_dict()


@settings(max_examples=300, deadline=None)
@given(st.lists(_mutated(), min_size=1, max_size=3), st.sampled_from([{"gpus": 8}, {"pools": {
    "a": {"nodes": 2, "gpus_per_node": 4}, "v100": {"nodes": 1, "gpus_per_node": 8}}}]))
def test_translation_of_a_screened_request_skips_only_a_repeated_schema_pass(jobs, cluster):
    # a screened request the request schema passed is translated without the instance loader's schema pass
    # (translate: _trusted): the same problem, or the same error, as the translation with every check
    doc = {"format": "elasticopt-request/1", "cluster": cluster, "jobs": jobs}
    if _outcome(copy.deepcopy(doc)) != "ok":
        return
    assert _translated(doc, True) == _translated(doc, False)


def test_an_invalid_screened_request_is_worded_by_every_check():
    # found by hypothesis (the test above): a throughput row of 1.0 GPUs passes the request schema (1.0 is an
    # integer to JSON Schema); the trusted translation derived batch.max_local = 1.0 from it and named that field
    doc = {"format": "elasticopt-request/1", "cluster": {"gpus": 8}, "jobs": [{"id": "a", "throughput": [[1.0, 1, 1.0]]}]}
    assert _translated(doc, True) == _translated(doc, False)
    assert _translated(doc, True)["path"] == "jobs[0].throughput[0][0]"
