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
import logging
import os
import threading
import time
from collections.abc import Mapping
from typing import Any, BinaryIO, Callable

from elasticopt.errors import (
    ElasticoptError,
    SolverError,
    SolverOptionError,
    SolverUnavailableError,
    UnknownSolverError,
    ValidationError,
)
from elasticopt.models.objectives import objective_names
from elasticopt.service.heap import FrozenHeap
from elasticopt.service.jobcache import JobCache
from elasticopt.service.placement import answer_allocation
from elasticopt.service.session import Merged, Sessions, session_error
from elasticopt.service.protocol import (
    REQUEST_FORMAT,
    RESPONSE_FORMAT,
    ServiceError,
    RequestedSolver,
    encode_response,
    error_response,
    parse_request_cached,
    request_validator,
    validate_request,
)
from elasticopt.models.instance_format2 import FORMAT_2
from elasticopt.service.translate import VALUES, Translation, translate, translate_instance
from elasticopt.service.translate_changes import translate_changes
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
from elasticopt.solvers.base import checked_time_limit

__all__ = ["AllocationService", "HTTP_STATUS"]

log = logging.getLogger("elasticopt.service")

#: HTTP status of a response by error code (200 for solved requests and info).
HTTP_STATUS: dict[str, int] = {
    "invalid_json": 400,
    "invalid_request": 400,
    "request_too_large": 413,
    "session_unknown": 409,
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


def warm_up_requests() -> list[dict[str, Any]]:
    """Requests whose solves compile the DP's kernels for small clusters (see :meth:`AllocationService.warm_up`):
    one to three pools (multi-type states up to 1024), 8 and 72 jobs (job chunks of 8 and 64), one option per
    pool or three (option widths 4 and 8-16); on several pools the same with every other job's options on one
    pool only (the type split's one-type group kernels, in the int32 and int64 value types the two sizes
    reach: a Gavel job too large for a pool)."""
    docs = []
    for pools in ({"gpu": 8}, {"v100": 2, "k80": 4}, {"v100": 4, "p100": 4, "k80": 4}, {"v100": 8, "p100": 8, "k80": 8}):
        names = list(pools)
        for n, split in ((8, False), (72, False)) + (((8, True), (72, True)) if len(pools) > 1 else ()):
            for sizes in ((1,), (1, 2, 4)):
                jobs = []
                for i in range(n):
                    on = [names[(i // 2) % len(names)]] if split and i % 2 else names  # one pool: a group's job
                    opts = [{"gpus": k, "pool": t, "value": 1.0 + 0.01 * ((i * 7 + k * 3) % 11) + 0.1 * k}
                            for t in on for k in sizes if k <= pools[t]]
                    jobs.append({"id": f"w{i}", "options": opts})
                docs.append({
                    "format": REQUEST_FORMAT, "id": "warm-up", "objective": VALUES, "verify": False,
                    "solver": {"name": "dp", "options": {"fixing": False}},
                    "cluster": {"pools": {t: {"nodes": 1, "gpus_per_node": g} for t, g in pools.items()}},
                    "jobs": jobs,
                })
    return docs


def _check_service_fields(doc: dict[str, Any]) -> None:
    """The service's fields on an instance document (not covered by the request schema there)."""
    rid = doc.get("id")
    if "id" in doc and (isinstance(rid, bool) or not isinstance(rid, (str, int))):
        raise ServiceError("invalid_request", "id: expected a string or an integer", "id", "a string or an integer", rid)
    try:
        checked_time_limit(doc.get("time_limit_s"))
    except ValidationError as exc:
        raise ServiceError("invalid_request", f"time_limit_s: expected {exc.expected}", "time_limit_s",
                           exc.expected, exc.found) from None
    for key in ("reduce", "verify"):
        if key in doc and not isinstance(doc[key], bool):
            raise ServiceError("invalid_request", f"{key}: expected true or false", key, "true or false", doc[key])
    if doc.get("op", "solve") != "solve":
        raise ServiceError("invalid_request", "op: expected 'solve' on an instance document", "op", "'solve'",
                           doc["op"])
    solver = doc.get("solver")
    if solver is not None and not (isinstance(solver, str) or (isinstance(solver, dict) and isinstance(
            solver.get("name"), str) and isinstance(solver.get("options", {}), dict))):
        raise ServiceError("invalid_request", "solver: expected a solver name, or {\"name\": ..., \"options\": {...}}",
                           "solver", "a solver name, or {\"name\": ..., \"options\": {...}}", solver)


def _unplaced(sol: Solution) -> bool:
    """Whether the backend's optimum over GPU totals was not placed on the nodes and nothing proved the best
    allocation that places (the solution may hold the best placed allocation found)."""
    return sol.status is Status.LIMIT and (
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
    cache_jobs
        How many translated jobs are kept between requests (:class:`~elasticopt.service.jobcache.JobCache`:
        a job whose JSON and context an earlier request held is not translated again; answers are the same
        without it).  0: none.
    record
        A file every request that arrives as text (:meth:`handle_bytes`, both transports) is appended to, one
        JSON line each, before it is answered (``elasticopt serve --record``): ``elasticopt serve --stdio <
        FILE`` answers them again, the same way (the solve is deterministic), to see why a host's run went as
        it did.  None: nothing is kept.
    max_sessions
        How many sessions are kept (:mod:`elasticopt.service.session`: a host sends its whole state once,
        then what changed), the least recently used dropped first.
    """

    def __init__(
        self,
        default_solver: str = "dp",
        default_time_limit_s: float | None = None,
        solve: Callable[..., Solution] = solve,
        placement_fallback: str | None = "auto",
        record: str | os.PathLike[str] | None = None,
        cache_jobs: int = 16384,
        max_sessions: int = 64,
    ):
        self.default_solver = RequestedSolver.from_request(default_solver)
        get_backend(self.default_solver.name)  # an unknown or missing default fails at start, not per request
        request_validator()  # so does a missing schema validator (the 'service' extra)
        self.default_time_limit_s = checked_time_limit(default_time_limit_s, "default_time_limit_s")
        self._solve = solve
        if placement_fallback == "auto":
            placement_fallback = next(iter(placement_solvers()), None)
        if placement_fallback is not None:
            get_backend(placement_fallback)
        self.placement_fallback = placement_fallback
        self._lock = threading.Lock()
        self.job_cache = JobCache(cache_jobs)
        self.sessions = Sessions(max_sessions)
        self.heap = FrozenHeap()
        self._record: BinaryIO | None = None
        self._record_lock = threading.Lock()
        if record is not None:
            try:
                self._record = open(record, "ab")  # noqa: SIM115 (kept open for the service's life)
            except OSError as exc:
                raise ElasticoptError(f"--record {record}: cannot open it for appending ({exc.strerror}); expected a "
                                      "file in an existing, writable folder") from None

    def _keep(self, data: bytes | str) -> None:
        """Append one request to the record as one line (JSON's line breaks are whitespace: made spaces)."""
        raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
        line = raw.replace(b"\r", b" ").replace(b"\n", b" ").strip() + b"\n"
        with self._record_lock:
            self._record.write(line)  # type: ignore[union-attr]
            self._record.flush()  # type: ignore[union-attr]

    # -- entry points -------------------------------------------------------------------------------------------

    def settle(self) -> None:
        """After a response is sent: keep the heap frozen for Python's cyclic collector
        (:meth:`~elasticopt.service.heap.FrozenHeap.settle`), so that no full collection stops a later
        request.  Both transports call it; so should a loop that calls :meth:`handle` itself."""
        self.heap.settle()

    def handle_bytes(self, data: bytes | str) -> tuple[dict[str, Any], bytes]:
        """Answer one request's JSON text; returns the response and its JSON bytes (one line)."""
        if self._record is not None:
            self._keep(data)
        resp = self.handle(data)
        try:
            return resp, encode_response(resp)
        except ValueError as exc:  # a non-finite number in a response: a bug, answered as one (the service goes on)
            log.error("response to request %r not written: %s", resp.get("id"), exc)
            resp = error_response(resp.get("id"), ServiceError(
                "internal", f"internal error: the response holds a number JSON cannot carry ({exc})", "(root)"))
            return resp, encode_response(resp)

    def handle(self, request: bytes | str | Mapping[str, Any]) -> dict[str, Any]:
        """Answer one request (JSON text or a parsed object); never raises."""
        t0 = time.perf_counter()
        request_id: Any = None
        try:
            encoded: list[bytes | None] | None = None  # each job's JSON (the cache's keys), and whether it is
            known: list[bool] | None = None  # known to pass the screen and the schema: from the fast parse only
            if isinstance(request, (bytes, str)):  # with the model loader's screen of the text (fastload)
                cache = self.job_cache if self.job_cache.max_jobs else None  # none: no job's JSON encoded
                doc, screened, encoded, known = parse_request_cached(request, cache)
            else:
                doc, screened = dict(request), False
            t_parse = time.perf_counter()
            if isinstance(doc, dict) and isinstance(doc.get("id"), (str, int)) and not isinstance(doc.get("id"), bool):
                request_id = doc["id"]
            if isinstance(doc, dict) and doc.get("format") == FORMAT_2:  # an instance file as `solve` reads it:
                return self._solve_request(doc, request_id, t0, t_parse, time.perf_counter(), screened)
            if isinstance(doc, dict) and "session" in doc:
                return self._session_request(doc, request_id, t0, t_parse, screened, encoded, known)
            validate_request(doc, known)
            if encoded is not None:
                self.job_cache.add_valid(encoded)
            t_valid = time.perf_counter()
            if doc.get("op", "solve") == "info":
                return self.info(request_id)
            return self._solve_request(doc, request_id, t0, t_parse, t_valid, screened, encoded)
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
            "request_formats": [REQUEST_FORMAT, "elasticopt-instance/1", FORMAT_2],
            "objectives": [*objective_names(), VALUES],
            "solvers": available_solvers(),
            "exact_solvers": exact_solvers(),
            "capabilities": {n: dataclasses.asdict(capabilities(n)) for n in available_solvers()},
        }

    def warm_up(self, solver: str | None = None, full: bool = True) -> float:
        """Compile the kernels before the first request; returns the seconds it took.

        A one-job request compiles the one-pool DP; with ``full`` (what ``elasticopt serve`` does unless
        ``--no-warm-up``) :func:`warm_up_requests` also run: caller values on one, two and three pools, 8
        and 72 jobs (the DP's job chunks of 8 and 64), with the DP forced past its bounds (``fixing``
        off) so that the multi-type kernels a host's later requests reach are compiled before the first
        one, not at the n-th (a 0.9-3.8 s call measured before).
        """
        t0 = time.perf_counter()
        spec = solver or {"name": self.default_solver.name, "options": self.default_solver.options}
        docs = [{
            "format": REQUEST_FORMAT,
            "solver": spec,
            "cluster": {"gpus": 8, "gpus_per_node": 8},
            "jobs": [{"id": "warm-up", "throughput": [[1, 32, 100.0], [2, 64, 190.0]]}],
        }]
        if full and (solver or self.default_solver.name) == "dp":
            docs += warm_up_requests()
        from elasticopt.solvers.dp.kernel_cache import prewarm, unindexed

        with unindexed():  # its shapes are compiled at every start: not worth an entry of the kernel index
            for doc in docs:
                resp = self.handle(doc)
                if not resp["ok"]:
                    raise ElasticoptError(f"warm-up failed: {resp['error']['message']}")
        if full:
            prewarm()  # the kernel shapes earlier services met on this machine (--kernel-cache)
        self.heap.collect_all()
        return time.perf_counter() - t0

    def _session_request(self, doc: dict[str, Any], request_id: Any, t0: float, t_parse: float, screened: bool,
                         encoded: list[bytes | None] | None, known: list[bool] | None) -> dict[str, Any]:
        """A request of a session (:mod:`elasticopt.service.session`): made whole where it sends changes, answered
        as a whole request, kept as the session's state once answered."""
        for key, need in (("upsert", "base"), ("remove", "base"), ("base", "session")):
            if key in doc and need not in doc:
                raise ServiceError("invalid_request", f"{key}: a session's changes need '{need}' too", need,
                                   f"'{need}' beside '{key}'", "nothing")
        if "base" in doc and "jobs" in doc:
            raise ServiceError("invalid_request", "jobs: a request with 'base' sends changes ('upsert', 'remove'), "
                               "not the whole state (without 'base' it starts the session again)", "jobs",
                               "no 'jobs' beside 'base'", f"{len(doc['jobs'])} jobs" if isinstance(doc["jobs"], list)
                               else doc["jobs"])
        if doc.get("op", "solve") != "solve":
            raise ServiceError("invalid_request", "session: only 'solve' requests belong to a session", "op",
                               "'solve' (or no 'op')", doc["op"])
        validate_request(doc, known)
        if encoded is not None:
            self.job_cache.add_valid(encoded)
        name = doc["session"]
        with self.sessions.hold(name):
            merged: Merged | None = None
            if "base" in doc:
                merged = self.sessions.merge(doc, screened, encoded)
                whole, screened, encoded = merged.doc, merged.screened, merged.encoded
                validate_request(whole, merged.known)
            else:
                whole = doc
            t_valid = time.perf_counter()
            try:
                changes = None
                if merged is not None and self.job_cache.max_jobs:  # the kept jobs as last translated
                    changes = translate_changes(merged, doc, screened, self.job_cache)
                tr, marks = changes if changes is not None else (
                    translate(whole, screened, self.job_cache, encoded), None)
                resp = self._answer(tr, whole, request_id, t0, t_parse, t_valid)
            except ServiceError as exc:
                raise exc if merged is None else session_error(exc, merged, name) from None
            resp["session"] = {"id": name, "revision": self.sessions.keep(name, whole, encoded, screened, merged,
                                                                          tr, marks)}
        return resp

    # -- the solve path -----------------------------------------------------------------------------------------

    def _run_solver(self, tr: Translation, spec: RequestedSolver, time_limit_s: float | None, reduce: bool,
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
            if capabilities(fallback).warm_start and sol.objective is not None:
                options["hint"] = dict(sol.allocation)  # start from its best allocation that places
            first = sol.message.split(";")[0]
            warnings.append(f"{first}; solved again with {fallback!r} (exact with node variables"
                            + (", from its best placed allocation)" if options else ")"))
            again = self._run_one(tr, RequestedSolver(fallback, options), left, reduce)
            if again.objective is None and sol.objective is not None or (
                    again.objective is not None and sol.objective is not None and again.objective < sol.objective
                    and again.status is not Status.OPTIMAL):
                warnings.append(f"{fallback}: stopped ({again.reason.value}) below {spec.name}'s placed allocation, "
                                f"which is answered")
                return sol
            sol = again
        return sol

    def _run_one(self, tr: Translation, spec: RequestedSolver, time_limit_s: float | None, reduce: bool) -> Solution:
        try:
            get_backend(spec.name)
            with self._lock:
                sol = self._solve(tr.problem, spec.name, time_limit_s=time_limit_s, reduce=reduce, **spec.options)
        except SolverOptionError as exc:
            path = f"solver.options.{exc.option}"
            raise ServiceError("invalid_request", str(exc), path, exc.expected, exc.found) from None
        except ValidationError as exc:  # a rule the model checks as it compiles (values too large to be exact)
            path = tr.request_path(exc.path)
            raise ServiceError("invalid_request", f"{path}: expected {exc.expected}", path, exc.expected,
                               exc.found) from None
        except ElasticoptError as exc:
            code = next((c for cls, c in _SOLVE_ERRORS if isinstance(exc, cls)), "solver_error")
            raise ServiceError(code, str(exc), "solver", "a usable solver and options", spec.name) from None
        if sol.status is Status.ERROR:
            raise ServiceError("solver_error", f"solver {spec.name!r} failed: {sol.message}", "solver",
                               "a solver run that ends with a result", sol.message)
        return sol

    def _solve_request(self, doc: dict[str, Any], request_id: Any, t0: float, t_parse: float, t_valid: float,
                       screened: bool = False, encoded: list[bytes | None] | None = None) -> dict[str, Any]:
        if doc.get("format") == FORMAT_2:
            _check_service_fields(doc)
            tr = translate_instance(doc, screened)
        else:
            tr = translate(doc, screened, self.job_cache, encoded)
        return self._answer(tr, doc, request_id, t0, t_parse, t_valid)

    def _answer(self, tr: Translation, doc: dict[str, Any], request_id: Any, t0: float, t_parse: float,
                t_valid: float) -> dict[str, Any]:
        """Solve a translated request, verify and place its answer, and write the response."""
        t_tr = time.perf_counter()
        spec = RequestedSolver.from_request(doc["solver"]) if "solver" in doc else self.default_solver
        limit = checked_time_limit(doc["time_limit_s"]) if "time_limit_s" in doc else self.default_time_limit_s
        warnings: list[str] = []
        sol = self._run_solver(tr, spec, limit, doc.get("reduce", True), warnings)
        t_solve = time.perf_counter()
        verified, job_value = False, {}
        if doc.get("verify", True):
            rep = verify(tr.problem, sol)
            if not rep.ok:
                raise ServiceError("internal", f"solver {spec.name!r} returned a result that does not verify: "
                                   + "; ".join(rep.errors), "solver", "a verified result", sol.status.value)
            verified, job_value = True, rep.values
        t_verify = time.perf_counter()
        alloc: dict[str, Any] = {}
        if sol.status.has_allocation and sol.objective is not None:
            alloc, placed_warnings = answer_allocation(tr, sol, job_value, verified)
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
