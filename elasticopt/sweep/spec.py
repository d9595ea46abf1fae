"""Sweep specs: a TOML file naming a grid of simulations (docs/sweeps.md).

A spec is a base ``[grid]`` of parameters and optional ``[[variant]]`` tables.
In either, a **list** value is an axis (every combination is a cell), a scalar
is fixed; a variant replaces the grid's values of the keys it names and adds
its own cartesian product of cells (e.g. a sensitivity row).  Cells equal in
every parameter are run once.  Example::

    name = "small"
    [grid]
    policy = ["elastic", "fixed-batch"]
    seed = [0, 1, 2]
    load = [0.5, 2]
    cluster = 64                 # GPUs of one pool, or "sia-64", "gavel-N", "t4:6x4,a100:2x8"
    restart_cost_s = 30
    solver = "dp"
    jobs = 100

    [[variant]]
    load = 2
    seed = 0
    restart_cost_s = [0, 300]

Every error names the file, the key (``grid.load[2]``, ``variant[1].seed``),
what was expected and what was found.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from elasticopt.errors import InstanceError

#: Names of public traces a ``workload`` may give instead of a path (read from ``$ELASTICOPT_DATA/traces``).
TRACE_NAMES = ("philly",)

__all__ = ["PARAMETERS", "DEFAULTS", "AXIS_ORDER", "Cell", "SweepSpec", "load_spec", "parse_spec", "cell_key"]


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _cluster(v: Any) -> bool:
    return (_int(v) and v >= 1) or (isinstance(v, str) and bool(v.strip()))


# name -> (rule in words, check); the rule is what an error message says was expected.
PARAMETERS: dict[str, tuple[str, Any]] = {
    "policy": ("a policy name or module:Class", lambda v: isinstance(v, str) and bool(v.strip())),
    "seed": ("an integer >= 0", lambda v: _int(v) and v >= 0),
    "load": ("a number > 0 (offered load)", lambda v: _num(v) and v > 0),
    "cluster": ("GPUs of one pool (integer >= 1) or a cluster name (sia-64, gavel-N, TYPE:NODESxGPUS,...)",
                _cluster),
    "restart_cost_s": ("a number >= 0 (seconds)", lambda v: _num(v) and v >= 0),
    "solver": ("a solver name, optionally NAME:key=value,...", lambda v: isinstance(v, str) and bool(v.strip())),
    "progress": ('"samples" or "goodput"', lambda v: v in ("samples", "goodput")),
    "jobs": ("an integer >= 1, or 0 to use jobs_per_gpu", lambda v: _int(v) and v >= 0),
    "jobs_per_gpu": ("a number > 0 (jobs = max(jobs_min, jobs_per_gpu x GPUs) when jobs = 0)",
                     lambda v: _num(v) and v > 0),
    "jobs_min": ("an integer >= 1", lambda v: _int(v) and v >= 1),
    "submitted_batch": ('"random", "min" or "max"', lambda v: v in ("random", "min", "max")),
    "duration_max_s": ("a number > 0 (seconds), or 0 for no clipping", lambda v: _num(v) and v >= 0),
    "duration_scale": ("a number > 0", lambda v: _num(v) and v > 0),
    "networks": ('profile names separated by commas (a string), or "" for the default set',
                 lambda v: isinstance(v, str)),
    "workload": ('a workload file (any format `elasticopt simulate` reads), or "" to generate one',
                 lambda v: isinstance(v, str)),
    "gpus_per_node": ("an integer >= 1", lambda v: _int(v) and v >= 1),
    "node_aware": ("true or false", lambda v: isinstance(v, bool)),
    "tick_s": ("a number > 0 (seconds), or 0 for no periodic re-decision", lambda v: _num(v) and v >= 0),
    "horizon_s": ("a number > 0 (seconds), or 0 to run until every job is done", lambda v: _num(v) and v >= 0),
    "noise": ("a number >= 0 (log-std of the true/believed throughput factor)", lambda v: _num(v) and v >= 0),
    "payback": ("true or false", lambda v: isinstance(v, bool)),
    "rescale_penalty": ("a number >= 0, or -1 for the policy's default", lambda v: _num(v) and (v >= 0 or v == -1)),
    "cooldown_restarts": ("a number >= 0, or -1 for the default hysteresis", lambda v: _num(v) and (v >= 0 or v == -1)),
    "min_gain": ("a number >= 0, or -1 for the default hysteresis", lambda v: _num(v) and (v >= 0 or v == -1)),
    "admission_deadline_s": ("a number >= 0 (seconds a job may wait before it is dropped; 0: start at once or be "
                             "dropped), or -1 for no admission control", lambda v: _num(v) and (v >= 0 or v == -1)),
    "queue_limit": ("an integer >= 1 (queued jobs; an arrival past it is dropped), or 0 for none",
                    lambda v: _int(v) and v >= 0),
}

#: The value of every parameter a spec leaves out (0 / "" / -1 mean "none" or "the default").
DEFAULTS: dict[str, Any] = {
    "policy": "elastic", "seed": 0, "load": 1.0, "cluster": 64, "restart_cost_s": 30.0, "solver": "dp",
    "progress": "samples", "jobs": 0, "jobs_per_gpu": 2.0, "jobs_min": 100, "submitted_batch": "random",
    "duration_max_s": 48 * 3600.0, "duration_scale": 1.0, "networks": "", "workload": "", "gpus_per_node": 8,
    "node_aware": False, "tick_s": 0.0, "horizon_s": 0.0, "noise": 0.0, "payback": True, "rescale_penalty": -1.0,
    "cooldown_restarts": -1.0, "min_gain": -1.0, "admission_deadline_s": -1.0, "queue_limit": 0,
}  # fmt: skip

#: Column order of the results table: the usual axes first, then the rest in PARAMETERS order.
AXIS_ORDER: tuple[str, ...] = tuple(PARAMETERS)

_TOP_KEYS = {"name", "description", "grid", "variant", "report"}
_REPORT_KEYS = {"compare": "a policy name", "baseline": "a policy name", "confidence": "a number in (0, 1)"}


@dataclass(frozen=True)
class Cell:
    """One simulation of a sweep: every parameter's value, and its key (a hash of them)."""

    params: tuple[tuple[str, Any], ...]
    key: str

    def as_dict(self) -> dict[str, Any]:
        """The parameters as a dict (PARAMETERS order)."""
        return dict(self.params)


