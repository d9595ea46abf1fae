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
from elasticopt.service.placement import check_placement, place
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
from elasticopt.solvers import Solution, Status, available_solvers, exact_solvers, get_backend, verify
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
    """

    def __init__(
        self,
        default_solver: str = "dp",
        default_time_limit_s: float | None = None,
        solve: Callable[..., Solution] = solve,
    ):
        self.default_solver = SolverSpec.from_request(default_solver)
        get_backend(self.default_solver.name)  # an unknown or missing default fails at start, not per request
        request_validator()  # so does a missing schema validator (the 'service' extra)
        self.default_time_limit_s = default_time_limit_s
        self._solve = solve
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

    def _run_solver(self, tr: Translation, spec: SolverSpec, time_limit_s: float | None, reduce: bool) -> Solution:
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
        sol = self._run_solver(tr, spec, limit, doc.get("reduce", True))
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
        warnings: list[str] = []
        if sol.status.has_allocation:
            alloc, warnings = self._placed(tr, sol)
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
        """Per job: GPUs, batch, nodes, value (caller units), whether it moved; and warnings."""
        gpus = {jid: (a[0] if a else None) for jid, a in sol.allocation.items()}
        pl = place(tr.node_gpus, gpus, tr.current)
        errors = check_placement(tr.node_gpus, gpus, pl)
        if errors:
            raise ServiceError("internal", "placement does not verify: " + "; ".join(errors), "allocation",
                               "a placement within every node's GPUs", errors[0])
        warnings = list(pl.warnings)
        problem = tr.problem
        out: dict[str, Any] = {}
        for job in problem.jobs:
            a = sol.allocation.get(job.id)
            if a is None:
                out[job.id] = None
                continue
            k, b = a
            nodes = pl.nodes[job.id]
            vj = tr.value_jobs.get(job.id)
            if vj is not None:
                spans = vj.priced[(k, b)]
                span = len(nodes)
                priced = sorted(s for s in spans if s is not None)
                v = spans.get(span, spans.get(None, spans[priced[0]] if priced else 0.0))
                if priced and span not in spans and None not in spans:
                    warnings.append(f"job {job.id!r}: placed on {span} nodes, which has no value; "
                                    f"reporting the {priced[0]}-node value it was solved with")
                elif priced and span > priced[0]:
                    warnings.append(f"job {job.id!r}: placed on {span} nodes, solved with its {priced[0]}-node value")
            else:
                opts = [o for o in job.options(gpus_cap=problem.cluster.gpus) if (o[0], o[1]) == (k, b)]
                v = job_values(problem, job, opts)[0]
            out[job.id] = {"gpus": k, "batch": b, "pool": tr.pool, "nodes": [list(nc) for nc in nodes],
                           "value": float(v), "moved": bool(pl.moved[job.id])}
        for jid in tr.left_out:
            out[jid] = None
        return out, warnings
