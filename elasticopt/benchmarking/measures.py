"""Summary measures of solver benchmarks, as the MIP benchmarks report them.

Per solver, over the instances of a benchmark (every instance counts once:
the median ``total_s`` of its timed repeats):

- **solved**: instances where every timed repeat proved its answer (OPTIMAL or
  INFEASIBLE), passed :func:`~elasticopt.solvers.verify`, agreed with the
  cross-check and finished within the time limit;
- **shifted geometric mean** of total time, ``exp(mean(log(t + s))) - s``,
  with an unsolved instance counted at the time limit (Mittelmann's
  benchmarks: shift 10 s for 2 h limits; MIPLIB 2017: 1 s).  The default
  shift here, :data:`DEFAULT_SHIFT_S` = 10 ms, is scaled to this problem
  class, where exact solves take from 0.1 ms to the limit; the shift keeps
  the many sub-millisecond solves from dominating the mean.  Without a time
  limit an unsolved instance counts at the largest time measured in the
  benchmark (stated in the summary);
- **Dolan-Moré performance profile** (Math. Prog. 91, 2002): with
  ``r[p, s] = t[p, s] / min_s t[p, s]`` on instance p (unsolved: r = inf),
  ``rho_s(tau)`` is the fraction of instances with ``r[p, s] <= tau``;
  instances no solver solved are left out (their number is stated);
- for backends that report incumbents (``milp``, ``cpsat``, ``scip``): the
  shifted geometric means of the time to the first incumbent and to the
  optimum found (no incumbent, or no proven optimum: counted at the limit).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from elasticopt.benchmarking.rows import BenchResult, BenchRow

__all__ = [
    "DEFAULT_SHIFT_S",
    "InstanceTime",
    "SolverSummary",
    "PerformanceProfile",
    "shifted_geometric_mean",
    "instance_times",
    "solver_summaries",
    "performance_profile",
]

#: Shift of the shifted geometric means, seconds (module docstring).
DEFAULT_SHIFT_S = 0.01


def shifted_geometric_mean(times: Sequence[float], shift_s: float = DEFAULT_SHIFT_S) -> float:
    """``exp(mean(log(t + shift))) - shift`` of non-negative times (nan for none).

    Raises
    ------
    ValueError
        For a negative time or a shift <= 0.
    """
    if not shift_s > 0:
        raise ValueError(f"shift_s must be > 0 seconds, got {shift_s!r}")
    ts = list(times)
    if not ts:
        return math.nan
    if any(t < 0 for t in ts):
        raise ValueError(f"times must be >= 0 seconds, got {min(ts)!r}")
    return math.exp(statistics.fmean(math.log(t + shift_s) for t in ts)) - shift_s


@dataclass(frozen=True)
class InstanceTime:
    """One solver on one instance: median over its timed repeats.

    ``time_s`` is the median total time when solved, else the penalty time
    (the limit); ``measured_s`` the median total time as measured.
    """

    instance: str
    family: str
    solver: str
    solved: bool
    status: str
    time_s: float
    measured_s: float
    first_incumbent_s: float | None
    optimum_found_s: float | None
    reports_incumbents: bool


def _solved(r: BenchRow) -> bool:
    return (r.status in ("OPTIMAL", "INFEASIBLE") and r.verified and r.agrees_with_best is not False
            and r.within_limit is not False)


def _penalty(result: BenchResult) -> float:
    limit = result.settings.get("time_limit_s")
    if limit:
        return float(limit)
    return max((r.total_s for r in result.rows), default=0.0)


def _status_of(r: BenchRow) -> str:
    """A row's status, with the reason where a LIMIT is not the time limit (``LIMIT (state_space)``: a model
    not built for its size; ``LIMIT (not_placeable)``)."""
    if r.status == "LIMIT" and r.reason not in ("time_limit", "", None):
        return f"LIMIT ({r.reason})"
    return r.status


def instance_times(result: BenchResult) -> list[InstanceTime]:
    """Per (instance, solver): solved or not, and the time the summaries use (module docstring)."""
    groups: dict[tuple[str, str], list[BenchRow]] = {}
    for r in result.rows:
        groups.setdefault((r.instance, r.solver), []).append(r)
    pen = _penalty(result)
    out = []
    for (inst, solver), rs in groups.items():
        solved = all(_solved(r) for r in rs)
        measured = statistics.median(r.total_s for r in rs)
        firsts = [r.first_incumbent_s for r in rs if r.first_incumbent_s is not None]
        found = [r.optimum_found_s for r in rs if r.optimum_found_s is not None]
        out.append(InstanceTime(
            instance=inst, family=rs[0].family, solver=solver, solved=solved,
            status="/".join(sorted({_status_of(r) for r in rs})),
            time_s=measured if solved else pen,
            measured_s=measured,
            first_incumbent_s=statistics.median(firsts) if len(firsts) == len(rs) else None,
            optimum_found_s=statistics.median(found) if solved and len(found) == len(rs) else None,
            reports_incumbents=any(r.incumbents is not None for r in rs),
        ))
    return out


@dataclass(frozen=True)
class SolverSummary:
    """One solver over a benchmark (module docstring).

    ``sgm_ratio_to_best``: this solver's shifted geometric mean over the
    smallest one (1 for the fastest); ``sgm_first_incumbent_s`` and
    ``sgm_optimum_found_s`` are None for solvers that report no incumbents.
    """

    solver: str
    instances: int
    solved: int
    sgm_total_s: float
    sgm_ratio_to_best: float
    shift_s: float
    penalty_s: float
    sgm_first_incumbent_s: float | None
    sgm_optimum_found_s: float | None
    family: str = "all"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


def solver_summaries(result: BenchResult, shift_s: float = DEFAULT_SHIFT_S, *,
                     by_family: bool = False) -> list[SolverSummary]:
    """Per solver (and per family with ``by_family``): solved count and shifted geometric means.

    Only instances every solver ran are compared (an interrupted benchmark
    leaves some out); sorted by family, then shifted geometric mean.
    """
    times = instance_times(result)
    solvers = list(dict.fromkeys(t.solver for t in times))
    per_inst: dict[str, dict[str, InstanceTime]] = {}
    for t in times:
        per_inst.setdefault(t.instance, {})[t.solver] = t
    common = {i: d for i, d in per_inst.items() if len(d) == len(solvers)}
    pen = _penalty(result)
    groups: dict[str, list[str]] = {"all": list(common)}
    if by_family:
        groups = {}
        for i, d in common.items():
            groups.setdefault(next(iter(d.values())).family, []).append(i)
    out: list[SolverSummary] = []
    for fam, insts in groups.items():
        rows = []
        for s in solvers:
            ts = [common[i][s] for i in insts]
            inc = any(t.reports_incumbents for t in ts)
            first = [t.first_incumbent_s if t.first_incumbent_s is not None else pen for t in ts]
            found = [t.optimum_found_s if t.optimum_found_s is not None else pen for t in ts]
            rows.append((s, len(ts), sum(t.solved for t in ts), shifted_geometric_mean([t.time_s for t in ts], shift_s),
                         shifted_geometric_mean(first, shift_s) if inc else None,
                         shifted_geometric_mean(found, shift_s) if inc else None))
        best = min((r[3] for r in rows if not math.isnan(r[3])), default=math.nan)
        for s, n, solved, sgm, first, found in sorted(rows, key=lambda r: r[3]):
            out.append(SolverSummary(s, n, solved, sgm, sgm / best if best > 0 else math.nan, shift_s, pen, first,
                                     found, fam))
    return out


@dataclass(frozen=True)
class PerformanceProfile:
    """A Dolan-Moré performance profile.

    Attributes
    ----------
    solvers
        Solver labels, in result order.
    ratios
        ``instance -> solver -> r`` (inf: not solved).
    taus
        Breakpoints: every finite ratio, sorted (1 first).
    fractions
        ``solver -> [rho_s(tau) for tau in taus]``.
    left_out
        Instances no solver solved (not in the profile).
    """

    solvers: tuple[str, ...]
    ratios: dict[str, dict[str, float]]
    taus: tuple[float, ...]
    fractions: dict[str, tuple[float, ...]] = field(default_factory=dict)
    left_out: tuple[str, ...] = ()

    def csv(self) -> str:
        """``tau,<solver>,...`` rows: the profile's step function at every breakpoint."""
        lines = ["tau," + ",".join(self.solvers)]
        for k, tau in enumerate(self.taus):
            lines.append(f"{tau:.6g}," + ",".join(f"{self.fractions[s][k]:.6g}" for s in self.solvers))
        return "\n".join(lines) + "\n"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (inf ratios as None)."""
        return {
            "solvers": list(self.solvers),
            "ratios": {i: {s: (None if math.isinf(r) else r) for s, r in d.items()} for i, d in self.ratios.items()},
            "taus": list(self.taus),
            "fractions": {s: list(v) for s, v in self.fractions.items()},
            "left_out": list(self.left_out),
        }


def performance_profile(result: BenchResult) -> PerformanceProfile:
    """The performance profile of total time (module docstring); instances every solver ran."""
    times = instance_times(result)
    solvers = tuple(dict.fromkeys(t.solver for t in times))
    per: dict[str, dict[str, InstanceTime]] = {}
    for t in times:
        per.setdefault(t.instance, {})[t.solver] = t
    ratios: dict[str, dict[str, float]] = {}
    left_out = []
    for inst, d in per.items():
        if len(d) != len(solvers):
            continue
        solved = [t.measured_s for t in d.values() if t.solved]
        if not solved:
            left_out.append(inst)
            continue
        best = max(min(solved), 1e-9)
        ratios[inst] = {s: (max(d[s].measured_s, 1e-9) / best if d[s].solved else math.inf) for s in solvers}
    taus = sorted({r for d in ratios.values() for r in d.values() if math.isfinite(r)} | {1.0})
    n = len(ratios)
    fractions = {s: tuple(sum(d[s] <= tau for d in ratios.values()) / n if n else 0.0 for tau in taus) for s in solvers}
    return PerformanceProfile(solvers, ratios, tuple(taus), fractions, tuple(left_out))
