"""JSON lines on stdin/stdout: one request per line in, one response per line out.

For a host scheduler that spawns ``elasticopt serve --stdio`` as a subprocess.
Blank lines are skipped; every other line gets exactly one response line, in
order, flushed at once (then the service settles its heap:
:meth:`AllocationService.settle`).  End of input (the host exited or closed the pipe)
ends the service with exit code 0, as does a closed stdout.  Logs go to
stderr, never to stdout.
"""

from __future__ import annotations

import logging
from typing import BinaryIO

from elasticopt.service.dispatch import AllocationService

__all__ = ["serve_stdio"]

log = logging.getLogger("elasticopt.service")

def serve_stdio(service: AllocationService, stdin: BinaryIO, stdout: BinaryIO) -> int:
    """Answer requests from ``stdin`` until it ends; returns the number answered."""
    answered = 0
    for line in stdin:
        if not line.strip():
            continue
        _, data = service.handle_bytes(line)
        try:
            stdout.write(data)
            stdout.flush()
        except (BrokenPipeError, ValueError, OSError):  # the host went away
            log.info("stdout closed after %d responses; stopping", answered)
            break
        answered += 1
        service.settle()  # the host has its answer: the heap is frozen again before the next request
    return answered
