"""Mutation fuzz of the files ``simulate`` and ``launch`` read (issue 21, check 4).

Valid files are mutated (structure, values, bytes: :mod:`elasticopt.testing.fuzz`) and the
command runs in this process under a 10 s CPU-time limit: no traceback, no hang, no exit
code outside the documented ones, and every error names the file and a JSON path (or CSV
row).  ``launch`` runs with an unknown solver, so a file that loads stops right after
loading (with that solver's error) instead of starting jobs.  The ``solve`` half of the
check is ``tests/test_instance_fuzz.py`` (format-1 and format-2 instances).
"""

import random
import tempfile
from functools import lru_cache
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from elasticopt.testing.fuzz import classify_cli, mutate_bytes, mutate_csv, run_cli

ROOT = Path(__file__).resolve().parent.parent
HANG_S = 10.0
NO_SOLVER = "unknown solver 'no-such-solver'"


@lru_cache(maxsize=1)
def sources() -> dict[str, str]:
    """Small valid files: workloads (JSON, CSV, per-type JSON) made by the generator, and the example jobs file."""
    out = {"jobs.json": (ROOT / "elasticopt/launcher/examples/jobs_cpu.json").read_text()}
    with tempfile.TemporaryDirectory() as tmp:
        for name, extra in (("wl.json", ["--gpus", "16"]), ("wl.csv", ["--gpus", "16"]),
                            ("wlh.json", ["--cluster", "sia-64"])):
            path = Path(tmp) / name
            run = run_cli(["simulate", "--generate", str(path), "--jobs", "4", "--seed", "3", *extra], timeout_s=None)
            assert run.code == 0, run
            out[name] = path.read_text()
    return out


def _simulate_argv(path: str, name: str) -> list[str]:
    cluster = ["--cluster", "sia-64"] if name == "wlh.json" else ["--gpus", "16"]
    return ["simulate", path, *cluster, "--quiet", "--policy", "elastic", "--solver", "numpy-dp",
            "--horizon-s", "200000"]


def check(name: str, raw: bytes, argv_of) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / f"mutated-{name}")
        Path(path).write_bytes(raw)
        run = run_cli(argv_of(path, tmp), timeout_s=HANG_S)
    accepted = NO_SOLVER if name == "jobs.json" else None
    outcome = classify_cli(run, path, (0, 2) if name != "jobs.json" else (2,), accepted=accepted)
    assert outcome in ("clean error", "solved"), (outcome, run.exception, run.stderr[-600:], raw[:300])


def test_the_sources_are_valid_and_run():
    for name in ("wl.json", "wl.csv", "wlh.json"):
        check(name, sources()[name].encode(), lambda p, _t, n=name: _simulate_argv(p, n))
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "jobs.json")
        Path(path).write_text(sources()["jobs.json"])
        run = run_cli(["launch", path, "--solver", "no-such-solver", "--out", tmp], timeout_s=HANG_S)
    assert run.code == 2 and NO_SOLVER in run.stderr, run  # loaded; stopped before any job started


@settings(max_examples=max(200, settings().max_examples))
@given(name=st.sampled_from(["wl.json", "wlh.json"]), rng=st.randoms(use_true_random=False))
def test_mutated_workload_json_never_crashes_simulate(name, rng: random.Random):
    check(name, mutate_bytes(sources()[name], rng), lambda p, _t: _simulate_argv(p, name))


@settings(max_examples=max(150, settings().max_examples))
@given(rng=st.randoms(use_true_random=False))
def test_mutated_workload_csv_never_crashes_simulate(rng: random.Random):
    check("wl.csv", mutate_csv(sources()["wl.csv"], rng), lambda p, _t: _simulate_argv(p, "wl.csv"))


@settings(max_examples=max(200, settings().max_examples))
@given(rng=st.randoms(use_true_random=False))
def test_mutated_jobs_files_never_crash_launch(rng: random.Random):
    check("jobs.json", mutate_bytes(sources()["jobs.json"], rng),
          lambda p, tmp: ["launch", p, "--solver", "no-such-solver", "--cpu-slots", "1", "--out", tmp])
