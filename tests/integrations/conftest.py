"""Fixtures of the drop-in tests: one ``elasticopt serve --stdio`` per test module."""

from __future__ import annotations

import sys
from typing import Iterator

import pytest

SERVE = [sys.executable, "-m", "elasticopt", "serve", "--stdio", "--no-warm-up"]


@pytest.fixture(scope="module")
def client(request: pytest.FixtureRequest) -> Iterator[object]:
    """A client of a service subprocess, of the drop-in module the test module names as ``DROPIN``
    (so errors are that file's own ``ElasticoptError``)."""
    c = request.module.DROPIN.ElasticoptClient(command=SERVE)
    yield c
    c.close()
