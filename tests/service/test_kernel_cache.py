"""The dp's kernels kept on disk between service runs (solvers/dp/kernel_cache.py, ``serve --kernel-cache``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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


SECOND = r'''
import json, sys
from elasticopt.solvers.dp import kernel_cache
from elasticopt.solvers.dp.jax_kernels import _kernels, _kernels_multi
kernel_cache.use_kernel_cache(sys.argv[1])
from elasticopt.service import AllocationService
svc = AllocationService()
svc.warm_up()
build = {"one": _kernels, "multi": _kernels_multi}
def state():
    return ({k: build[k[0]](*k[1])._cache_size() for k in kernel_cache._noted},
            _kernels.cache_info().misses, _kernels_multi.cache_info().misses)
before = state()
resp = svc.handle(json.dumps(json.loads(sys.argv[2])))
print(json.dumps({"same": state() == before, "noted": len(before[0]), "objective": resp["objective_value"]}))
'''


def test_a_second_service_warms_up_every_shape_the_first_met(tmp_path):
    """A request on a cluster the warm-up does not cover (three pools of 16-24 GPUs: 8,192 states) compiles its
    kernels in the first service, which adds them to the folder's index; a second service's warm-up runs them, so
    that request then builds no kernel and traces nothing new (each jitted kernel's own cache unchanged)."""
    cache = tmp_path / "xla"
    big = dict(REQUEST, cluster={"pools": {"v100": {"nodes": 2, "gpus_per_node": 8},
                                           "k80": {"nodes": 3, "gpus_per_node": 8},
                                           "p100": {"nodes": 2, "gpus_per_node": 8}}})
    big["jobs"] = [{"id": f"j{i}", "options": [{"gpus": k, "pool": p, "value": 1.0 + 0.1 * k + 0.03 * i}
                                              for p in ("v100", "k80", "p100") for k in (1, 2, 4, 8)]}
                   for i in range(20)]
    out = subprocess.run(ELASTICOPT + ["serve", "--stdio", "--kernel-cache", str(cache)],
                         input=(json.dumps(big) + "\n").encode(), capture_output=True, timeout=600)
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    first = json.loads(out.stdout)
    index = json.loads((cache / "elasticopt-kernels.json").read_text())
    assert any(e["kind"] == "multi" and e["key"][2] > 1024 for e in index["kernels"]), index  # past the warm-up's
    idle = subprocess.run(ELASTICOPT + ["serve", "--stdio", "--kernel-cache", str(tmp_path / "idle")], input=b"",
                          capture_output=True, timeout=600)
    assert idle.returncode == 0 and not (tmp_path / "idle" / "elasticopt-kernels.json").exists()  # warm-up: no entry
    run = subprocess.run([sys.executable, "-c", SECOND, str(cache), json.dumps(big)], capture_output=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr.decode()[-2000:]
    second = json.loads(run.stdout.decode().strip().splitlines()[-1])
    assert second["same"] and second["noted"] >= len(index["kernels"]), second
    assert second["objective"] == first["objective_value"]


def test_the_index_keeps_the_shapes_met_last(tmp_path, monkeypatch):
    """Hand-checked on a fake folder: entries merge with what is there, the oldest go past MAX_INDEX, a torn or
    foreign index is started again, and a process notes a shape once."""
    import numpy as np

    from elasticopt.solvers.dp import kernel_cache as kc
    from elasticopt.solvers.dp.value_type import ValueType

    monkeypatch.setattr(kc, "_folder", tmp_path)
    monkeypatch.setattr(kc, "_noted", set())
    monkeypatch.setattr(kc, "MAX_INDEX", 3)
    (tmp_path / kc.INDEX).write_text("{not json")
    vt = ValueType("int64", 3, False)
    for c in (8, 16, 32, 64):
        kc.note("one", (c, 4, 512, "int8", vt), (np.zeros(512), np.zeros((c, 4), dtype=np.int32)))
    kc.note("one", (8, 4, 512, "int8", vt), ())  # met before in this process: not noted again
    doc = json.loads((tmp_path / kc.INDEX).read_text())
    assert [e["key"][0] for e in doc["kernels"]] == [16, 32, 64]
    assert doc["kernels"][0]["args"] == [[[512], "float64", False], [[16, 4], "int32", False]]
    assert doc["kernels"][0]["value_type"] == ["int64", 3, False]
    assert not list(tmp_path.glob(".index-*"))  # written by rename, no temporary file left
