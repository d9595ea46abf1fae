"""``elasticopt serve``: the allocation engine as a long-lived service (docs/integrations.md).

Research schedulers call it from their own process, in their own Python:
JSON lines on stdin/stdout (:func:`serve_stdio`, for a subprocess) or HTTP on
a local port (:mod:`elasticopt.service.http`, needs ``elasticopt[service]``).
Requests and responses are versioned and described by JSON Schemas
(``elasticopt/service/schema/``).
"""

from elasticopt.service.dispatch import AllocationService
from elasticopt.service.protocol import ERROR_CODES, REQUEST_FORMAT, RESPONSE_FORMAT, ServiceError, load_schema
from elasticopt.service.stdio import serve_stdio

__all__ = [
    "AllocationService",
    "ERROR_CODES",
    "REQUEST_FORMAT",
    "RESPONSE_FORMAT",
    "ServiceError",
    "load_schema",
    "serve_stdio",
]
