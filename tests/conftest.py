"""Hypothesis profiles: "ci" (default, minutes at most) and "thorough".

Select with ELASTICOPT_HYPOTHESIS_PROFILE=thorough.  Also the ``http_server`` fixture
(a running ``elasticopt serve --http``) shared by tests/service and tests/integrations.
"""

import os
import subprocess
import sys
import tempfile
from typing import Iterator

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)
settings.register_profile(
    "thorough",
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("ELASTICOPT_HYPOTHESIS_PROFILE", "ci"))

# The services the tests start keep no kernels on disk (`serve --kernel-cache`): nothing is written into the
# user's home, and no test's warm-up depends on the kernels earlier tests met.  tests/service/test_kernel_cache.py
# names its own folders.
os.environ["ELASTICOPT_KERNEL_CACHE"] = "none"


@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    """``elasticopt serve --http --port 0`` in a subprocess; yields its base URL."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    log = tempfile.TemporaryFile()  # the server's stderr: never a pipe nobody reads
    proc = subprocess.Popen(
        [sys.executable, "-m", "elasticopt", "serve", "--http", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
        env=env,
    )
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        if not line.startswith("listening on "):
            proc.kill()
            log.seek(0)
            raise RuntimeError(f"server did not start: {line!r} {log.read()[-2000:]!r}")
        yield line.split()[-1]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
