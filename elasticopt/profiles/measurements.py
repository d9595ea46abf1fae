"""Readers for the public throughput measurements the named profiles are fitted to.

Two data sets (see docs/data.md), neither of them copied into the
project: only the parameters fitted to them are (``profiles/data/*.json``).

- ``a100``: the ElasticFlow artifact (pkusys/ElasticFlow, ASPLOS'23,
  Apache-2.0), ``scheduler/throughputs_A100/<model>.csv``: iterations/s by
  global batch (rows) and GPU count (columns 1..64); an empty or zero cell was
  not measured or did not fit.  No node information: 8 GPUs per node assumed.
- ``t4``: the Pollux artifact (petuum/adaptdl, branch osdi21-artifact,
  OSDI'21, Apache-2.0), ``simulator/traces/<model>/{placements,scalability}.csv``:
  step and synchronisation seconds by placement and per-GPU batch; 4 T4 GPUs
  per node (the placement digits never pass 4).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from elasticopt.errors import ValidationError

__all__ = [
    "Measurements",
    "A100_NETWORKS",
    "T4_NETWORKS",
    "SOURCES",
    "load_a100",
    "load_t4",
    "load_all",
    "to_tabular",
]

A100_NETWORKS = ("bert", "deepspeech2", "gpt2", "inception3", "resnet50", "resnet50_cifar10", "vgg16")
T4_NETWORKS = ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3")

SOURCES = {
    "a100": {
        "source": "ElasticFlow artifact (pkusys/ElasticFlow, ASPLOS'23), "
        "scheduler/throughputs_A100/<model>.csv: iterations/s by global batch and GPU count",
        "license": "Apache-2.0",
        "hardware": "NVIDIA A100",
        "gpus_per_node": 8,
        "gpus_per_node_note": "not in the data; 8 GPUs per node assumed for the node-crossing step",
    },
    "t4": {
        "source": "Pollux artifact (petuum/adaptdl, branch osdi21-artifact, OSDI'21), "
        "simulator/traces/<model>/placements.csv and scalability.csv: step and sync seconds",
        "license": "Apache-2.0",
        "hardware": "NVIDIA T4",
        "gpus_per_node": 4,
        "gpus_per_node_note": "placement digits (GPUs per node) never exceed 4",
    },
}


@dataclass(frozen=True)
class Measurements:
    """Measured iteration times of one network, one row per measurement.

    Attributes
    ----------
    name
        Profile name, ``"<set>/<network>"``.
    gpus, nodes
        Data-parallel replicas and the number of nodes they spanned.
    local_batch
        Per-GPU batch (global batch / gpus).
    step_time_s
        Seconds per training iteration.
    sync_time_s
        Seconds spent synchronising gradients (NaN where not measured).
    gpus_per_node
        GPUs per node of the measured hardware.
    """

    name: str
    gpus: np.ndarray
    nodes: np.ndarray
    local_batch: np.ndarray
    step_time_s: np.ndarray
    sync_time_s: np.ndarray
    gpus_per_node: int

    def __len__(self) -> int:
        return int(self.gpus.size)

    @property
    def global_batch(self) -> np.ndarray:
        """Global batch of every row (gpus x local batch)."""
        return self.gpus * self.local_batch

    @property
    def samples_per_s(self) -> np.ndarray:
        """Measured samples/s of every row."""
        return self.global_batch / self.step_time_s

    def subset(self, mask: np.ndarray) -> "Measurements":
        """The rows selected by a boolean mask or index array."""
        return Measurements(
            self.name,
            self.gpus[mask],
            self.nodes[mask],
            self.local_batch[mask],
            self.step_time_s[mask],
            self.sync_time_s[mask],
            self.gpus_per_node,
        )


def _file(path: Path) -> Path:
    if not path.is_file():
        raise ValidationError(str(path), "a measurement file", "no such file",
                              hint="pass the folder holding profiles/a100 and profiles/t4")
    return path


def _profiles_dir(data_dir: str | Path) -> Path:
    root = Path(data_dir)
    return root / "profiles" if (root / "profiles").is_dir() else root


def load_a100(data_dir: str | Path, network: str) -> Measurements:
    """Read ``profiles/a100/<network>.csv`` (iterations/s grid) under ``data_dir``."""
    path = _file(_profiles_dir(data_dir) / "a100" / f"{network}.csv")
    gpus, local, step = [], [], []
    with path.open(newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader)
        ks = [int(h) for h in header[1:]]
        for row in reader:
            if not row:
                continue
            batch = int(float(row[0]))
            for k, cell in zip(ks, row[1:]):
                cell = cell.strip()
                its = float(cell) if cell else 0.0
                if not (math.isfinite(its) and its > 0) or batch % k:
                    continue  # not measured, did not fit, or fractional local batch
                gpus.append(k)
                local.append(batch // k)
                step.append(1.0 / its)
    g = np.asarray(gpus, dtype=np.int64)
    gpn = int(SOURCES["a100"]["gpus_per_node"])
    return Measurements(
        f"a100/{network}", g, -(-g // gpn), np.asarray(local, dtype=float),
        np.asarray(step, dtype=float), np.full(g.size, np.nan), gpn,
    )


def load_t4(data_dir: str | Path, network: str) -> Measurements:
    """Read ``profiles/t4/<network>/{placements,scalability}.csv`` under ``data_dir``."""
    folder = _profiles_dir(data_dir) / "t4" / network
    gpus, nodes, local, step, sync = [], [], [], [], []
    with _file(folder / "placements.csv").open(newline="") as fh:
        for row in csv.DictReader(fh):
            digits = [int(c) for c in row["placement"].strip() if c != "0"]
            gpus.append(sum(digits))
            nodes.append(len(digits))
            local.append(float(row["local_bsz"]))
            step.append(float(row["step_time"]))
            sync.append(float(row["sync_time"]))
    with _file(folder / "scalability.csv").open(newline="") as fh:
        for row in csv.DictReader(fh):
            gpus.append(int(row["num_replicas"]))
            nodes.append(int(row["num_nodes"]))
            local.append(float(row["local_bsz"]))
            step.append(float(row["step_time"]))
            sync.append(float(row["sync_time"]))
    step_a = np.asarray(step, dtype=float)
    keep = np.isfinite(step_a) & (step_a > 0)
    return Measurements(
        f"t4/{network}",
        np.asarray(gpus, dtype=np.int64)[keep],
        np.asarray(nodes, dtype=np.int64)[keep],
        np.asarray(local, dtype=float)[keep],
        step_a[keep],
        np.asarray(sync, dtype=float)[keep],
        int(SOURCES["t4"]["gpus_per_node"]),
    )


def load_all(data_dir: str | Path) -> list[Measurements]:
    """Every network of both sets, a100 first, in a fixed order."""
    return [load_a100(data_dir, n) for n in A100_NETWORKS] + [load_t4(data_dir, n) for n in T4_NETWORKS]


def to_tabular(meas: Measurements):
    """A :class:`~elasticopt.profiles.tabular.TabularProfile` of the measured points.

    A100 grids keep their global-batch axis.  T4 rows are keyed by (GPUs,
    per-GPU batch); per key only the rows with the fewest nodes (the packed
    placement) count, and their median samples/s is kept.
    """
    from elasticopt.profiles.tabular import TabularProfile

    sps = meas.samples_per_s
    local_axis = bool(np.any(np.isfinite(meas.sync_time_s)))
    groups: dict[tuple[int, int], list[tuple[int, float]]] = {}
    for k, n, m, v in zip(meas.gpus.tolist(), meas.nodes.tolist(), meas.local_batch.tolist(), sps.tolist()):
        b = int(round(m)) if local_axis else int(round(k * m))
        groups.setdefault((int(k), b), []).append((int(n), float(v)))
    points = {}
    for key, rows in groups.items():
        fewest = min(n for n, _ in rows)
        points[key] = float(np.median([v for n, v in rows if n == fewest]))
    return TabularProfile(meas.name, points, batch_axis="local" if local_axis else "global",
                          gpus_per_node=meas.gpus_per_node)
