"""Smoke test of benchmarks/bench_kernel.py: the C reference builds, runs and agrees with the jax kernel."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_bench_kernel_agrees_with_the_c_reference():
    if shutil.which("cc") is None:
        if os.environ.get("CI"):
            pytest.fail("no C compiler (cc) on CI: the kernel benchmark's C reference cannot be built")
        pytest.skip("no C compiler")
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_kernel.py"), "--jobs", "60", "--gpus", "96",
                          "--repeats", "1"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "all agree" in out.stdout and "C / jax" in out.stdout
