"""One request in, one response out: :class:`AllocationService`.

Both transports (:mod:`elasticopt.service.stdio`, :mod:`elasticopt.service.http`)
hand raw request bytes to :meth:`AllocationService.handle_bytes` and send back
what it returns.  Concurrency is deliberate: parsing, validation, translation,
placement and serialisation of different requests may run in parallel threads;
the solve itself holds one lock, so one backend runs at a time (the jax DP's
precision context and the backends' caches are not documented as
thread-safe, and the machine's cores are better spent on one solve).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any, Callable

from elasticopt.errors import (
    ElasticoptError,
    SolverError,
    SolverOptionError,
    SolverUnavailableError,
    UnknownSolverError,
)
from elasticopt.models import OBJECTIVES
from elasticopt.models.table import job_values
from elasticopt.service.placement import Placement, check_placement, place
from elasticopt.service.protocol import (
    REQUEST_FORMAT,
    RESPONSE_FORMAT,
    ServiceError,
    SolverSpec,
    error_response,
    parse_request,
    request_validator,
    validate_request,
)
from elasticopt.service.translate import VALUES, Translation, translate
from elasticopt.solvers import (
    Reason,
    Solution,
    Status,
    available_solvers,
    capabilities,
    exact_solvers,
    get_backend,
    placement_solvers,
    verify,
)
from elasticopt.solvers.api import solve

__all__ = ["AllocationService", "HTTP_STATUS"]

log = logging.getLogger("elasticopt.service")

#: HTTP status of a response by error code (200 for solved requests and info).
HTTP_STATUS: dict[str, int] = {
    "invalid_json": 400,
    "invalid_request": 400,
    "unsupported": 422,
    "unknown_solver": 400,
    "solver_unavailable": 503,
    "solver_error": 500,
    "internal": 500,
}

#: exceptions of the solve path -> service error code
_SOLVE_ERRORS: tuple[tuple[type[Exception], str], ...] = (
    (UnknownSolverError, "unknown_solver"),
    (SolverUnavailableError, "solver_unavailable"),
    (SolverError, "solver_error"),
)


#: Reasons of a LIMIT whose optimum over GPU totals was not placed: a backend exact with node variables solves again.
PLACEMENT_REASONS = frozenset({Reason.NOT_PLACEABLE, Reason.PLACEMENT_STEPS})


def _unplaced(sol: Solution) -> bool:
    """Whether the backend's optimum over GPU totals was not placed on the nodes (no allocation)."""
    return sol.status is Status.LIMIT and sol.objective is None and (
        sol.reason in PLACEMENT_REASONS or (sol.reason is Reason.TIME_LIMIT and bool(sol.unplaced)))


