"""Result types of a benchmark: one row per solve, one record per instance."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

from elasticopt.benchmarking.crosscheck import BenchRun, Verdict
from elasticopt.benchmarking.instances import InstanceSpec
from elasticopt.benchmarking.solvers import SolverSpec
from elasticopt.models import Problem
from elasticopt.models.table import OptionTable

__all__ = ["BenchRow", "InstanceRecord", "BenchResult", "ROW_FIELDS", "BENCH_FORMAT"]

#: The ``format`` of ``results.json``.
BENCH_FORMAT = "elasticopt-bench/1"


@dataclass(frozen=True)
class InstanceRecord:
    """One instance of a benchmark: its size, compile times and cross-check.

    ``n`` jobs and ``G`` GPUs of the problem; ``capacity`` and ``options`` of
    the table every solver got (after the reductions, if on); ``options_before``
    before them.  ``dp_ops = options * (capacity + 1)``.  ``lp_bound``: the
    optimum of the LP relaxation of that table's MILP, ``lp_gap`` its relative
    gap to the best proven optimum, ``lp_status``/``lp_s`` HiGHS's status and
    seconds (:mod:`elasticopt.benchmarking.difficulty`; None when not computed).
    """

    name: str
    spec: Mapping[str, Any]
    n: int
    G: int
    capacity: int
    options: int
    options_before: int
    width: int
    dp_ops: int
    objective: str
    load_s: float
    compile_s: float
    reduce_s: float
    best_objective: int | None
    best_value: float | None
    best_found: int | None
    disagreements: tuple[str, ...] = ()
    proven_disagree: bool = False
    lp_bound: float | None = None
    lp_gap: float | None = None
    lp_status: str = ""
    lp_s: float | None = None

    @property
    def options_removed(self) -> int:
        """Options the exact reductions removed."""
        return self.options_before - self.options

    @classmethod
    def make(cls, spec: InstanceSpec, problem: Problem, table: OptionTable, load_s: float, compile_s: float,
             reduce_s: float, verdict: Verdict, lp: Any = None) -> InstanceRecord:
        """Build the record of a benchmarked instance (``lp``: an :class:`~elasticopt.benchmarking.difficulty.LPRelaxation`)."""
        from elasticopt.benchmarking.difficulty import lp_gap

        return cls(
            name=spec.name,
            spec=spec.to_dict(),
            n=len(problem.jobs),
            G=problem.cluster.gpus,
            capacity=table.capacity,
            options=table.n_options,
            options_before=int(table.stats.get("options_before", table.n_options)),
            width=table.width,
            dp_ops=table.n_options * (table.capacity + 1),
            objective=problem.objective,
            load_s=load_s,
            compile_s=compile_s,
            reduce_s=reduce_s,
            best_objective=verdict.best_objective,
            best_value=verdict.best_value,
            best_found=verdict.best_found,
            disagreements=verdict.disagreements,
            proven_disagree=verdict.proven_disagree,
            lp_bound=None if lp is None else lp.bound,
            lp_gap=None if lp is None else lp_gap(lp.bound, verdict.best_objective),
            lp_status="" if lp is None else lp.status,
            lp_s=None if lp is None else lp.seconds,
        )

    @property
    def family(self) -> str:
        """Generator family, or the file stem of an instance file (the summary group)."""
        return str(self.spec.get("group") or self.spec.get("family") or self.name)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        d = asdict(self)
        d["spec"] = dict(self.spec)
        d["disagreements"] = list(self.disagreements)
        d["options_removed"] = self.options_removed
        return d


@dataclass(frozen=True)
class BenchRow:
    """One timed solve: (instance, solver, repeat).

    Times: ``total_s`` is the wall time of the whole ``solve`` call (what a
    caller pays; for a backend run in a forked process under a hard time
    limit, the call as timed inside that process), ``build_s``/``solve_s`` the backend's own split (model
    build, solver run); ``warmup_s`` the wall time of the untimed first solve;
    ``compile_s``/``reduce_s`` the instance's table compile, shared by all
    solvers.  ``dp_ops = options * (capacity + 1)`` is the DP work of the
    table; ``dp_ops_run`` the operations a DP backend reports it ran
    (``stats["operations"]``: fewer once reduced-cost fixing shrinks the table
    to a core, 0 when the bound alone proved optimality); ``dp_ops_per_s`` =
    ``dp_ops_run / solve_s`` (the kernel's achieved rate) and
    ``dp_ops_fraction`` its ratio to the 1.5e9 ops/s reference (docs/design.md §3).
    For backends that report incumbents (:mod:`elasticopt.solvers.incumbents`):
    ``incumbents`` found, ``first_incumbent_s`` and ``optimum_found_s``
    (the last incumbent of an OPTIMAL run) in seconds from the start of the
    solve call (``build_s`` + the solver's own clock); None otherwise.
    """

    instance: str
    family: str
    seed: int | None
    n: int
    G: int
    capacity: int
    options: int
    solver: str
    solver_options: str
    repeat: int
    status: str
    reason: str
    objective: int | None
    objective_value: float | None
    bound: int | None
    gap: float | None
    best_objective: int | None
    gap_to_best: float | None
    agrees_with_best: bool | None
    disagreement: str
    verified: bool
    verify_errors: str
    compile_s: float
    reduce_s: float
    warmup_s: float | None
    build_s: float
    solve_s: float
    total_s: float
    time_limit_s: float | None
    within_limit: bool | None
    honours_time_limit: bool | None
    dp_ops: int
    dp_ops_run: int | None
    dp_ops_per_s: float | None
    dp_ops_fraction: float | None
    message: str
    incumbents: int | None = None
    first_incumbent_s: float | None = None
    optimum_found_s: float | None = None

    @classmethod
    def make(cls, rec: InstanceRecord, spec: SolverSpec, o: BenchRun, verdict: Verdict, warmup_s: float | None,
             time_limit_s: float | None, dp_ops: int, is_dp: bool, reference_ops_per_s: float) -> BenchRow:
        """Build the row of one timed solve."""
        s = o.solution
        agrees, why = verdict.per_outcome.get((o.label, o.repeat), (None, ""))
        best = verdict.best_objective
        gap_best = None
        if best is not None and s.objective is not None and s.status.has_allocation:
            gap_best = (best - s.objective) / max(1, abs(best))
        ops_run = s.stats.get("operations", dp_ops if is_dp else None)
        ops_run = int(ops_run) if is_dp and isinstance(ops_run, (int, float)) else None
        ops_s = None
        if ops_run and s.status.name == "OPTIMAL" and s.solve_s > 0:
            ops_s = ops_run / s.solve_s
        return cls(
            instance=rec.name,
            family=rec.family,
            seed=rec.spec.get("seed"),
            n=rec.n,
            G=rec.G,
            capacity=rec.capacity,
            options=rec.options,
            solver=spec.label,
            solver_options=spec.options_text,
            repeat=o.repeat,
            status=s.status.name,
            reason=getattr(getattr(s, "reason", None), "value", ""),
            objective=s.objective,
            objective_value=s.objective_value,
            bound=s.bound,
            gap=s.gap,
            best_objective=best,
            gap_to_best=gap_best,
            agrees_with_best=agrees,
            disagreement=why,
            verified=o.verified,
            verify_errors=o.verify_errors,
            compile_s=rec.compile_s,
            reduce_s=rec.reduce_s,
            warmup_s=warmup_s,
            build_s=float(s.build_s),
            solve_s=float(s.solve_s),
            total_s=o.wall_s,
            time_limit_s=time_limit_s,
            within_limit=None if time_limit_s is None else (s.status.name != "LIMIT" and o.wall_s <= time_limit_s),
            honours_time_limit=_honours(spec),
            dp_ops=dp_ops,
            dp_ops_run=ops_run,
            dp_ops_per_s=ops_s,
            dp_ops_fraction=None if ops_s is None else ops_s / reference_ops_per_s,
            message=s.message,
            **_incumbent_fields(s),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (field order = :data:`ROW_FIELDS`)."""
        return asdict(self)


def _incumbent_fields(s: Any) -> dict[str, Any]:
    st = s.stats
    if not isinstance(st.get("incumbents"), int):
        return {}
    first, best = st.get("first_incumbent_s"), st.get("best_incumbent_s")
    return {
        "incumbents": int(st["incumbents"]),
        "first_incumbent_s": None if first is None else float(s.build_s) + float(first),
        "optimum_found_s": float(s.build_s) + float(best) if best is not None and s.status.name == "OPTIMAL" else None,
    }


#: Column order of the CSV and of each JSON row.
ROW_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(BenchRow))


@dataclass(frozen=True)
class BenchResult:
    """Everything a benchmark produced.

    Attributes
    ----------
    rows
        One :class:`BenchRow` per timed solve.
    instances
        One :class:`InstanceRecord` per instance (best objective, disagreements).
    settings
        Solvers, repeats, warm-up, time limit, reductions, start time, elapsed seconds.
    environment
        Python, platform, CPUs, load average, package versions.
    """

    rows: tuple[BenchRow, ...]
    instances: tuple[InstanceRecord, ...]
    settings: Mapping[str, Any] = field(default_factory=dict)
    environment: Mapping[str, Any] = field(default_factory=dict)

    @property
    def disagreements(self) -> list[str]:
        """``"instance: message"`` for every conflict found by the cross-check."""
        return [f"{r.name}: {m}" for r in self.instances for m in r.disagreements]

    @property
    def proven_disagree(self) -> bool:
        """Whether proven optima (or OPTIMAL vs INFEASIBLE) differ on some instance."""
        return any(r.proven_disagree for r in self.instances)

    @property
    def verification_failures(self) -> list[BenchRow]:
        """Rows whose solution failed :func:`~elasticopt.solvers.verify`."""
        return [r for r in self.rows if not r.verified]

    @property
    def errors(self) -> list[BenchRow]:
        """Rows with status ERROR."""
        return [r for r in self.rows if r.status == "ERROR"]

    @property
    def ok(self) -> bool:
        """No disagreement and every solution verified."""
        return not self.disagreements and not self.verification_failures

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any], where: str = "results.json") -> BenchResult:
        """The result a ``results.json`` holds (:meth:`to_dict`; the summaries there are recomputed, not read).

        Raises
        ------
        ValidationError
            For another format or a row or instance without a field it needs, naming ``where`` and the entry.
        """
        from elasticopt.errors import ValidationError

        if not isinstance(doc, Mapping) or doc.get("format") != BENCH_FORMAT:
            found = doc.get("format") if isinstance(doc, Mapping) else type(doc).__name__
            raise ValidationError(f"{where}: format", f"'{BENCH_FORMAT}' (written by elasticopt bench --out)", found)

        def build(kind: type, items: Any, key: str) -> tuple:
            names = {f.name for f in fields(kind)}
            required = {f.name for f in fields(kind) if f.default is MISSING and f.default_factory is MISSING}
            out = []
            for i, d in enumerate(items if isinstance(items, list) else []):
                missing = sorted(required - set(d)) if isinstance(d, Mapping) else ["(not an object)"]
                if missing:
                    raise ValidationError(f"{where}: {key}[{i}]", f"fields {', '.join(sorted(required))}",
                                          f"missing {', '.join(missing)}", "write the file again with elasticopt bench")
                kw = {k: v for k, v in d.items() if k in names}
                if "disagreements" in kw:
                    kw["disagreements"] = tuple(kw["disagreements"])
                out.append(kind(**kw))
            return tuple(out)

        return cls(rows=build(BenchRow, doc.get("rows"), "rows"),
                   instances=build(InstanceRecord, doc.get("instances"), "instances"),
                   settings=dict(doc.get("settings") or {}), environment=dict(doc.get("environment") or {}))

    def to_dict(self) -> dict[str, Any]:
        """The JSON document written by :func:`write_results` (summary added there)."""
        return {
            "format": BENCH_FORMAT,
            "settings": dict(self.settings),
            "environment": dict(self.environment),
            "ok": self.ok,
            "disagreements": self.disagreements,
            "instances": [r.to_dict() for r in self.instances],
            "rows": [r.to_dict() for r in self.rows],
        }


def _honours(spec: SolverSpec) -> bool | None:
    """Whether the solver's run stops at the time limit, by its declared capabilities (None: it declares none)."""
    caps = getattr(spec.solver, "capabilities", None)
    return None if caps is None else bool(caps.time_limit)
