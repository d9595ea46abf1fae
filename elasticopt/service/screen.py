"""A quick, sufficient check of a request's jobs against the request schema's ``job`` definition.

:func:`jobs_plainly_valid` answers True only for jobs that the schema
(``elasticopt/service/schema/request-1.json``, ``definitions.job``) accepts: plain
shapes with exact Python types (what JSON parsers produce), each field checked
as the schema states it.  It answers False for anything it does not recognise
(then :func:`~elasticopt.service.protocol.validate_request` runs the compiled
schema on the whole request, which accepts or words the error exactly as
before), so the error messages are the schema's and no request is accepted
that the schema refuses.  The schema validator's per-job code was the bulk of
the check on a 1,000-job request (9 ms on profiles, 76 ms on caller values with
16 options a job, load ~3.5); this loop is a few times faster.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["jobs_plainly_valid"]

_JOB_KEYS = frozenset({
    "id", "throughput", "profile", "options", "idle_value", "batch", "gpus", "pools", "running", "preemptible",
    "remaining_samples", "progress", "weight",
})
_OPTION_KEYS = frozenset({"gpus", "value", "batch", "nodes", "pool"})
_RUNNING_KEYS = frozenset({"gpus", "batch", "pool", "nodes", "restart_cost_s"})
_BATCH_KEYS = frozenset({"min", "max", "max_local"})
_GPUS_KEYS = frozenset({"min", "max"})
_NUMBER = (int, float)


def _pos_int(x: Any) -> bool:
    return type(x) is int and x >= 1


def _number(x: Any) -> bool:
    return type(x) in _NUMBER


def _name(x: Any) -> bool:
    return type(x) is str and len(x) >= 1


def _options(opts: Any) -> bool:
    if type(opts) is not list or not opts:
        return False
    for o in opts:
        if type(o) is not dict or not o.keys() <= _OPTION_KEYS:
            return False
        g = o.get("gpus")
        if type(g) is not int or g < 1 or type(o.get("value")) not in _NUMBER:
            return False
        if len(o) > 2:
            if "batch" in o and not _pos_int(o["batch"]):
                return False
            if "nodes" in o and not _pos_int(o["nodes"]):
                return False
            if "pool" in o and not _name(o["pool"]):
                return False
    return True


def _row(r: Any) -> bool:
    """A 3-wide row or a 4/5-wide typed row (they are told apart by width: the schema's oneOf holds)."""
    if type(r) is not list:
        return False
    n = len(r)
    if n == 3:
        return _pos_int(r[0]) and _pos_int(r[1]) and _number(r[2]) and r[2] > 0
    if n in (4, 5):
        return (_name(r[0]) and _pos_int(r[1]) and _pos_int(r[2]) and _number(r[3]) and r[3] > 0
                and (n == 4 or r[4] == "packed" and type(r[4]) is str))
    return False


def _running(run: Any) -> bool:
    if type(run) is not dict or not run.keys() <= _RUNNING_KEYS or not _pos_int(run.get("gpus")):
        return False
    if "batch" in run and not _pos_int(run["batch"]):
        return False
    if "pool" in run and not _name(run["pool"]):
        return False
    if "restart_cost_s" in run and not (_number(run["restart_cost_s"]) and run["restart_cost_s"] >= 0):
        return False
    if "nodes" in run:
        nodes = run["nodes"]
        if type(nodes) is not list:
            return False
        for pair in nodes:
            if type(pair) is not list or len(pair) != 2 or type(pair[0]) is not int or pair[0] < 0 \
                    or not _pos_int(pair[1]):
                return False
    return True


def _bounds(d: Any, keys: frozenset[str]) -> bool:
    return type(d) is dict and d.keys() <= keys and all(_pos_int(v) for v in d.values())


def _job(jd: Any) -> bool:
    if type(jd) is not dict or not jd.keys() <= _JOB_KEYS or not _name(jd.get("id")):
        return False
    if ("throughput" in jd) + ("profile" in jd) + ("options" in jd) != 1:
        return False
    if "options" in jd:
        if not _options(jd["options"]):
            return False
    elif "profile" in jd:
        if not _name(jd["profile"]):
            return False
    else:
        rows = jd["throughput"]
        if type(rows) is not list or not rows or not all(_row(r) for r in rows):
            return False
    if len(jd) == 2:
        return True
    for key, v in jd.items():
        if key in ("id", "options", "profile", "throughput"):
            continue
        if key == "running":
            ok = _running(v)
        elif key == "idle_value":
            ok = _number(v)
        elif key == "preemptible":
            ok = type(v) is bool
        elif key in ("remaining_samples", "weight"):
            ok = _number(v) and v > 0
        elif key == "progress":
            ok = type(v) is str and v in ("samples", "goodput")
        elif key == "pools":
            ok = type(v) is list and all(_name(t) for t in v)
        elif key == "batch":
            ok = _bounds(v, _BATCH_KEYS)
        else:  # "gpus"
            ok = _bounds(v, _GPUS_KEYS)
        if not ok:
            return False
    return True


def jobs_plainly_valid(jobs: Any, known: Sequence[bool] | None = None) -> bool:
    """Whether every job of ``jobs`` (a request's ``jobs`` list) certainly meets the schema's job definition.

    False means "not shown here", not "invalid": the caller then runs the full schema check.  ``known[i]``
    True: job ``i`` is known to meet it (the same JSON passed the schema before), so it is not looked at.
    """
    if type(jobs) is not list:
        return False
    if known is None or len(known) != len(jobs):
        return all(_job(jd) for jd in jobs)
    return all(k or _job(jd) for jd, k in zip(jobs, known))
