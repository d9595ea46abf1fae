"""Statistical efficiency of large batches, fitted to measured training runs.

A larger global batch b processes samples faster, but each sample is worth
less (Pollux, OSDI'21, §3.1; McCandlish et al. 2018): relative to a base batch
M0, one sample at batch b makes the progress of ``E(b)`` samples at M0, with

    E(b) = (phi + M0) / (phi + b)   for b >= M0, and 1 below M0,

phi the gradient noise scale (below the smallest measured batch no gain is
assumed: the formula would promise E > 1 where nothing was measured).  phi changes over training; measured as
``phi(p) = M0 * grad_var(p) / grad_sqr(p)`` (the variance normalised to the
base batch, as the Pollux artifact's AdaScale records it).  Over a whole job
the samples needed at batch b are ``∫ dp / E_p(b)``, and because ``1/E`` is
affine in b the job-level efficiency is again of this form with

    1 / (phi_eff + M0) = mean over progress of 1 / (phi(p) + M0).

:class:`StatisticalEfficiency` carries ``phi_eff`` per network; E = 1 at the
base batch and non-increasing in b.  ``validation/fit_efficiency.py`` fits it
and reports the held-out error on the measured gain.
"""

from __future__ import annotations

import csv
import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np

from elasticopt.errors import ValidationError

__all__ = [
    "StatisticalEfficiency",
    "ValidationRun",
    "EFFICIENCY_FORMAT",
    "get_efficiency",
    "efficiency_names",
    "load_validation_runs",
    "noise_scale_curve",
    "effective_noise_scale",
    "predict_iterations",
]

EFFICIENCY_FORMAT = "elasticopt-efficiency/1"


@dataclass(frozen=True)
class StatisticalEfficiency:
    """E(b) = (noise_scale + base_batch) / (noise_scale + b) (module docstring).

    Parameters
    ----------
    base_batch
        M0, the batch at which E = 1 (the smallest measured batch).
    noise_scale
        phi_eff in samples (>= 0): 0 means every batch above M0 wastes samples
        in proportion, infinity means large batches cost nothing.
    name
        The network it was fitted to.
    """

    base_batch: int
    noise_scale: float
    name: str = "efficiency"

    def __post_init__(self) -> None:
        if isinstance(self.base_batch, bool) or not isinstance(self.base_batch, int) or self.base_batch < 1:
            raise ValidationError(f"efficiency {self.name!r}.base_batch", "an integer >= 1", self.base_batch)
        phi = float(self.noise_scale)
        if not (phi >= 0 and not math.isnan(phi)):
            raise ValidationError(f"efficiency {self.name!r}.noise_scale", "a number >= 0", self.noise_scale)

    def __call__(self, batch: float) -> float:
        """E(batch), relative to the base batch; 1 at and below it (nothing measured there)."""
        phi = float(self.noise_scale)
        if math.isinf(phi) or batch <= self.base_batch:
            return 1.0
        return (phi + self.base_batch) / (phi + float(batch))

    def gain(self, batch: float) -> float:
        """Progress per iteration at ``batch`` in base-batch iterations: (b / M0) * E(b)."""
        return batch / self.base_batch * self(batch)

    def to_dict(self) -> dict:
        """Plain dict, for JSON."""
        return {"base_batch": self.base_batch, "noise_scale": self.noise_scale}


# ---- measured runs ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ValidationRun:
    """One measured training run at global batch ``batch`` (columns of ``validation-<B>.csv``).

    ``progress[i]`` is the base-batch iterations done at evaluation i,
    ``iteration[i]`` the real iterations, ``noise_ratio[i]`` = grad_var /
    grad_sqr over the interval ending at i (NaN where grad_sqr was 0).
    """

    network: str
    batch: int
    progress: np.ndarray
    iteration: np.ndarray
    metric: np.ndarray
    noise_ratio: np.ndarray

    @property
    def measured_gain(self) -> float:
        """Overall statistical gain: final progress / final iterations."""
        return float(self.progress[-1] / self.iteration[-1])


