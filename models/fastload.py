"""The fast path of instance loading: parse with orjson, validate with a compiled schema.

A valid file never needs more than this: orjson parses (it refuses NaN,
Infinity and integers beyond 64 bits, which the format refuses too), and a
validator compiled by fastjsonschema from a *stricter* copy of the format's
JSON Schema (rewritten as draft 04, whose integers refuse ``4.0``; every
integer and number within ±(2**53 - 1), the range ``check_values`` enforces)
accepts it.  Anything either refuses goes down the slow path
(:mod:`elasticopt.models.jsontext` and jsonschema), which decides and words the
error exactly as before (file, JSON path, expected, found): the fast path can
only say "valid", never produce an error of its own.  The schemas bound the
nesting depth, so a document they accept is within ``MAX_DEPTH`` too.
"""

from __future__ import annotations

import copy
import re
from functools import lru_cache
from typing import Any, Callable

from elasticopt.models.jsontext import MAX_EXACT_INT

__all__ = ["fast_parse", "fast_valid", "needs_slow_parse", "plain_json"]


#: Texts the slow parser must see: 16 digits in a row (an integer literal past 2**53, which orjson reads as a
#: float), NaN / Infinity (not JSON; orjson reads them), a 3-digit exponent (1e999 overflows to infinity).
#: The reference of :func:`needs_slow_parse` (tests/test_instance_fuzz.py holds them equal).
_SLOW = re.compile(rb"[0-9]{16}|NaN|Infinity|[eE][+-]?[0-9]{3}")

#: Every digit to ``0`` and ``E`` to ``e``, nothing else changed: no other byte becomes ``0`` or ``e``, so each
#: alternative of ``_SLOW`` is a plain substring of the translated text.
_DIGITS_AND_E = bytes.maketrans(b"123456789E", b"000000000e")
_SLOW_SUBSTRINGS = (b"0" * 16, b"NaN", b"Infinity", b"e000", b"e+000", b"e-000")


def needs_slow_parse(raw: bytes) -> bool:
    """Whether ``raw`` holds a match of ``_SLOW`` (a text the slow parser must see).

    The same answer as ``_SLOW.search(raw) is not None``, by C-speed translation and substring searches:
    on a 175 KB instance 0.6 ms instead of 6-8 ms (the regex tries its digit runs at every digit).
    """
    text = raw.translate(_DIGITS_AND_E)
    return any(s in text for s in _SLOW_SUBSTRINGS)


def fast_parse(raw: bytes) -> Any | None:
    """The parsed document, or None where orjson refuses it (the slow parser then words the error).

    Texts with 16 digits in a row, NaN, Infinity or a 3-digit exponent go to
    the slow parser too: orjson reads them (a long integer as a float), which
    would hide the error the format reports for them.
    """
    try:
        import orjson
    except ImportError:  # pragma: no cover - a base dependency
        return None
    if needs_slow_parse(raw):
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


def plain_json(data: Any) -> bool:
    """Whether ``data``, a document built in Python, is what :func:`fast_parse` reads from its own JSON text.

    Written by orjson and read back through :func:`fast_parse`'s screen, it must come back equal: objects
    with string keys, lists (not tuples), strings, booleans, null, integers of at most 15 digits and finite
    floats.  Such a document may take the fast path of a file (:func:`fast_valid`); anything else (NaN,
    infinity, a long integer, a tuple, a numpy scalar, a non-string key) goes down the slow path, which
    words its error as before.
    """
    try:
        import orjson
    except ImportError:  # pragma: no cover - a base dependency
        return False
    try:
        raw = orjson.dumps(data)
    except TypeError:  # orjson.JSONEncodeError: a value JSON has no text for (numpy scalar, non-string key...)
        return False
    back = fast_parse(raw)
    return back is not None and back == data


def _strict(node: Any) -> Any:
    """A draft-04 copy of a 2020-12 schema node, with numbers bounded to exact JSON integers.

    Draft 04, because there ``"integer"`` refuses ``4.0`` as the format does
    (drafts 6+ accept it); its tuple form is ``items: [...]``, its exclusive
    bounds are booleans and it has no ``const`` (an enum of one).
    """
    if isinstance(node, list):
        return [_strict(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: _strict(v) for k, v in node.items() if k not in ("$schema", "$id")}
    if "prefixItems" in out:
        out["items"] = out.pop("prefixItems")  # tuple form; minItems / maxItems stay as they are
    if "const" in out:
        out["enum"] = [out.pop("const")]
    if "exclusiveMinimum" in out:
        out["minimum"] = out.pop("exclusiveMinimum")
        out["exclusiveMinimum"] = True
    if out.get("type") in ("integer", "number"):
        out["maximum"] = min(out.get("maximum", MAX_EXACT_INT), MAX_EXACT_INT)
        out.setdefault("minimum", -MAX_EXACT_INT)
    return out


@lru_cache(maxsize=4)
def _validator(name: str) -> Callable[[Any], Any] | None:
    try:
        import fastjsonschema
    except ImportError:  # pragma: no cover - a base dependency
        return None
    from importlib import resources
    import json

    schema = json.loads(resources.files("elasticopt.models").joinpath(f"schema/{name}").read_text("utf-8"))
    strict = _strict(copy.deepcopy(schema))
    strict["$schema"] = "http://json-schema.org/draft-04/schema#"
    return fastjsonschema.compile(strict)


def fast_valid(data: Any, schema_file: str) -> bool:
    """Whether ``data`` passes the strict compiled schema ``schema_file`` (e.g. ``"instance-1.json"``)."""
    v = _validator(schema_file)
    if v is None:
        return False
    try:
        v(data)
    except Exception:  # fastjsonschema.JsonSchemaException (or a value it cannot handle): take the slow path
        return False
    return True
