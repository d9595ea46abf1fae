"""The drop-in files run in old host environments: Python >= 3.8, standard library only, one file each."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import elasticopt.integrations as integrations

DIR = Path(integrations.__file__).parent
FILES = sorted(p for p in DIR.glob("*.py") if p.name != "__init__.py")
SERVE = [sys.executable, "-m", "elasticopt", "serve", "--stdio", "--no-warm-up"]


def test_every_host_has_its_file():
    assert [p.stem for p in FILES] == ["blox", "gavel", "pollux", "sia"]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_vermin_minimum_version_is_at_most_3_8(path):
    out = subprocess.run(
        [sys.executable, "-c", "import sys; from vermin import main; sys.argv[0] = 'vermin'; sys.exit(main())",
         "--no-tips", "--violations", "-t=3.8-", str(path)],
        capture_output=True, text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    found = re.search(r"Minimum required versions: ([\d.]+)", out.stdout)
    assert found, out.stdout
    assert tuple(int(x) for x in found.group(1).split(".")) <= (3, 8)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_parses_as_python_3_8_and_imports_only_the_standard_library(path):
    tree = ast.parse(path.read_text(), feature_version=(3, 8))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path.name}: relative import (the file must stand alone)"
            names = [node.module or ""]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            assert top == "__future__" or top in sys.stdlib_module_names, f"{path.name} imports {name}"


def _block(text: str, start: str) -> str:
    return text[text.index(start):]


def test_shared_client_and_utility_blocks_are_identical_copies():
    texts = {p.name: p.read_text() for p in FILES}
    clients = {n: _block(t, "# ---- elasticopt client") for n, t in texts.items()}
    assert len(set(clients.values())) == 1, "the client block differs between drop-in files"
    utils = {n: t[t.index("\n\ndef fairness_utility"):] for n, t in texts.items() if "def fairness_utility" in t}
    assert set(utils) == {"blox.py", "pollux.py", "sia.py"} and len(set(utils.values())) == 1


def _runs(exe: str | None) -> bool:
    if not exe:
        return False
    try:
        return subprocess.run([exe, "-c", "import sys; assert sys.version_info >= (3, 8)"],
                              capture_output=True, timeout=60).returncode == 0
    except OSError:
        return False


def oldest_python() -> str:
    """The oldest interpreter >= 3.8 here: $ELASTICOPT_OLD_PYTHON, python3.8..3.10 on PATH, pyenv's, else this one."""
    if _runs(os.environ.get("ELASTICOPT_OLD_PYTHON")):
        return os.environ["ELASTICOPT_OLD_PYTHON"]
    for v in ("3.8", "3.9", "3.10"):
        if _runs(shutil.which(f"python{v}")):
            return shutil.which(f"python{v}")  # type: ignore[return-value]
    pyenv = shutil.which("pyenv")
    if pyenv:
        bare = subprocess.run([pyenv, "versions", "--bare"], capture_output=True, text=True).stdout.split()
        for v in ("3.8", "3.9", "3.10"):
            for version in (b for b in bare if b == v or b.startswith(v + ".")):
                prefix = subprocess.run([pyenv, "prefix", version], capture_output=True, text=True).stdout.strip()
                exe = os.path.join(prefix, "bin", f"python{v}") if prefix else None
                if _runs(exe):
                    return exe  # type: ignore[return-value]
    return sys.executable


OLD_PYTHON = oldest_python()


SCENARIOS = {
    "pollux.py": """
        class Node:
            def __init__(self, n): self.resources, self.preemptible = {"nvidia.com/gpu": n}, False
        class Job:
            def __init__(self, age):
                self.speedup_fn = lambda nodes, k: k ** 0.7 / (1 + 0.1 * (nodes - 1))
                self.min_replicas, self.max_replicas, self.preemptible = 0, 4, True
                self.age, self.num_restarts = age, 0
        alloc, desired = mod.PolluxPolicy(command=SERVE).optimize(
            {"a": Job(100.0), "b": Job(50.0)}, {0: Node(4), 1: Node(4)}, {"a": [0]}, Node(4))
        assert desired == 2 and alloc["a"] and alloc["b"], alloc
    """,
    "sia.py": """
        class Node:
            def __init__(self, n): self.resources, self.preemptible = {"nvidia.com/gpu": n}, False
        class Job:
            def __init__(self):
                self.speedup_fn = {"t4": lambda nodes, k: k ** 0.8}
                self.min_replicas, self.max_replicas, self.age, self.num_restarts = {"t4": 0}, {"t4": 4}, 10.0, 0
        alloc = mod.SiaPolicy(command=SERVE).optimize({"a": Job(), "b": Job()}, {"t4": {0: Node(4)}}, {})
        assert sorted(len(v[1]) for v in alloc.values()) == [2, 2], alloc
        assert all(v[0] == "t4" for v in alloc.values()), alloc
    """,
    "gavel.py": """
        alloc = mod.GavelPolicy(command=SERVE).get_allocation(  # as Gavel calls a FinishTimeFairness* policy
            {"0": {"v100": 2.0}, "1": {"v100": 1.0}}, {"0": 2, "1": 4}, {"0": 1, "1": 1}, {"0": 0, "1": 0},
            {"0": 100, "1": 100}, {"v100": 4})
        assert sorted(sum(r.values()) for r in alloc.values()) == [0.0, 1.0], alloc
    """,
    "blox.py": """
        class State: pass
        cluster, jobs = State(), State()
        cluster.gpu_df = [{"GPU_ID": g, "Local_GPU_ID": g % 2, "Node_ID": g // 2, "IP_addr": "x", "IN_USE": False,
                           "JOB_IDS": None} for g in range(4)]
        cluster.server_map = {0: {"numGPUs": 2}, 1: {"numGPUs": 2}}
        jobs.active_jobs = {7: {"num_GPUs": 2, "submit_time": 0}}
        sched = mod.BloxPolicy(command=SERVE).schedule(jobs, cluster)
        term, launch = mod.BloxPlacement().place(jobs, cluster, sched)
        assert term == [] and len(launch[7]) == 2, launch
    """,
}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_runs_in_a_bare_interpreter_without_site_packages(path):
    """Loaded by path in the oldest interpreter, ``-I -S`` (no numpy, pandas, elasticopt), it answers a call."""
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('dropin', {str(path)!r})\n"
        "mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)\n"
        "assert not [m for m in ('numpy', 'pandas', 'elasticopt') if m in sys.modules]\n"
        f"SERVE = {SERVE!r}\n" + textwrap.dedent(SCENARIOS[path.name])
    )
    out = subprocess.run([OLD_PYTHON, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"{OLD_PYTHON}: " + out.stderr[-3000:]


def test_the_bare_run_used_the_oldest_interpreter_found():
    version = subprocess.run([OLD_PYTHON, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True,
                             text=True).stdout.strip()
    print(f"drop-in files ran under {OLD_PYTHON} {version}")
    assert version
