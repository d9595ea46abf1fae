"""HTTP transport: the same requests and responses over a local port (starlette + uvicorn).

Routes (all JSON):

- ``POST /v1/solve``: body = one request; answer = one response, HTTP 200 when
  ``ok``, else the status of :data:`~elasticopt.service.dispatch.HTTP_STATUS`;
- ``GET /v1/info``: version, formats, objectives, installed solvers;
- ``GET /v1/schema/request`` and ``/v1/schema/response``: the JSON Schemas.

Each request is answered in starlette's threadpool (parsing and validation of
different clients overlap; the solve itself is serialised by the service's
lock), so a slow solve never blocks the event loop and a client that
disconnects mid-request costs only its own answer.  Needs ``elasticopt[service]``.

A body larger than ``max_body_bytes`` (default :data:`DEFAULT_MAX_BODY_BYTES`,
64 MiB; ``elasticopt serve --max-body-mib``) is refused with HTTP 413 and a
structured ``request_too_large`` error without being read into memory: a
``Content-Length`` above the limit is refused before any of the body is read;
a body without one (chunked) is read in the server's chunks and refused as
soon as their total passes the limit.  Before the refusal is sent, the rest of
the body is read and dropped chunk by chunk (nothing of it is kept) for up to
:data:`DROP_BODY_S` seconds, as web servers' "lingering close" does: clients
that send a body whole before they read (urllib, requests) then get the 413
and its error, not a connection reset.  A client that sent
``Expect: 100-continue`` (curl for large bodies) is refused from the header
without being asked for the body.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from typing import Any

from elasticopt.service.dispatch import HTTP_STATUS, AllocationService
from elasticopt.service.protocol import ServiceError, error_response, load_schema

__all__ = ["make_app", "bind", "serve_http", "DEFAULT_MAX_BODY_BYTES", "DROP_BODY_S"]

#: Largest request body the HTTP transport reads (64 MiB).
DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024

#: Longest the rest of a refused body is read and dropped before the refusal is sent (seconds).
DROP_BODY_S = 10.0


def _too_large(limit: int, found: str) -> ServiceError:
    return ServiceError("request_too_large", f"request body {found}: more than this service reads ({limit} bytes); "
                        "send a smaller request or start the service with a larger --max-body-mib", "(body)",
                        f"at most {limit} bytes", found)


def make_app(service: AllocationService, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> Any:
    """The starlette application of ``service`` (bodies over ``max_body_bytes`` are refused, none of them kept)."""
    from starlette.applications import Starlette
    from starlette.background import BackgroundTask
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import ClientDisconnect, Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    def refuse(err: ServiceError) -> Response:
        data = json.dumps(error_response(None, err), separators=(",", ":")).encode() + b"\n"
        # Connection: close: the unread rest of the body must not be taken for the next request
        return Response(data, status_code=HTTP_STATUS[err.code], media_type="application/json",
                        headers={"Connection": "close"})

    async def solve_route(request: Request) -> Response:
        length = request.headers.get("content-length")
        waits = "100-continue" in request.headers.get("expect", "").lower()  # sends the body once told to
        refusal = None
        if length is not None:
            if not length.strip().isdigit():  # (the body's end unknown: nothing to drop)
                return refuse(ServiceError("invalid_request", "Content-Length: expected a number of bytes",
                                           "(headers).content-length", "a number of bytes", length))
            if int(length) > max_body_bytes:
                refusal = _too_large(max_body_bytes, f"of {int(length)} bytes (Content-Length)")
                if waits:
                    return refuse(refusal)  # the client has sent no body: nothing to drop
        chunks, size, until = [], 0, time.monotonic() + DROP_BODY_S
        stream = request.stream().__aiter__()
        try:
            while True:
                if refusal is None:
                    chunk = await stream.__anext__()
                elif waits or time.monotonic() >= until:
                    break  # the rest is not read: the refusal closes the connection
                else:  # dropped as it comes, so that a client still sending reads the refusal, not a reset
                    chunk = await asyncio.wait_for(stream.__anext__(), until - time.monotonic())
                size += len(chunk)
                if refusal is None and size > max_body_bytes:
                    refusal = _too_large(max_body_bytes, f"of more than {max_body_bytes} bytes (read so far: {size})")
                    until = time.monotonic() + DROP_BODY_S
                if refusal is None:
                    chunks.append(chunk)
        except StopAsyncIteration:
            pass
        except (ClientDisconnect, asyncio.TimeoutError):
            if refusal is None:
                raise
        if refusal is not None:
            return refuse(refusal)
        body = b"".join(chunks)
        resp, data = await run_in_threadpool(service.handle_bytes, body)
        status = 200 if resp["ok"] else HTTP_STATUS[resp["error"]["code"]]
        # sent first; then the heap is frozen again (AllocationService.settle), off the request's time
        return Response(data, status_code=status, media_type="application/json",
                        background=BackgroundTask(service.settle))

    async def info_route(request: Request) -> Response:
        return JSONResponse(service.info())

    def schema_route(name: str) -> Any:
        async def route(request: Request) -> Response:
            return JSONResponse(load_schema(name))

        return route

    return Starlette(
        routes=[
            Route("/v1/solve", solve_route, methods=["POST"]),
            Route("/v1/info", info_route, methods=["GET"]),
            Route("/v1/schema/request", schema_route("request-1"), methods=["GET"]),
            Route("/v1/schema/response", schema_route("response-1"), methods=["GET"]),
        ]
    )


def bind(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """A listening TCP socket (port 0 picks a free port; read it from ``getsockname()``)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    return sock


def serve_http(service: AllocationService, sock: socket.socket, *, log_level: str = "warning",
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
    """Serve ``service`` on the bound socket until interrupted (SIGINT / SIGTERM)."""
    import uvicorn

    config = uvicorn.Config(make_app(service, max_body_bytes), log_level=log_level, access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])
