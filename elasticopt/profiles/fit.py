"""Fit the iteration-time model to measurements, and measure how well it predicts.

:func:`fit_params` runs ``scipy.optimize.least_squares`` on log residuals
(relative error of the iteration time, which is the relative error of
samples/s) from a few starting points and keeps the best.
:func:`cross_validate` holds every point out once (seeded k-fold) and reports
the errors of the fits that did not see it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from elasticopt.errors import ValidationError
from elasticopt.profiles.measurements import SOURCES, Measurements
from elasticopt.profiles.parametric import IterationTimeParams, ParametricProfile, iteration_time_s

__all__ = ["FitStats", "fit_params", "relative_errors", "cross_validate", "fit_profile", "measured_constraints",
           "tabular_leave_one_out"]

_LOWER = np.array([1e-9, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0])
_UPPER = np.array([np.inf, np.inf, np.inf, np.inf, np.inf, np.inf, 10.0])
# (gamma, sync time as a share of the median step time) to start from; the best fit wins
_STARTS = ((1.0, 0.5), (2.0, 0.5), (5.0, 0.5), (1.0, 0.02), (3.0, 0.02))


@dataclass(frozen=True)
class FitStats:
    """Relative errors of predicted samples/s, ``|pred - meas| / meas``."""

    points: int
    median: float
    worst: float
    p90: float

    @classmethod
    def of(cls, errors: np.ndarray) -> "FitStats":
        e = np.asarray(errors, dtype=float)
        return cls(int(e.size), float(np.median(e)), float(np.max(e)), float(np.quantile(e, 0.9)))

    def to_dict(self) -> dict:
        return {"points": self.points, "median": round(self.median, 6), "p90": round(self.p90, 6),
                "worst": round(self.worst, 6)}


def _start(meas: Measurements, gamma: float, sync_scale: float) -> np.ndarray:
    t, k, m = meas.step_time_s, meas.gpus, meas.local_batch
    one = k == 1
    if one.sum() >= 2 and np.ptp(m[one]) > 0:
        slope, base = np.polyfit(m[one], t[one], 1)
    else:
        slope, base = 0.5 * np.median(t / m), 0.5 * np.median(t)
    slope, base = max(slope, 1e-9), max(base, 1e-6)
    s = sync_scale * float(np.median(t))
    return np.array([base, slope, s, s / 16, s, s / 16, gamma])


def fit_params(meas: Measurements) -> IterationTimeParams:
    """Least-squares fit of :class:`IterationTimeParams` to ``meas``.

    Where no measurement crossed nodes the node-crossing parameters cannot be
    identified: they are tied to the single-node ones (no step).
    """
    if len(meas) < 3:
        raise ValidationError(f"measurements {meas.name!r}", "at least 3 measured points", len(meas))
    multi = bool(np.any(meas.nodes > 1))
    free = np.array([True, True, True, True, multi, multi, True])
    log_t = np.log(meas.step_time_s)

    def full(x: np.ndarray) -> np.ndarray:
        p = np.empty(7)
        p[free] = x
        if not multi:
            p[4], p[5] = p[2], p[3]
        return p

    def residuals(x: np.ndarray) -> np.ndarray:
        pred = iteration_time_s(full(x), meas.gpus, meas.nodes, meas.local_batch)
        return np.log(np.maximum(pred, 1e-300)) - log_t

    best = None
    for gamma, sync_scale in _STARTS:
        x0 = np.clip(_start(meas, gamma, sync_scale)[free], _LOWER[free], _UPPER[free])
        res = least_squares(residuals, x0, bounds=(_LOWER[free], _UPPER[free]), x_scale="jac",
                            method="trf", max_nfev=400)
        if best is None or res.cost < best.cost:
            best = res
    return IterationTimeParams.from_array(full(best.x))


def relative_errors(params: IterationTimeParams, meas: Measurements) -> np.ndarray:
    """``|pred - meas| / meas`` of samples/s at every measured point."""
    pred = iteration_time_s(params, meas.gpus, meas.nodes, meas.local_batch)
    return np.abs(meas.step_time_s / pred - 1.0)


def cross_validate(meas: Measurements, folds: int = 5, seed: int = 0) -> np.ndarray:
    """Held-out relative errors: each point predicted by a fit that did not see it.

    Points are split into ``folds`` groups by a permutation from
    ``numpy.random.default_rng(seed)``; returns one error per point.
    """
    n = len(meas)
    folds = max(2, min(folds, n))
    order = np.random.default_rng(seed).permutation(n)
    errors = np.empty(n)
    for f in range(folds):
        test = order[f::folds]
        train = np.setdiff1d(order, test)
        params = fit_params(meas.subset(train))
        errors[test] = relative_errors(params, meas.subset(test))
    return errors


def measured_constraints(meas: Measurements) -> dict[str, int]:
    """Realistic limits from the measurements (a missing or zero cell did not fit or run).

    Global batch range, largest and smallest per-GPU batch and largest GPU
    count that were measured, and the node size of the hardware.
    """
    gb = meas.global_batch
    return {
        "gpus_per_node": meas.gpus_per_node,
        "batch_min": int(np.floor(gb.min())),
        "batch_max": int(np.floor(gb.max())),
        "max_local": int(np.floor(meas.local_batch.max())),
        "gpus_max": int(meas.gpus.max()),
        "min_local": max(1, int(np.ceil(meas.local_batch.min()))),
    }


def fit_profile(meas: Measurements, folds: int = 5, seed: int = 0) -> tuple[ParametricProfile, FitStats, FitStats]:
    """Fit on all points; return the profile, in-sample and held-out error stats.

    The profile's constraints come from :func:`measured_constraints`.
    """
    params = fit_params(meas)
    fit_stats = FitStats.of(relative_errors(params, meas))
    held_stats = FitStats.of(cross_validate(meas, folds, seed))
    set_name = meas.name.split("/")[0]
    src = SOURCES.get(set_name, {})
    profile = ParametricProfile(
        name=meas.name,
        params=IterationTimeParams.from_array(np.round(params.as_array(), 12)),
        **measured_constraints(meas),
        meta={
            "source": src.get("source", ""),
            "license": src.get("license", ""),
            "points": len(meas),
            "fit_error": fit_stats.to_dict(),
            "held_out_error": {**held_stats.to_dict(), "folds": folds, "seed": seed},
        },
    )
    return profile, fit_stats, held_stats


def tabular_leave_one_out(meas: Measurements) -> tuple[np.ndarray, int]:
    """Baseline: each tabular grid point predicted from its grid neighbours.

    The held-out point is interpolated (log-linear, as the tabular profile
    does) between the nearest measured points below and above it in GPU count
    at the same batch, or failing that in batch at the same GPU count.
    Returns the relative errors of the points that could be predicted, and how
    many could not (grid edge): a tabular profile never extrapolates.
    """
    from elasticopt.profiles.measurements import to_tabular

    tab = to_tabular(meas)
    measured = {key: v for key, v in tab.points.items() if v is not None}
    errors, missed = [], 0
    for (k, b), v in measured.items():
        pred = None
        for axis in (0, 1):
            line = sorted((key[axis], val) for key, val in measured.items()
                          if key != (k, b) and key[1 - axis] == (k, b)[1 - axis])
            x = (k, b)[axis]
            lo = [p for p in line if p[0] < x]
            hi = [p for p in line if p[0] > x]
            if lo and hi:
                (x0, v0), (x1, v1) = lo[-1], hi[0]
                w = (np.log(x) - np.log(x0)) / (np.log(x1) - np.log(x0))
                pred = (1 - w) * v0 + w * v1
                break
        if pred is None:
            missed += 1
        else:
            errors.append(abs(pred / v - 1.0))
    return np.asarray(errors, dtype=float), missed
