"""Factor profile: log samples/s = a[m] + b[k] + e[k] log(m / m0) (+ c[k] when spread over nodes).

A two-way (per-GPU batch x GPU count) factor model in log space, with a slope
in log m per GPU count (how the share of synchronisation changes with the
per-GPU batch) and one factor per GPU count for a spread placement.  It assumes no shape of the
scaling: more GPUs may be slower, spread may be faster than packed (Gavel's
measurements do both), which the parametric iteration-time model cannot
follow.  Fitted by least squares on log samples/s (:func:`fit_factor`); it
answers only at the measured per-GPU batches and GPU counts (no extrapolation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from elasticopt.errors import ValidationError
from elasticopt.profiles.fit import FitStats
from elasticopt.profiles.measurements import Measurements

__all__ = ["FactorProfile", "fit_factor"]


@dataclass(frozen=True, eq=False)
class FactorProfile:
    """A :class:`~elasticopt.models.ThroughputModel`: ``exp(local[m] + gpus[k] (+ spread[k]))`` samples/s.

    Parameters
    ----------
    name
        E.g. ``"v100/resnet50"``.
    local
        Per-GPU batch m -> its log-samples/s term a_m (GPU count 1, packed).
    gpus
        GPU count k -> its term b_k (b_1 = 0).
    spread
        GPU count k -> the term c_k added when the job's GPUs span more nodes than ceil(k / g).
    slope
        GPU count k -> e_k, the coefficient of log(m / m0) (m0 the smallest measured per-GPU batch).
    gpus_per_node
        Node size of the measured hardware.
    batch_min, batch_max, max_local, gpus_max, min_local
        Limits of the measurements (global batch range, per-GPU batch range, GPU count).
    meta
        Provenance and fit figures.
    """

    name: str
    local: dict[int, float]
    gpus: dict[int, float]
    spread: dict[int, float]
    gpus_per_node: int
    batch_min: int
    batch_max: int
    max_local: int
    gpus_max: int
    min_local: int = 1
    meta: dict = field(default_factory=dict)
    slope: dict[int, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.local or not self.gpus:
            raise ValidationError(f"profile {self.name!r}", "factors for at least one batch and one GPU count", {})
        for what, d in (("local", self.local), ("gpus", self.gpus), ("spread", self.spread)):
            for k, v in d.items():
                if not (isinstance(k, int) and k >= 1 and math.isfinite(v)):
                    raise ValidationError(f"profile {self.name!r}.{what}[{k}]", "a finite factor for an integer >= 1", v)

    @staticmethod
    def _interp(levels: dict[int, float], x: float) -> float:
        """The factor at ``x``, interpolated linearly in log x between measured levels (constant beyond them)."""
        keys = sorted(levels)
        return float(np.interp(math.log(x), [math.log(k) for k in keys], [levels[k] for k in keys]))

    def samples_per_s_on_nodes(self, gpus: int, batch: int, nodes: int) -> float | None:
        """Samples/s with the GPUs on ``nodes`` nodes (spread beyond ceil(k / g) adds c_k).

        Exact at the measured per-GPU batches and GPU counts; between and
        beyond them the factors are interpolated in log m and log k (held
        constant past the ends), so every (k, b) with b >= k gets an answer.
        """
        if gpus < 1 or batch < gpus or nodes < 1:
            return None
        m = batch / gpus
        m0 = min(self.local)
        slope = self._interp({1: 0.0, **self.slope}, gpus) if self.slope else 0.0
        x = self._interp(self.local, m) + self._interp(self.gpus, gpus) + slope * math.log(m / m0)
        if gpus > 1 and nodes > -(-gpus // self.gpus_per_node) and self.spread:
            x += self._interp(self.spread, gpus)
        v = math.exp(x)
        return v if math.isfinite(v) and v > 0 else None

    def samples_per_s(self, gpus: int, batch: int) -> float | None:
        """Samples/s packed on the fewest nodes; None for gpus < 1 or batch < gpus."""
        return self.samples_per_s_on_nodes(gpus, batch, -(-gpus // self.gpus_per_node))

    def candidates(self, gpus_max: int, batch_min: int, batch_max: int) -> list[tuple[int, int]]:
        """The measured (k, k m) grid within the limits, sorted."""
        out = []
        for k in sorted(self.gpus):
            if k > min(gpus_max, self.gpus_max):
                continue
            for m in sorted(self.local):
                b = k * m
                if batch_min <= b <= batch_max and self.min_local <= m <= self.max_local:
                    out.append((k, b))
        return out

    def to_dict(self) -> dict:
        """JSON form (an entry of ``profiles/data/hetero/*.json``)."""
        return {
            "kind": "factor",
            "local": {str(k): round(v, 9) for k, v in sorted(self.local.items())},
            "gpus": {str(k): round(v, 9) for k, v in sorted(self.gpus.items())},
            "spread": {str(k): round(v, 9) for k, v in sorted(self.spread.items())},
            "slope": {str(k): round(v, 9) for k, v in sorted(self.slope.items())},
            "gpus_per_node": self.gpus_per_node,
            "batch_min": self.batch_min,
            "batch_max": self.batch_max,
            "max_local": self.max_local,
            "gpus_max": self.gpus_max,
            "min_local": self.min_local,
            **({"meta": self.meta} if self.meta else {}),
        }

    @classmethod
    def from_dict(cls, name: str, d: dict) -> "FactorProfile":
        """Inverse of :meth:`to_dict`."""
        conv = (lambda m: {int(k): float(v) for k, v in m.items()})
        return cls(name, conv(d["local"]), conv(d["gpus"]), conv(d.get("spread", {})), int(d["gpus_per_node"]),
                   int(d["batch_min"]), int(d["batch_max"]), int(d["max_local"]), int(d["gpus_max"]),
                   int(d.get("min_local", 1)), dict(d.get("meta", {})), conv(d.get("slope", {})))

    def __hash__(self) -> int:
        return hash((self.name, tuple(sorted(self.local.items())), tuple(sorted(self.gpus.items())),
                     tuple(sorted(self.spread.items())), tuple(sorted(self.slope.items()))))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FactorProfile):
            return NotImplemented
        return self.to_dict() == other.to_dict()


def _design(meas: Measurements, ms: list[int], ks: list[int], sk: list[int]) -> np.ndarray:
    m = np.rint(meas.local_batch).astype(np.int64)
    k = meas.gpus
    spread = meas.nodes > -(-k // meas.gpus_per_node)
    cols = [(m == v).astype(float) for v in ms]
    cols += [(k == v).astype(float) for v in ks[1:]]  # b_{k0} = 0 for the smallest k
    cols += [((k == v) & spread).astype(float) for v in sk]
    lm = np.log(meas.local_batch / ms[0])
    cols += [(k == v) * lm for v in ks[1:]]  # e_k: slope in log m per GPU count (e_{k0} = 0)
    return np.stack(cols, axis=1)


def _levels(meas: Measurements) -> tuple[list[int], list[int], list[int]]:
    m = np.rint(meas.local_batch).astype(np.int64)
    spread = meas.nodes > -(-meas.gpus // meas.gpus_per_node)
    return (sorted(set(m.tolist())), sorted(set(meas.gpus.tolist())),
            sorted(set(meas.gpus[spread & (meas.gpus > 1)].tolist())))


def _solve(meas: Measurements) -> tuple[dict[int, float], dict[int, float], dict[int, float]]:
    ms, ks, sk = _levels(meas)
    X = _design(meas, ms, ks, sk)
    y = np.log(meas.samples_per_s)
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    a = dict(zip(ms, coef[: len(ms)].tolist()))
    b = {ks[0]: 0.0, **dict(zip(ks[1:], coef[len(ms): len(ms) + len(ks) - 1].tolist()))}
    off = len(ms) + len(ks) - 1
    c = dict(zip(sk, coef[off: off + len(sk)].tolist()))
    e = dict(zip(ks[1:], coef[off + len(sk):].tolist()))
    return a, b, c, e


def _predict(a, b, c, e, meas: Measurements) -> np.ndarray:
    m = np.rint(meas.local_batch).astype(np.int64)
    spread = meas.nodes > -(-meas.gpus // meas.gpus_per_node)
    m0 = min(a)
    out = np.full(len(meas), np.nan)
    for i, (mi, ki, si) in enumerate(zip(m.tolist(), meas.gpus.tolist(), spread.tolist())):
        if mi in a and ki in b and (not si or ki == 1 or ki in c):
            x = a[mi] + b[ki] + e.get(ki, 0.0) * math.log(mi / m0) + (c[ki] if si and ki > 1 else 0.0)
            out[i] = math.exp(x)
    return out


def fit_factor(meas: Measurements, folds: int = 5, seed: int = 0, min_local: int = 1) -> tuple[FactorProfile, FitStats, FitStats]:
    """Fit on all rows; return the profile, in-sample and held-out error stats.

    Held out: ``folds``-fold cross-validation (rows assigned by
    ``default_rng(seed).permutation``); a held-out row whose batch or GPU count
    no training row has cannot be predicted and is left out of the figures.
    """
    a, b, c, e = _solve(meas)
    meas_sps = meas.samples_per_s
    fit_err = np.abs(_predict(a, b, c, e, meas) - meas_sps) / meas_sps
    order = np.random.default_rng(seed).permutation(len(meas))
    held = np.full(len(meas), np.nan)
    for f in range(folds):
        test = order[f::folds]
        train = np.setdiff1d(order, test)
        fitted = _solve(meas.subset(train))
        held[test] = np.abs(_predict(*fitted, meas.subset(test)) - meas_sps[test]) / meas_sps[test]
    fit_stats = FitStats.of(fit_err)
    known = held[np.isfinite(held)]
    if known.size == 0:
        raise ValidationError(f"measurements {meas.name!r}", "rows whose held-out fits can predict them (repeated "
                              "batches and GPU counts)", "none")
    held_stats = FitStats.of(known)
    gb = meas.global_batch
    prof = FactorProfile(
        meas.name, a, b, c, meas.gpus_per_node, int(gb.min()), int(gb.max()),
        int(np.rint(meas.local_batch).max()), int(meas.gpus.max()), max(min_local, int(np.rint(meas.local_batch).min())),
        meta={"points": len(meas), "fit_error": fit_stats.to_dict(),
              "held_out_error": {**held_stats.to_dict(), "folds": folds, "seed": seed,
                                 "unpredictable": int(np.isnan(held).sum())}},
        slope=e,
    )
    return prof, fit_stats, held_stats