def load_validation_runs(folder: str | Path) -> list[ValidationRun]:
    """Read every ``validation-<B>.csv`` of one network's folder, by increasing B.

    Raises
    ------
    ValidationError
        No such file, a missing column or a non-numeric / non-positive cell
        (naming the file and row).
    """
    folder = Path(folder)
    files = sorted(folder.glob("validation-*.csv"), key=lambda f: int(re.findall(r"(\d+)", f.stem)[-1]))
    if not files:
        raise ValidationError(str(folder), "a folder with validation-<B>.csv files", "none")
    runs = []
    need = ("progress", "iteration", "metric", "grad_sqr", "grad_var")
    for f in files:
        batch = int(re.findall(r"(\d+)", f.stem)[-1])
        with open(f, newline="") as fh:
            reader = csv.DictReader(fh)
            missing = [c for c in need if c not in (reader.fieldnames or ())]
            if missing:
                raise ValidationError(f"{f}:header", "columns " + ", ".join(need), reader.fieldnames,
                                      hint=f"missing {', '.join(missing)}")
            rows = []
            for i, row in enumerate(reader):
                try:
                    vals = [float(row[c]) for c in need]
                except ValueError:
                    raise ValidationError(f"{f}:row {i + 2}", "numbers in " + ", ".join(need), dict(row)) from None
                if not all(math.isfinite(v) for v in vals) or vals[0] <= 0 or vals[1] <= 0 or vals[3] < 0:
                    raise ValidationError(f"{f}:row {i + 2}", "finite values, progress and iteration > 0",
                                          dict(row))
                rows.append(vals)
        if not rows:
            raise ValidationError(str(f), "at least one row", 0)
        a = np.array(rows)
        with np.errstate(divide="ignore", invalid="ignore"):  # grad_sqr = 0: ratio undefined (NaN), not used
            ratio = np.where(a[:, 3] > 0, a[:, 4] / np.where(a[:, 3] > 0, a[:, 3], 1.0), np.nan)
        runs.append(ValidationRun(folder.name, batch, a[:, 0], a[:, 1], a[:, 2], ratio))
    return runs


# ---- the fit ----------------------------------------------------------------------------------------


def noise_scale_curve(runs: list[ValidationRun], base_batch: int, bins: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """phi over training progress, pooled over runs: (bin edges in base iterations, median phi per bin).

    Every evaluation contributes ``M0 * grad_var / grad_sqr`` at its progress;
    the progress axis ends at the shortest run's final progress; a bin without
    a measurement takes its nearest neighbour's value.
    """
    end = min(float(r.progress[-1]) for r in runs)
    edges = np.linspace(0.0, end, bins + 1)
    p = np.concatenate([r.progress for r in runs])
    phi = base_batch * np.concatenate([r.noise_ratio for r in runs])
    keep = ~np.isnan(phi)
    p, phi = p[keep], phi[keep]
    idx = np.clip(np.searchsorted(edges, p, side="left") - 1, 0, bins - 1)
    med = np.full(bins, np.nan)
    for i in range(bins):
        sel = phi[idx == i]
        if sel.size:
            med[i] = float(np.median(sel))
    have = np.flatnonzero(~np.isnan(med))
    for i in np.flatnonzero(np.isnan(med)):
        med[i] = med[have[np.argmin(np.abs(have - i))]]
    return edges, med


def effective_noise_scale(curve_phi: np.ndarray, base_batch: int) -> float:
    """phi_eff with 1/(phi_eff + M0) = mean of 1/(phi + M0) over equal progress bins."""
    return float(1.0 / np.mean(1.0 / (np.asarray(curve_phi) + base_batch)) - base_batch)


def predict_iterations(run: ValidationRun, base_batch: int, edges: np.ndarray, curve_phi: np.ndarray) -> float:
    """Iterations the run needs to reach its final progress, predicted from a phi curve."""
    s = run.batch / base_batch
    p_end = float(run.progress[-1])
    grid = np.linspace(0.0, p_end, 401)
    mid = 0.5 * (grid[1:] + grid[:-1])
    phi = curve_phi[np.clip(np.searchsorted(edges, mid, side="left") - 1, 0, len(curve_phi) - 1)]
    gain = s * (phi + base_batch) / (phi + run.batch)
    return float(np.sum(np.diff(grid) / gain))


# ---- shipped figures ------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _load() -> dict[str, StatisticalEfficiency]:
    out: dict[str, StatisticalEfficiency] = {}
    folder = resources.files("elasticopt.profiles") / "data"
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not (entry.name.startswith("efficiency_") and entry.name.endswith(".json")):
            continue
        doc = json.loads(entry.read_text(encoding="utf-8"))
        if doc.get("format") != EFFICIENCY_FORMAT:
            raise ValidationError(f"profiles/data/{entry.name}.format", repr(EFFICIENCY_FORMAT), doc.get("format"))
        for name, d in doc["profiles"].items():
            out[name] = StatisticalEfficiency(int(d["base_batch"]), float(d["noise_scale"]), name)
    return out


def efficiency_names() -> list[str]:
    """Profile names that have a fitted statistical efficiency (e.g. ``"t4/imagenet"``)."""
    return sorted(_load())


def get_efficiency(profile_name: str) -> StatisticalEfficiency | None:
    """The fitted efficiency of a named profile, or None where none was measured."""
    return _load().get(profile_name)
