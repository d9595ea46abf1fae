"""Responses as JSON lines (``protocol.encode_response``): orjson for solved responses whose floats are finite,
the standard encoder otherwise; the same JSON either way; a non-finite number is an ``internal`` answer, not a
stopped service; and the floats it checks are every number the response schema allows."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elasticopt.service import AllocationService
from elasticopt.service.protocol import encode_response, load_schema

from service_helpers import check_response, instance_request


def _number_paths(node, path=""):
    """The schema paths whose type admits a JSON number that need not be an integer."""
    if isinstance(node, dict):
        t = node.get("type")
        if t == "number" or (isinstance(t, list) and "number" in t):
            yield path
        for k, v in node.items():
            yield from _number_paths(v, f"{path}/{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _number_paths(v, f"{path}[{i}]")


def test_the_checked_floats_are_every_number_of_the_response_schema():
    # encode_response checks objective_value, each job's value and the timings (the 'seconds' definition):
    # a new float field in the schema must be checked there too, else orjson would write its NaN as null
    assert sorted(_number_paths(load_schema("response-1"))) == [
        "/definitions/seconds",
        "/definitions/solved/properties/allocation/additionalProperties/oneOf[1]/properties/value",
        "/definitions/solved/properties/objective_value",
    ]
    refs = json.dumps(load_schema("response-1"))
    assert refs.count('"#/definitions/seconds"') == 8  # the eight timings, and nothing else


@settings(max_examples=60, deadline=None)
@given(values=st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64), max_size=5),
       objective_value=st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False)))
def test_orjson_and_the_standard_encoder_write_the_same_json(values, objective_value):
    service = AllocationService(cache_jobs=0)
    resp = check_response(service.handle(instance_request("tiny.json", "x")))
    resp["objective_value"] = objective_value
    for jid, v in zip(list(resp["allocation"]), values):
        if resp["allocation"][jid] is not None:
            resp["allocation"][jid]["value"] = v
    line = encode_response(resp)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == json.loads(json.dumps(resp, allow_nan=False))


@pytest.mark.parametrize("where", ["objective_value", "value", "timings"])
@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_a_non_finite_number_is_refused_and_answered_as_internal(where, bad, monkeypatch):
    service = AllocationService(cache_jobs=0)
    real = service.handle

    def broken(data):
        resp = real(data)
        if where == "objective_value":
            resp["objective_value"] = bad
        elif where == "value":
            next(a for a in resp["allocation"].values() if a)["value"] = bad
        else:
            resp["timings"]["total_s"] = bad
        return resp

    with pytest.raises(ValueError):
        encode_response(broken(json.dumps(instance_request("tiny.json", 3))))
    monkeypatch.setattr(service, "handle", broken)
    resp, line = service.handle_bytes(json.dumps(instance_request("tiny.json", 3)))
    out = check_response(json.loads(line))
    assert out == resp and out["id"] == 3 and out["error"]["code"] == "internal"
    assert "JSON cannot carry" in out["error"]["message"]
    assert b"NaN" not in line and b"Infinity" not in line


def test_a_response_orjson_cannot_write_is_written_by_the_standard_encoder():
    resp = check_response(AllocationService().handle(instance_request("tiny.json", "big")))
    resp["objective"] = 2**70  # beyond 64 bits
    assert json.loads(encode_response(resp))["objective"] == 2**70
