"""Fixtures of the launcher tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from launcher_helpers import Recorder


@pytest.fixture
def recorder():
    return Recorder()


@pytest.fixture(autouse=True)
def _no_stray_processes(tmp_path):
    """After each test, kill any generation process a failed test left behind under tmp_path."""
    yield
    import os
    import signal

    prefix = f"ELASTICOPT_GENERATION_SPEC={tmp_path}".encode()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            env = Path(f"/proc/{d}/environ").read_bytes()
        except OSError:
            continue
        if any(v.startswith(prefix) for v in env.split(b"\0")):
            try:
                os.kill(int(d), signal.SIGKILL)
            except OSError:
                pass
