"""The service's fast parse (orjson + plainly_valid) answers exactly what the loader discipline answers."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elasticopt.service.protocol import ServiceError, parse_request, parse_request_screened

# numbers around every edge the checks draw: 2**53, 2**63, 2**64, huge literals, long fractions
_EDGES = [2**53 - 1, 2**53, -(2**53), 2**63, 2**64, 10**20, 10**30, 0.1 + 0.2, 1e-400, 1e300, 9.3e18, 2.0**63]
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.sampled_from(_EDGES),
                     st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=5))
_DOCS = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                      st.dictionaries(st.text(max_size=3), inner, max_size=4)),
                     max_leaves=40)


def _outcome(fn, data):
    try:
        out = fn(data)
    except ServiceError as exc:
        return ("error", exc.code, exc.path)
    return ("doc", json.dumps(out[0] if isinstance(out, tuple) else out, sort_keys=True))


def _deep(depth: int) -> bytes:
    return b"[" * depth + b"1" + b"]" * depth


@settings(max_examples=300, deadline=None)
@given(doc=_DOCS, wrap=st.sampled_from(["{}", "[{}]", '{{"a": {}}}']))
def test_the_fast_parse_answers_what_parse_request_answers(doc, wrap):
    data = wrap.format(json.dumps(doc)).encode()
    assert _outcome(parse_request_screened, data) == _outcome(parse_request, data)


@pytest.mark.parametrize("text, code, path", [
    (b'{"a": NaN}', "invalid_request", "a"),
    (b'{"a": [1, Infinity]}', "invalid_request", "a[1]"),
    (b'{"a": 1e999}', "invalid_request", "a"),
    (b'{"a": 9007199254740992}', "invalid_request", "a"),        # 2**53: orjson reads it exactly
    (b'{"a": 123456789012345678901}', "invalid_request", "a"),   # past 64 bits: orjson reads a float
    (b'{"a": [' + b"1" * 5000 + b"]}", "invalid_request", "a[0]"),
    (_deep(33), "invalid_request", "[0]" * 32),
    (_deep(5000), "invalid_json", "(root)"),
    (b'{"a": "\xff"}', "invalid_json", "(root)"),
    (b'{"a": 1', "invalid_json", "(root)"),
])
def test_what_the_fast_parse_refuses_is_worded_by_the_loader_discipline(text, code, path):
    with pytest.raises(ServiceError) as ei:
        parse_request_screened(text)
    assert (ei.value.code, ei.value.path) == (code, path), ei.value


def test_screened_text_and_exact_values():
    doc, screened = parse_request_screened(b'{"a": [0.12345678901234567, 9007199254740991, 9e18, 1e-400]}')
    assert screened and doc == {"a": [0.12345678901234567, 9007199254740991, 9e18, 0.0]}
    assert parse_request_screened(_deep(32)) == (json.loads(_deep(32)), True)  # 32 levels: within MAX_DEPTH
    # the slow path (text, or a float that may have been a long integer): the loader's own screen decides
    assert parse_request_screened('{"a": [1, 2]}') == ({"a": [1, 2]}, True)
    assert parse_request_screened(b'{"a": 9.5e19}') == ({"a": 9.5e19}, True)
    assert parse_request_screened(b'{"a": 9.5e190}') == ({"a": 9.5e190}, False)  # a 3-digit exponent
