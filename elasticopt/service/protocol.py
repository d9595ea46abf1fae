"""The wire protocol of ``elasticopt serve``: formats, error codes, request validation.

A request is one JSON object in format ``elasticopt-request/1`` (an
``elasticopt-instance/1`` document is accepted as a request with defaults);
the answer is one JSON object in format ``elasticopt-response/1``.  Both are
described by the JSON Schemas shipped in ``elasticopt/service/schema/`` and in
docs/integrations.md.  A request that cannot be solved gets a structured error
(:class:`ServiceError`: code, message, JSON path, expected, found) and the
service keeps serving.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any, Callable

from elasticopt.errors import ElasticoptError, ValidationError
from elasticopt.service.screen import jobs_plainly_valid

if TYPE_CHECKING:
    from elasticopt.service.jobcache import JobCache

__all__ = [
    "REQUEST_FORMAT",
    "RESPONSE_FORMAT",
    "ERROR_CODES",
    "ServiceError",
    "load_schema",
    "parse_request",
    "parse_request_cached",
    "parse_request_screened",
    "request_validator",
    "validate_request",
    "error_response",
    "encode_response",
]

REQUEST_FORMAT = "elasticopt-request/1"
RESPONSE_FORMAT = "elasticopt-response/1"

#: Error code -> what it means (the response schema lists the same codes).
ERROR_CODES: dict[str, str] = {
    "invalid_json": "the request is not one JSON object (or holds NaN / Infinity)",
    "invalid_request": "the request breaks the request schema or a rule the schema cannot state",
    "request_too_large": "the request body is larger than the service's limit (`--max-body-mib`); not read",
    "session_unknown": "the request's session is not held at its 'base' revision: send the whole state again",
    "unsupported": "valid, but the model on this version cannot express it (message says what)",
    "unknown_solver": "no solver is registered under that name",
    "solver_unavailable": "the solver's library is not installed here",
    "solver_error": "the solver failed on this request (bad solver option, backend error)",
    "internal": "a bug in the service: the request was not solved; please report it",
}


class ServiceError(ElasticoptError):
    """A request the service answers with an error instead of an allocation.

    Parameters
    ----------
    code
        One of :data:`ERROR_CODES`.
    message
        What went wrong, in words.
    path
        JSON path inside the request (``jobs[3].options[0].gpus``), "" if none.
    expected, found
        The rule and what the request held (rendered as text).
    """

    def __init__(self, code: str, message: str, path: str = "", expected: str = "", found: object = ""):
        if code not in ERROR_CODES:
            raise ValueError(f"unknown service error code {code!r}")
        self.code = code
        self.path = path
        self.expected = expected
        self.found = found if isinstance(found, str) else _short(found)
        super().__init__(message)

    def to_dict(self) -> dict[str, str]:
        """The ``error`` object of a response."""
        return {
            "code": self.code,
            "message": str(self),
            "path": self.path,
            "expected": self.expected,
            "found": self.found,
        }


def _short(value: object, limit: int = 200) -> str:
    try:
        text = json.dumps(value, allow_nan=True, default=repr)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@lru_cache(maxsize=None)
def load_schema(name: str) -> dict[str, Any]:
    """A shipped JSON Schema: ``"request-1"`` or ``"response-1"``."""
    text = resources.files("elasticopt.service").joinpath(f"schema/{name}.json").read_text("utf-8")
    return json.loads(text)


@lru_cache(maxsize=1)
def request_validator() -> Callable[[Any], Any]:
    """The compiled validator of the request schema (fastjsonschema, compiled once)."""
    try:
        import fastjsonschema
    except ImportError as exc:  # pragma: no cover - the 'service' extra installs it
        raise ElasticoptError(
            "elasticopt serve needs fastjsonschema, which is not installed; fix: pip install 'elasticopt[service]'"
        ) from exc
    return fastjsonschema.compile(load_schema("request-1"))


@lru_cache(maxsize=1)
def _shell_validator() -> Callable[[Any], Any]:
    """The request schema with ``jobs`` and a session's ``upsert`` only "an array" (their items:
    :func:`~elasticopt.service.screen.jobs_plainly_valid`)."""
    import copy

    import fastjsonschema

    schema = copy.deepcopy(load_schema("request-1"))
    schema["properties"]["jobs"] = schema["properties"]["upsert"] = {"type": "array"}
    return fastjsonschema.compile(schema)


def parse_request(data: bytes | str) -> Any:
    """Parse one request's JSON text with the loader discipline of every input (:mod:`elasticopt.models.jsontext`).

    Non-UTF-8 bytes, invalid JSON and nesting too deep to parse are ``invalid_json``; nesting
    deeper than ``MAX_DEPTH``, NaN / Infinity and integers beyond ±(2**53 - 1) are
    ``invalid_request`` at their JSON path.

    Raises
    ------
    ServiceError
        ``invalid_json`` (with the position of the first error) or ``invalid_request``.
    """
    from elasticopt.errors import InstanceError
    from elasticopt.models.jsontext import check_values, decode, loads

    try:
        text = decode(data, "request") if isinstance(data, (bytes, bytearray)) else data
        doc = loads(text, "request")
    except InstanceError as exc:
        raise ServiceError("invalid_json", f"request is not valid JSON: {exc.expected}, found {exc.found}", "(root)",
                           exc.expected, exc.found) from None
    try:
        check_values(doc, "request")
    except InstanceError as exc:
        raise ServiceError("invalid_request", f"request: {exc.path}: expected {exc.expected}", exc.path, exc.expected,
                           exc.found) from None
    return doc


def parse_request_screened(data: bytes | str) -> tuple[Any, bool]:
    """Parse one request's text as :func:`parse_request` does; and whether the model loader's fast path may
    take documents built from it (``_screened``: every value is what :func:`parse_request` would read).

    Bytes are parsed by orjson, which refuses invalid UTF-8, invalid JSON, NaN, Infinity and overflowing
    numbers, then checked by :func:`~elasticopt.models.jsontext.plainly_valid` (nesting, exact integers):
    a document either refuses goes through :func:`parse_request`, which words the error, and is screened as
    the loader screens its files (:func:`elasticopt.models.fastload.fast_parse`).  On a 1,000-job
    caller-values request: 50 -> 7 ms.

    Raises
    ------
    ServiceError
        As :func:`parse_request`.
    """
    doc, screened, _, _ = parse_request_cached(data, None)
    return doc, screened


def parse_request_cached(data: bytes | str, cache: JobCache | None) -> tuple[Any, bool, list[bytes | None] | None,
                                                                            list[bool] | None]:
    """:func:`parse_request_screened` with a job cache: ``(doc, screened, encoded, known)``.

    ``encoded[i]``: job ``i``'s JSON (of ``upsert`` for a session's changes without ``jobs``) as :meth:`~elasticopt.service.jobcache.JobCache.encode` writes it;
    ``known[i]``: that JSON passed this screen and the request schema in an earlier request
    (:meth:`~elasticopt.service.jobcache.JobCache.known_valid`), so its values are not screened again (the
    rest of the request is).  Both None where the request took the slow parse (then none of its jobs may be
    remembered as known: a job's bytes are only known from the fast path, where every value was plain), and
    where ``cache`` is None (:func:`parse_request_screened`).
    """
    import orjson

    from elasticopt.models.fastload import needs_slow_parse
    from elasticopt.models.jsontext import plainly_valid

    if isinstance(data, (bytes, bytearray)):
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
        else:
            field = ("upsert" if "upsert" in doc and "jobs" not in doc else "jobs") if type(doc) is dict else ""
            jobs = doc.get(field) if field else None  # a session's changes: its upserted jobs (session.py)
            encoded = cache.encode(jobs) if cache is not None and type(jobs) is list else None
            if encoded is None:
                if plainly_valid(doc):
                    return doc, True, None, None
            else:
                known = cache.known_valid(encoded)
                rest = {k: v for k, v in doc.items() if k != field}
                rest[field] = [jd for jd, k in zip(jobs, known) if not k]  # (at the depth they have in doc)
                if plainly_valid(rest):
                    return doc, True, encoded, known
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    return parse_request(data), not needs_slow_parse(raw), None, None


def _expected(rule: str, definition: Any) -> str:
    texts: dict[str, Callable[[Any], str]] = {
        "type": lambda d: f"a value of type {d if isinstance(d, str) else ' or '.join(d)}",
        "required": lambda d: "the field(s) " + ", ".join(map(repr, d)) + " to be present",
        "additionalProperties": lambda d: "no other fields",
        "minimum": lambda d: f"a number >= {d}",
        "exclusiveMinimum": lambda d: f"a number > {d}",
        "enum": lambda d: "one of " + ", ".join(map(repr, d)),
        "const": lambda d: repr(d),
        "minItems": lambda d: f"a list with at least {d} item(s)",
        "maxItems": lambda d: f"a list with at most {d} item(s)",
        "minLength": lambda d: f"a string of at least {d} character(s)",
        "minProperties": lambda d: f"an object with at least {d} field(s)",
    }
    fn = texts.get(rule)
    return fn(definition) if fn else f"{rule} {_short(definition)}"


_ONE_OF_HINTS = {
    "cluster": "exactly one of 'gpus' (one pool) or 'pools'",
    "solver": "a solver name, or {\"name\": ..., \"options\": {...}}",
    "row": "a row [gpus, batch, samples_per_s] or [pool, gpus, batch, samples_per_s(, \"packed\")]",
}


def validate_request(doc: Any, known_jobs: Sequence[bool] | None = None) -> dict[str, Any]:
    """Check ``doc`` against the request schema; return it.

    ``known_jobs[i]`` True: job ``i``'s JSON (of ``upsert`` in a session's changes without ``jobs``) passed the
    schema in an earlier request
    (:meth:`~elasticopt.service.jobcache.JobCache.known_valid`), so the quick check skips it.

    First the quick, sufficient check: the request without its jobs by the compiled schema, the jobs by
    :func:`~elasticopt.service.screen.jobs_plainly_valid`; only where either does not pass does the compiled
    schema check the whole request, which words the error (both are relaxations of it, so a request they
    pass, it passes: 76 -> ~15 ms on a 1,000-job caller-values request).

    Raises
    ------
    ServiceError
        ``invalid_request`` naming the JSON path, what was expected and what was found.
    """
    import fastjsonschema

    if not isinstance(doc, dict):
        raise ServiceError("invalid_request", "a request is a JSON object", "(root)", "a JSON object", type(doc).__name__)
    on_upsert = "upsert" in doc and "jobs" not in doc  # ``known_jobs`` of a session's changes: their upserted jobs
    if jobs_plainly_valid(doc.get("jobs", []), None if on_upsert else known_jobs) and \
            jobs_plainly_valid(doc.get("upsert", []), known_jobs if on_upsert else None):
        try:
            _shell_validator()(doc)
        except fastjsonschema.JsonSchemaValueException:
            pass  # the whole schema below words it
        else:
            return doc
    try:
        request_validator()(doc)
    except fastjsonschema.JsonSchemaValueException as exc:
        path = exc.name[len("data") :].lstrip(".") or "(root)"
        rule, found = exc.rule or "", exc.value
        expected = _expected(rule, exc.rule_definition)
        if rule == "additionalProperties" and isinstance(found, dict):
            allowed = set((exc.definition or {}).get("properties", {}))
            extra = sorted(k for k in found if k not in allowed)
            if extra:
                path, found = f"{path}.{extra[0]}" if path != "(root)" else extra[0], extra[0]
                expected = "no such field (allowed: " + ", ".join(sorted(allowed)) + ")"
        elif rule == "required" and isinstance(found, dict):
            missing = [k for k in exc.rule_definition if k not in found]
            if missing:
                path = f"{path}.{missing[0]}" if path != "(root)" else missing[0]
                found = "nothing"
        elif rule == "oneOf":
            last = path.rsplit(".", 1)[-1]
            key = "job" if last.startswith("jobs[") else "row" if last.startswith("throughput[") else last
            expected = _ONE_OF_HINTS.get(
                key, "exactly one of 'throughput' (measured points), 'profile' (a fitted profile) or 'options' (caller values)"
            )
            if isinstance(found, dict):
                found = "fields " + ", ".join(sorted(found))
        raise ServiceError("invalid_request", f"{path}: expected {expected}", path, expected, found) from None
    return doc


def finite(value: float, path: str) -> float:
    """``value`` as a float, or ``invalid_request`` if it is not finite."""
    v = float(value)
    if not math.isfinite(v):
        raise ServiceError("invalid_request", f"{path}: expected a finite number", path, "a finite number", value)
    return v


def _solved_floats_finite(resp: dict[str, Any]) -> bool:
    """Whether every number the response schema lets a solved response hold as a float is finite: its
    ``objective_value``, each job's ``value`` and its ``timings`` (a test reads the schema for them)."""
    isfinite = math.isfinite
    value = resp.get("objective_value")
    if value is not None and not isfinite(value):
        return False
    for a in resp["allocation"].values():
        if a is not None and not isfinite(a["value"]):
            return False
    return all(map(isfinite, resp["timings"].values()))


