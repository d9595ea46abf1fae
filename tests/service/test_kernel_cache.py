"""The dp's kernels kept on disk between service runs (solvers/dp/kernel_cache.py, ``serve --kernel-cache``)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from elasticopt.errors import ElasticoptError
from elasticopt.solvers.dp.kernel_cache import KERNEL_CACHE_ENV, default_kernel_cache, use_kernel_cache
from service_helpers import ELASTICOPT

REQUEST = {"format": "elasticopt-request/1", "id": 1, "cluster": {"pools": {"v100": {"nodes": 2, "gpus_per_node": 4},
                                                                          "k80": {"nodes": 3, "gpus_per_node": 4}}},
           "objective": "values",
           "jobs": [{"id": f"j{i}", "options": [{"gpus": k, "pool": p, "value": 1.0 + 0.1 * k + 0.03 * i}
                                              for p in ("v100", "k80") for k in (1, 2, 4)]} for i in range(12)]}


def test_where_the_cache_is(monkeypatch, tmp_path):
    monkeypatch.delenv(KERNEL_CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_kernel_cache() == tmp_path / "xdg" / "elasticopt" / "xla"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_kernel_cache() == tmp_path / "home" / ".cache" / "elasticopt" / "xla"
    monkeypatch.setenv(KERNEL_CACHE_ENV, str(tmp_path / "mine"))
    assert default_kernel_cache() == tmp_path / "mine"
    for off in ("none", "None", ""):
        monkeypatch.setenv(KERNEL_CACHE_ENV, off)
        assert default_kernel_cache() is None
    assert use_kernel_cache(None) is None


def test_a_folder_that_cannot_be_written_is_a_clear_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(ElasticoptError, match=r"kernel cache .*a-file/xla: cannot write there .*--kernel-cache none"):
        use_kernel_cache(blocker / "xla")
    out = subprocess.run(ELASTICOPT + ["serve", "--stdio", "--no-warm-up", "--kernel-cache", str(blocker / "xla")],
                         input=b"", capture_output=True, timeout=300)
    assert out.returncode != 0 and b"Traceback" not in out.stderr and b"cannot write there" in out.stderr


def _serve(cache: str) -> tuple[dict, dict[str, int]]:
    """The answer, and each cache entry's modification time (ns) after the run."""
    out = subprocess.run(ELASTICOPT + ["serve", "--stdio", "--no-warm-up", "--kernel-cache", cache],
                         input=(json.dumps(REQUEST) + "\n").encode(), capture_output=True, timeout=300)
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    return json.loads(out.stdout), {p.name: p.stat().st_mtime_ns for p in Path(cache).iterdir()}


def test_a_second_service_loads_the_first_ones_kernels(tmp_path):
    """The first run writes its kernels (the two-pool DP's); the second, same request, writes none and rewrites
    none (a kernel compiled again would be written again): every kernel it needed was loaded.  Answers are the
    same, and ``none`` writes nothing."""
    cache = str(tmp_path / "xla")
    first, written = _serve(cache)
    assert first["ok"] and first["status"] == "optimal"
    assert any(name.startswith("jit_") for name in written), written  # jax names each entry by its function
    second, after = _serve(cache)
    assert after == written  # the same entries, none written again
    assert second["objective_value"] == first["objective_value"]
    assert second["allocation"] == first["allocation"]
    out = subprocess.run(ELASTICOPT + ["serve", "--stdio", "--no-warm-up", "--kernel-cache", "none"],
                         input=(json.dumps(REQUEST) + "\n").encode(), capture_output=True, timeout=300,
                         env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert out.returncode == 0 and json.loads(out.stdout)["objective_value"] == first["objective_value"]
    assert not (tmp_path / "xdg").exists()  # 'none': nothing written, not even the default folder