@dataclass(frozen=True)
class SweepSpec:
    """A parsed spec: its cells in spec order, the axes that vary, and the report settings."""

    name: str
    description: str
    file: str
    cells: tuple[Cell, ...]
    axes: tuple[str, ...]
    compare: str = "elastic"
    baseline: str = "fixed-batch"
    confidence: float = 0.95


def cell_key(params: Mapping[str, Any]) -> str:
    """A stable 16-hex-digit key of a cell's parameters (numbers normalised: 30 == 30.0)."""
    norm = {k: (float(v) if _num(v) else v) for k, v in sorted(params.items())}
    return hashlib.sha256(json.dumps(norm, sort_keys=True).encode()).hexdigest()[:16]


def _check_value(file: str, where: str, key: str, value: Any) -> Any:
    rule, ok = PARAMETERS[key]
    if not ok(value):
        raise InstanceError(file, where, rule, value)
    if key in ("load", "restart_cost_s", "duration_max_s", "duration_scale", "jobs_per_gpu", "tick_s", "horizon_s",
               "noise", "rescale_penalty", "cooldown_restarts", "min_gain", "admission_deadline_s"):
        return float(value)
    return value


def _table(file: str, where: str, doc: Any) -> dict[str, list[Any]]:
    """A grid or variant table -> key -> its values (a list; a scalar is a list of one)."""
    if not isinstance(doc, dict):
        raise InstanceError(file, where, "a table of parameters", doc)
    out: dict[str, list[Any]] = {}
    for key, value in doc.items():
        if key not in PARAMETERS:
            raise InstanceError(file, f"{where}.{key}", "a parameter: " + ", ".join(PARAMETERS), key,
                                hint="see docs/sweeps.md")
        if isinstance(value, list):
            if not value:
                raise InstanceError(file, f"{where}.{key}", "a non-empty list (an axis) or a scalar", value)
            vals = [_check_value(file, f"{where}.{key}[{i}]", key, v) for i, v in enumerate(value)]
        else:
            vals = [_check_value(file, f"{where}.{key}", key, value)]
        out[key] = list(dict.fromkeys(json.dumps(v) for v in vals))  # drop repeated values, keep order
        out[key] = [json.loads(v) for v in out[key]]
    return out


