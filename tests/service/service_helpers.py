"""Helpers of the service tests: request builders, response schema check."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

import jsonschema

from elasticopt.service import load_schema

ROOT = Path(__file__).resolve().parents[2]
ELASTICOPT = [sys.executable, "-m", "elasticopt"]


def check_response(resp: dict[str, Any]) -> dict[str, Any]:
    """Validate a response against the shipped response schema; return it."""
    jsonschema.Draft7Validator(load_schema("response-1")).validate(resp)
    return resp


def instance_request(name: str, request_id: Any = None) -> dict[str, Any]:
    """An instance file of instances/ as a request (format changed, an id added)."""
    doc = json.loads((ROOT / "instances" / name).read_text())
    doc["format"] = "elasticopt-request/1"
    if request_id is not None:
        doc["id"] = request_id
    return doc


def malformed_requests(n: int, seed: int = 0) -> list[bytes]:
    """``n`` different malformed requests: broken JSON, wrong types, bad values, unknown fields."""
    rng = random.Random(seed)
    base = instance_request("mixed.json")
    out: list[bytes] = []
    mutations = [
        lambda d: json.dumps(d)[: rng.randrange(1, len(json.dumps(d)) - 1)],  # truncated
        lambda d: "[1, 2, 3]",
        lambda d: "NaN",
        lambda d: '{"format": "elasticopt-request/1", "jobs": [{"id": "a", "throughput": [[1, 2, NaN]]}]}',
        lambda d: bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))).replace(b"\n", b" ").decode("latin-1"),
        lambda d: json.dumps({**d, "format": rng.choice(["", "elasticopt-request/2", 1, None])}),
        lambda d: json.dumps({**d, "cluster": {"gpus": rng.choice([-1, "8", 1.5, None])}}),
        lambda d: json.dumps({**d, "jobs": [{**d["jobs"][0], "id": rng.choice(["", 3, None])}]}),
        lambda d: json.dumps({**d, "jobs": [{**d["jobs"][0], "throughput": [[0, 32, 10.0]]}]}),
        lambda d: json.dumps({**d, "jobs": [{**d["jobs"][0], "weight": rng.choice([0, -1, "x"])}]}),
        lambda d: json.dumps({**d, "extra_field_" + str(rng.randrange(99)): 1}),
        lambda d: json.dumps({**d, "solver": rng.choice(["no-such-solver", {"name": "dp", "options": {"bogus": 1}}, 3])}),
        lambda d: json.dumps({**d, "time_limit_s": rng.choice([0, -5, "1"])}),
        lambda d: json.dumps({**d, "jobs": [d["jobs"][0], d["jobs"][0]]}),  # duplicate ids
        lambda d: json.dumps({**d, "cluster": {"pools": {"a": {"nodes": 1, "gpus_per_node": 8}, "b": {"nodes": 1, "gpus_per_node": 4}}}}),
        lambda d: json.dumps({**d, "objective": "values"}),  # jobs without options
        lambda d: "{" * rng.randrange(1, 5000),
    ]
    for i in range(n):
        out.append(mutations[i % len(mutations)](base).encode("utf-8", "surrogatepass"))
    return out


