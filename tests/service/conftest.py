"""Fixtures of the service tests: a running ``elasticopt serve --http``."""

from __future__ import annotations

import os
import subprocess
from typing import Iterator

import pytest

from service_helpers import ELASTICOPT


@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    """``elasticopt serve --http --port 0`` in a subprocess; yields its base URL."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        ELASTICOPT + ["serve", "--http", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        if not line.startswith("listening on "):
            proc.kill()
            raise RuntimeError(f"server did not start: {line!r} {proc.stderr.read()!r}")  # type: ignore[union-attr]
        yield line.split()[-1]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
