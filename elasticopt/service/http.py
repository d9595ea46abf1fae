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
"""

from __future__ import annotations

import socket
from typing import Any

from elasticopt.service.dispatch import HTTP_STATUS, AllocationService
from elasticopt.service.protocol import load_schema

__all__ = ["make_app", "bind", "serve_http"]

def make_app(service: AllocationService) -> Any:
    """The starlette application of ``service``."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    async def solve_route(request: Request) -> Response:
        body = await request.body()
        resp, data = await run_in_threadpool(service.handle_bytes, body)
        status = 200 if resp["ok"] else HTTP_STATUS[resp["error"]["code"]]
        return Response(data, status_code=status, media_type="application/json")

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


def serve_http(service: AllocationService, sock: socket.socket, *, log_level: str = "warning") -> None:
    """Serve ``service`` on the bound socket until interrupted (SIGINT / SIGTERM)."""
    import uvicorn

    config = uvicorn.Config(make_app(service), log_level=log_level, access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])
