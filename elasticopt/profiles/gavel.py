"""Reader for Gavel's heterogeneous-GPU measurements (K80, P100, V100; packed or spread).

From the Gavel artifact (stanford-futuredata/gavel, OSDI'20, MIT licence),
``scheduler/simulation_throughputs.json`` (see ``shared/data/README.md``): per
GPU type (``k80``, ``p100``, ``v100``, and ``<type>_unconsolidated`` for a job
whose GPUs are spread over several servers), per job type ``"('<Model> (batch
size <m>)', <k>)"`` (per-GPU batch m, k GPUs), the steps/s of the job running
alone under ``"null"``; 0 means it did not fit.  Samples/s = steps/s x m x k.

Each model (ResNet-18, ResNet-50, Transformer, LM, Recommendation, A3C,
CycleGAN) becomes one set of measurements per GPU type: consolidated rows on
ceil(k / 8) nodes (Gavel's servers hold up to 8 GPUs), unconsolidated rows on
k nodes (one GPU per server: the step in the parametric model is "more than
one node", so any spread count gives the same fit).
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import numpy as np

from elasticopt.errors import ValidationError
from elasticopt.profiles.measurements import Measurements

__all__ = ["GAVEL_TYPES", "GAVEL_SOURCE", "GAVEL_GPUS_PER_NODE", "load_gavel", "gavel_networks"]

GAVEL_TYPES = ("k80", "p100", "v100")
GAVEL_GPUS_PER_NODE = 8
GAVEL_SOURCE = {
    "source": "Gavel artifact (stanford-futuredata/gavel, OSDI'20, commit c4fa40097339e9608ab71fd64c8bdea96a5e4a4c), "
    "scheduler/simulation_throughputs.json: steps/s per job type (model, per-GPU batch) and GPU count, "
    "consolidated and unconsolidated",
    "license": "MIT",
    "gpus_per_node": GAVEL_GPUS_PER_NODE,
    "gpus_per_node_note": "consolidated jobs of up to 8 GPUs ran on one server; unconsolidated ones one GPU per server",
}

_KEY = re.compile(r"^(?P<model>.+?) \(batch size (?P<m>\d+)\)$")


def _slug(model: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", model.lower())


def _read(data_dir: str | Path) -> dict:
    root = Path(data_dir)
    for cand in (root / "profiles" / "gavel", root / "gavel", root):
        f = cand / "simulation_throughputs.json"
        if f.is_file():
            return json.loads(f.read_text(encoding="utf-8"))
    raise ValidationError(str(root), "a folder holding profiles/gavel/simulation_throughputs.json", "no such file")


def _rows(doc: dict, key: str) -> list[tuple[str, int, int, float]]:
    out = []
    for job, entry in doc.get(key, {}).items():
        name, k = ast.literal_eval(job)
        m = _KEY.match(name)
        if m is None:
            continue
        steps = float(entry.get("null", 0.0) or 0.0)
        if steps > 0:
            out.append((m.group("model"), int(m.group("m")), int(k), steps))
    return out


def gavel_networks(data_dir: str | Path) -> list[str]:
    """Model slugs in the data (``resnet18``, ``lm``, ...), sorted."""
    doc = _read(data_dir)
    return sorted({_slug(r[0]) for t in GAVEL_TYPES for r in _rows(doc, t)})


def load_gavel(data_dir: str | Path, gpu_type: str, network: str) -> Measurements:
    """Measurements ``"<gpu_type>/<network>"`` (e.g. ``"v100/resnet18"``): consolidated and spread rows."""
    if gpu_type not in GAVEL_TYPES:
        raise ValidationError("gpu_type", "one of " + ", ".join(GAVEL_TYPES), gpu_type)
    doc = _read(data_dir)
    gpus, nodes, local, step = [], [], [], []
    for key, spread in ((gpu_type, False), (f"{gpu_type}_unconsolidated", True)):
        for model, m, k, steps in _rows(doc, key):
            if _slug(model) != network:
                continue
            if spread and k == 1:
                continue  # one GPU: the same as the consolidated row
            gpus.append(k)
            nodes.append(k if spread else -(-k // GAVEL_GPUS_PER_NODE))
            local.append(float(m))
            step.append(1.0 / steps)
    if not gpus:
        raise ValidationError(f"gavel {gpu_type}/{network}", "measured rows", "none")
    g = np.asarray(gpus, dtype=np.int64)
    return Measurements(f"{gpu_type}/{network}", g, np.asarray(nodes, dtype=np.int64), np.asarray(local),
                        np.asarray(step), np.full(g.size, np.nan), GAVEL_GPUS_PER_NODE)