class AllocationService:
    """Answers allocation requests (format ``elasticopt-request/1``).

    Parameters
    ----------
    default_solver
        Backend used when a request names none (``NAME`` or ``NAME:key=value,...``).
    default_time_limit_s
        Time limit used when a request gives none (None: no limit).
    solve
        The solve function (tests inject a failing one).
    placement_fallback
        Backend that solves again, exactly with node variables, when the
        requested one (the DP, which sees per-type GPU totals) finds an
        optimum whose packed jobs cannot be placed on the nodes, starting from
        that optimum where the backend takes a hint; None: answer that LIMIT
        as it is; ``"auto"``: the first installed backend of
        :func:`~elasticopt.solvers.placement_solvers` (by its capabilities).
        The re-solve gets what is left of the request's time limit.
    """

    def __init__(
        self,
        default_solver: str = "dp",
        default_time_limit_s: float | None = None,
        solve: Callable[..., Solution] = solve,
        placement_fallback: str | None = "auto",
    ):
        self.default_solver = SolverSpec.from_request(default_solver)
        get_backend(self.default_solver.name)  # an unknown or missing default fails at start, not per request
        request_validator()  # so does a missing schema validator (the 'service' extra)
        self.default_time_limit_s = default_time_limit_s
        self._solve = solve
        if placement_fallback == "auto":
            placement_fallback = next(iter(placement_solvers()), None)
        if placement_fallback is not None:
            get_backend(placement_fallback)
        self.placement_fallback = placement_fallback
        self._lock = threading.Lock()

    # -- entry points -------------------------------------------------------------------------------------------

    def handle_bytes(self, data: bytes | str) -> tuple[dict[str, Any], bytes]:
        """Answer one request's JSON text; returns the response and its JSON bytes (one line)."""
        resp = self.handle(data)
        return resp, json.dumps(resp, separators=(",", ":"), allow_nan=False).encode() + b"\n"

    def handle(self, request: bytes | str | Mapping[str, Any]) -> dict[str, Any]:
        """Answer one request (JSON text or a parsed object); never raises."""
        t0 = time.perf_counter()
        request_id: Any = None
        try:
            doc = parse_request(request) if isinstance(request, (bytes, str)) else dict(request)
            t_parse = time.perf_counter()
            if isinstance(doc, dict) and isinstance(doc.get("id"), (str, int)) and not isinstance(doc.get("id"), bool):
                request_id = doc["id"]
            validate_request(doc)
            t_valid = time.perf_counter()
            if doc.get("op", "solve") == "info":
                return self.info(request_id)
            return self._solve_request(doc, request_id, t0, t_parse, t_valid)
        except ServiceError as exc:
            return error_response(request_id, exc)
        except Exception as exc:  # a bug must not take the service down
            log.exception("internal error while answering request %r", request_id)
            return error_response(
                request_id, ServiceError("internal", f"internal error: {type(exc).__name__}: {exc}", "(root)")
            )

    def info(self, request_id: Any = None) -> dict[str, Any]:
        """What this service offers: version, formats, objectives, installed solvers."""
        from elasticopt import __version__

        return {
            "format": RESPONSE_FORMAT,
            "id": request_id,
            "ok": True,
            "version": __version__,
            "request_formats": [REQUEST_FORMAT, "elasticopt-instance/1"],
            "objectives": [*OBJECTIVES, VALUES],
            "solvers": available_solvers(),
            "exact_solvers": exact_solvers(),
            "capabilities": {n: dataclasses.asdict(capabilities(n)) for n in available_solvers()},
        }

    def warm_up(self, solver: str | None = None) -> float:
        """Solve a one-job request (compiles the jax DP); returns the seconds it took."""
        t0 = time.perf_counter()
        resp = self.handle(
            {
                "format": REQUEST_FORMAT,
                "solver": solver or {"name": self.default_solver.name, "options": self.default_solver.options},
                "cluster": {"gpus": 8, "gpus_per_node": 8},
                "jobs": [{"id": "warm-up", "throughput": [[1, 32, 100.0], [2, 64, 190.0]]}],
            }
        )
        if not resp["ok"]:
            raise ElasticoptError(f"warm-up failed: {resp['error']['message']}")
        return time.perf_counter() - t0

    # -- the solve path -----------------------------------------------------------------------------------------

    def _run_solver(self, tr: Translation, spec: SolverSpec, time_limit_s: float | None, reduce: bool,
                    warnings: list[str]) -> Solution:
        t0 = time.perf_counter()
        sol = self._run_one(tr, spec, time_limit_s, reduce)
        fallback = self.placement_fallback
        if _unplaced(sol) and fallback and fallback != spec.name:
            left = None if time_limit_s is None else time_limit_s - (time.perf_counter() - t0)
            if left is not None and left <= 0:
                warnings.append(f"{spec.name}: {sol.message.split(';')[0]}; no time left of the {time_limit_s} s "
                                f"limit to solve again with {fallback!r}")
                return sol
            options: dict[str, Any] = {}
            if capabilities(fallback).warm_start and sol.unplaced:
                options["hint"] = dict(sol.unplaced)  # start from the totals' optimum: its jobs are a good guess
            warnings.append(f"{spec.name}: {sol.message.split(';')[0]}; solved again with {fallback!r} "
                            "(exact with node variables" + (", from its allocation)" if options else ")"))
            sol = self._run_one(tr, SolverSpec(fallback, options), left, reduce)
        return sol

    def _run_one(self, tr: Translation, spec: SolverSpec, time_limit_s: float | None, reduce: bool) -> Solution:
        try:
            get_backend(spec.name)
            with self._lock:
                sol = self._solve(tr.problem, spec.name, time_limit_s=time_limit_s, reduce=reduce, **spec.options)
        except SolverOptionError as exc:
            path = f"solver.options.{exc.option}"
            raise ServiceError("invalid_request", str(exc), path, exc.expected, exc.found) from None
        except ElasticoptError as exc:
            code = next((c for cls, c in _SOLVE_ERRORS if isinstance(exc, cls)), "solver_error")
            raise ServiceError(code, str(exc), "solver", "a usable solver and options", spec.name) from None
        if sol.status is Status.ERROR:
            raise ServiceError("solver_error", f"solver {spec.name!r} failed: {sol.message}", "solver",
                               "a solver run that ends with a result", sol.message)
        return sol

    def _solve_request(self, doc: dict[str, Any], request_id: Any, t0: float, t_parse: float, t_valid: float) -> dict[str, Any]:
        tr = translate(doc)
        t_tr = time.perf_counter()
        spec = SolverSpec.from_request(doc["solver"]) if "solver" in doc else self.default_solver
        limit = doc.get("time_limit_s", self.default_time_limit_s)
        warnings: list[str] = []
        sol = self._run_solver(tr, spec, limit, doc.get("reduce", True), warnings)
        t_solve = time.perf_counter()
        verified = False
        if doc.get("verify", True):
            rep = verify(tr.problem, sol)
            if not rep.ok:
                raise ServiceError("internal", f"solver {spec.name!r} returned a result that does not verify: "
                                   + "; ".join(rep.errors), "solver", "a verified result", sol.status.value)
            verified = True
        t_verify = time.perf_counter()
        alloc: dict[str, Any] = {}
        if sol.status.has_allocation and sol.objective is not None:
            alloc, placed_warnings = self._placed(tr, sol)
            warnings.extend(placed_warnings)
        t_place = time.perf_counter()
        value = sol.objective_value
        if value is not None and tr.value_jobs:
            value += tr.offset_total()
        compile_s = float(sol.stats.get("compile_s", 0.0))
        return {
            "format": RESPONSE_FORMAT,
            "id": request_id,
            "ok": True,
            "status": sol.status.value,
            "reason": sol.reason.value,
            "solver": sol.solver,
            "objective": sol.objective,
            "objective_value": value,
            "bound": sol.bound,
            "scale": sol.scale * sol.tie_scale,
            "allocation": alloc,
            "infeasible_jobs": list(sol.infeasible_jobs),
            "message": sol.message,
            "warnings": warnings,
            "verified": verified,
            "timings": {
                "parse_s": t_parse - t0,
                "validate_s": t_valid - t_parse,
                "translate_s": t_tr - t_valid,
                "compile_s": compile_s,
                "solve_s": max(0.0, t_solve - t_tr - compile_s),
                "verify_s": t_verify - t_solve,
                "place_s": t_place - t_verify,
                "total_s": time.perf_counter() - t0,
            },
        }

    def _placed(self, tr: Translation, sol: Solution) -> tuple[dict[str, Any], list[str]]:
        """Per job: GPUs, batch, pool, nodes, value (caller units), whether it moved; and warnings.

        Per pool, the model's one placer keeping running jobs in place
        (:func:`~elasticopt.service.placement.place`: a job keeps its nodes when its GPU count is
        kept; where that leaves a packed job no fewest nodes, the pool is packed from scratch); the
        solution's own placement (``sol.placement``, verified by ``verify``) only where the placer's
        search stops first.
        """
        problem = tr.problem
        first_pool = next(iter(tr.pools))
        pool_of = {jid: sol.gpu_types.get(jid, first_pool) for jid, a in sol.allocation.items() if a}
        nodes_of: dict[str, list[list[int]]] = {}
        moved: dict[str, bool] = {}
        warnings: list[str] = []
        for t, pool in tr.pools.items():
            alloc = {jid: sol.allocation[jid][0] for jid, p in pool_of.items() if p == t}  # type: ignore[index]
            if not alloc:
                continue
            g = pool.gpus_per_node
            current = {jid: [(n - pool.first, c) for n, c in cur] for jid, (ct, cur) in tr.current.items()
                       if ct == t and jid in alloc}
            pl = place(pool.node_gpus, alloc, current, {j: bool(sol.packed.get(j)) for j in alloc})
            warnings.extend(pl.warnings)
            if pl.status == "placed" and not pl.kept:
                warnings.append(f"pool {t!r}: keeping running jobs on their nodes would spread a packed job; "
                                "the pool is packed from scratch")
            if pl.status != "placed" or not all(len(pl.nodes[j]) <= -(-k // g) for j, k in alloc.items()
                                                if sol.packed.get(j)):
                chosen = {j: tuple(sorted((int(name.rsplit("/", 1)[1]), len(ix)) for name, ix in sol.placement[j].items()))
                          for j in alloc}
                pl = Placement(chosen, {j: tuple(sorted(current.get(j, ()))) != chosen[j] for j in alloc})
                warnings.append(f"pool {t!r}: the placer stopped before placing the packed jobs; "
                                "the model's placement is used")
            errors = check_placement(pool.node_gpus, alloc, pl)
            if errors:
                raise ServiceError("internal", "placement does not verify: " + "; ".join(errors), "allocation",
                                   "a placement within every node's GPUs", errors[0])
            for j in alloc:
                nodes_of[j] = [[pool.first + n, c] for n, c in pl.nodes[j]]
                moved[j] = bool(pl.moved[j])
        out: dict[str, Any] = {}
        for job in problem.jobs:
            a = sol.allocation.get(job.id)
            if a is None:
                out[job.id] = None
                continue
            (k, b), t, packed = a, pool_of[job.id], bool(sol.packed.get(job.id, False))
            vj = tr.value_jobs.get(job.id)
            if vj is not None:
                v = vj.priced[(t, k, b, packed)]
            else:
                opts = [o for o in job.typed_options(problem.cluster, problem.node_aware)
                        if (o.gpu_type, o.gpus, o.batch, o.packed) == (t, k, b, packed)]
                v = job_values(problem, job, opts)[0]
            out[job.id] = {"gpus": k, "batch": b, "pool": t, "nodes": nodes_of[job.id], "value": float(v),
                           "moved": moved[job.id]}
        for jid in tr.left_out:
            out[jid] = None
        return out, warnings