def encode_response(resp: dict[str, Any]) -> bytes:
    """A response as one JSON line.

    A solved response by orjson (1,000 jobs: 1.7 -> 0.1 ms) once its floats are shown finite (orjson would write
    NaN and Infinity as ``null``); any other response, and one orjson cannot write (an integer beyond 64 bits),
    by the standard encoder, which refuses a non-finite number (``ValueError``): such a response is a bug, and
    the caller answers ``internal`` instead (:meth:`~elasticopt.service.dispatch.AllocationService.handle_bytes`).
    """
    import orjson

    if resp.get("ok") and "allocation" in resp and _solved_floats_finite(resp):
        try:
            return orjson.dumps(resp) + b"\n"
        except (orjson.JSONEncodeError, TypeError):
            pass
    return json.dumps(resp, separators=(",", ":"), allow_nan=False).encode() + b"\n"


def error_response(request_id: Any, error: ServiceError) -> dict[str, Any]:
    """A response carrying ``error``."""
    return {"format": RESPONSE_FORMAT, "id": request_id, "ok": False, "error": error.to_dict()}


@dataclass(frozen=True)
class RequestedSolver:
    """Which backend to run, with its options."""

    name: str
    options: dict[str, Any]

    @classmethod
    def from_request(cls, value: Any) -> "RequestedSolver":
        """From a request's ``solver`` field: ``NAME``, ``NAME:key=value,...`` or ``{"name", "options"}``."""
        from elasticopt.solvers.options import parse_solver_arg

        if isinstance(value, str):
            try:
                name, options = parse_solver_arg(value)
            except ValidationError as exc:
                raise ServiceError("invalid_request", f"solver: expected {exc.expected}", "solver", exc.expected,
                                   exc.found) from None
            return cls(name, options)
        return cls(value["name"], dict(value.get("options", {})))