def _product(table: Mapping[str, list[Any]]) -> list[dict[str, Any]]:
    keys = list(table)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(table[k] for k in keys))]


def parse_spec(doc: Mapping[str, Any], file: str = "<memory>") -> SweepSpec:
    """Validate a spec document (the parsed TOML) and expand its cells.

    Raises
    ------
    InstanceError
        Naming the file, the key, what was expected and what was found.
    """
    for key in doc:
        if key not in _TOP_KEYS:
            raise InstanceError(file, key, "one of the top-level keys " + ", ".join(sorted(_TOP_KEYS)), key)
    name = doc.get("name", Path(file).stem)
    if not isinstance(name, str) or not name.strip():
        raise InstanceError(file, "name", "a non-empty string", name)
    desc = doc.get("description", "")
    if not isinstance(desc, str):
        raise InstanceError(file, "description", "a string", desc)
    if "grid" not in doc:
        raise InstanceError(file, "grid", "a [grid] table of parameters", None,
                            hint='e.g. [grid] policy = ["elastic", "fixed-batch"], seed = [0, 1, 2]')
    grid = _table(file, "grid", doc["grid"])
    variants = doc.get("variant", [])
    if not isinstance(variants, list):
        raise InstanceError(file, "variant", "[[variant]] tables (an array of tables)", variants)
    tables = [grid] + [{**grid, **_table(file, f"variant[{i}]", v)} for i, v in enumerate(variants)]
    seen: dict[str, Cell] = {}
    for table in tables:
        for combo in _product(table):
            params = {k: combo.get(k, DEFAULTS[k]) for k in PARAMETERS}
            key = cell_key(params)
            if key not in seen:
                seen[key] = Cell(tuple(params.items()), key)
    cells = tuple(seen.values())
    axes = tuple(k for k in PARAMETERS if len({json.dumps(c.as_dict()[k]) for c in cells}) > 1)
    report = doc.get("report", {})
    if not isinstance(report, dict):
        raise InstanceError(file, "report", "a [report] table", report)
    for key, value in report.items():
        if key not in _REPORT_KEYS:
            raise InstanceError(file, f"report.{key}", "one of " + ", ".join(_REPORT_KEYS), key)
    conf = report.get("confidence", 0.95)
    if not (_num(conf) and 0 < conf < 1):
        raise InstanceError(file, "report.confidence", _REPORT_KEYS["confidence"], conf)
    for key in ("compare", "baseline"):
        if key in report and not isinstance(report[key], str):
            raise InstanceError(file, f"report.{key}", _REPORT_KEYS[key], report[key])
    return SweepSpec(name=name, description=desc, file=file, cells=cells, axes=axes,
                     compare=report.get("compare", "elastic"), baseline=report.get("baseline", "fixed-batch"),
                     confidence=float(conf))


def load_spec(path: str | os.PathLike[str]) -> SweepSpec:
    """Read and validate a TOML spec file (see the module docstring).

    A relative ``workload`` path is taken relative to the spec's folder.
    """
    file = str(path)
    try:
        with open(path, "rb") as fh:
            doc = tomllib.load(fh)
    except OSError as exc:
        raise InstanceError(file, "(file)", "a readable TOML file", type(exc).__name__, hint=str(exc)) from None
    except tomllib.TOMLDecodeError as exc:
        raise InstanceError(file, "(syntax)", "valid TOML", str(exc)) from None
    spec = parse_spec(doc, file)
    base = Path(path).resolve().parent
    cells = []
    for c in spec.cells:
        p = c.as_dict()
        w = p["workload"]
        if w and w not in TRACE_NAMES and not Path(w).is_absolute():
            p["workload"] = str((base / w).resolve())
        cells.append(Cell(tuple(p.items()), cell_key(p)) if p != c.as_dict() else c)
    return SweepSpec(**{**spec.__dict__, "cells": tuple(cells)})
