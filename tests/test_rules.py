"""The option-feasibility rule book (``models/rules.py``): one verdict in every form, one definition.

- property: the scalar form, the array form and the why-not message agree on
  random jobs and options (and with ``Job.is_feasible`` and the scheduler's
  ``option_error`` where the throughput knows the option);
- hand-checked cases for each clause and its message;
- the package writes the rule nowhere else (the stand-alone drop-ins in
  ``elasticopt/integrations/`` excepted): an ``ast`` scan for the rule's two
  arithmetic clauses, ``b % k`` and ``b // k`` against ``max_local``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elasticopt.models import Job, MeasuredThroughput, rules
from elasticopt.scheduling.jobspec import JobSpec
from elasticopt.scheduling.state import option_error

ROOT = Path(__file__).resolve().parent.parent


@st.composite
def limited_jobs(draw) -> Job:
    bmin = draw(st.integers(1, 64))
    bmax = draw(st.integers(bmin, 256))
    gmin = draw(st.integers(1, 8))
    gmax = draw(st.one_of(st.none(), st.integers(gmin, 16)))
    mloc = draw(st.integers(1, 64))
    types = draw(st.one_of(st.none(), st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3,
                                               unique=True).map(tuple)))
    tp = MeasuredThroughput({(k, k * m): float(k * m) for k in (1, 2, 4) for m in (1, 8)})
    return Job("j", tp, bmin, bmax, mloc, gpus_min=gmin, gpus_max=gmax, types=types)


options = st.tuples(st.integers(1, 20), st.integers(1, 300), st.sampled_from([None, "a", "b", "c"]))


@settings(max_examples=300, deadline=None)
@given(limited_jobs(), st.lists(options, min_size=1, max_size=20), st.one_of(st.none(), st.integers(1, 20)))
def test_scalar_array_and_why_not_agree(job, opts, cap):
    ks = np.array([k for k, _, _ in opts], dtype=np.int64)
    bs = np.array([b for _, b, _ in opts], dtype=np.int64)
    for t in {t for _, _, t in opts}:
        arr = rules.allows_array(job, ks, bs, t)
        lim = rules.limits(job, cap)
        arr_cap = rules.fits_array(ks, bs, *lim) & rules.type_allowed(job.types, t)
        for i, (k, b, _) in enumerate(opts):
            scalar = rules.allows(job, k, b, t)
            why = rules.why_not(job, k, b, t)
            assert scalar == bool(arr[i]) == (why is None), (k, b, t, why)
            assert rules.fits(k, b, *lim) == rules.fits_array(np.array([k]), np.array([b]), *lim)[0]
            why_cap = rules.why_not(job, k, b, t, cap)
            assert bool(arr_cap[i]) == (why_cap is None), (k, b, t, cap, why_cap)
            # the job-level readers answer by the same rule where the throughput knows the option
            if job.throughput.samples_per_s(k, b) is not None:
                assert job.is_feasible(k, b, t) == scalar
                spec = JobSpec("j", job.throughput, job.batch_min, job.batch_max, job.max_local, 1.0,
                               gpus_min=job.gpus_min, gpus_max=job.gpus_max, types=job.types)
                assert (option_error(spec, k, b, cap, t) is None) == (why_cap is None)


def test_each_clause_and_its_message():
    job = Job("j", MeasuredThroughput({(1, 8): 1.0}), 8, 64, 16, gpus_min=2, gpus_max=4, types=("a",))
    assert rules.why_not(job, 2, 16) is None and rules.allows(job, 2, 16)
    assert rules.why_not(job, 1, 8) == "k=1 outside [2, 4]"
    assert rules.why_not(job, 8, 64) == "k=8 outside [2, 4]"
    assert rules.why_not(job, 4, 16, gpus_cap=3) == "k=4 above the cluster's 3 GPUs"
    assert rules.why_not(job, 2, 4) == "b=4 outside [8, 64]"
    assert rules.why_not(job, 3, 16) == "k=3 does not divide b=16"
    assert rules.why_not(job, 2, 64) == "local batch 32 above max_local 16"
    assert rules.why_not(job, 2, 16, "b") == "the job may not use GPU type 'b'"
    assert rules.allows(job, 2, 16, "a") and not rules.allows(job, 2, 16, "b")
    free = Job("f", MeasuredThroughput({(1, 8): 1.0}), 1, 10**6, 10**6)
    assert rules.why_not(free, 0, 8) == "k=0 outside [1, inf]"
    assert rules.allows(free, 1 << 19, 1 << 19)  # no GPU limit: only the cluster's
    assert not rules.fits_array(np.array([0, 1]), np.array([8, 8]), *rules.limits(free))[0]  # k = 0: no division


# ---- no second definition --------------------------------------------------------------------------------

#: Where the rule's arithmetic may appear besides the rule book: each with the reason.
ALLOWED = {
    "models/rules.py": "the rule book",
    "elasticopt/launcher/plan.py": "the trainer's split of b over k GPUs (job side, before any model import: "
                                   "b/k may pass max_local there, by gradient accumulation)",
    "elasticopt/profiles/grid.py": "a profile's candidate grid (what the profile knows, min_local included)",
    "elasticopt/profiles/measurements.py": "reading measured rows (a row whose batch k does not divide is dropped)",
}

_BATCH = ("batch", "b", "bb")
_GPUS = ("gpus", "k", "kk", "world_size")


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _is_batch(node: ast.AST) -> bool:
    n = _name(node)
    return n in _BATCH or n.endswith("batch")


def rule_sites(source: str, filename: str = "<src>") -> list[int]:
    """Lines that write the rule's arithmetic: ``batch % gpus`` or ``batch // gpus`` compared with a max_local."""
    out = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            if _is_batch(node.left) and _name(node.right) in _GPUS:
                out.append(node.lineno)
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            div = any(isinstance(s, ast.BinOp) and isinstance(s.op, ast.FloorDiv) and _is_batch(s.left) for s in sides)
            mloc = any("max_local" in _name(s) or _name(s) in ("mloc", "m_loc") for s in sides)
            if div and mloc:
                out.append(node.lineno)
    return sorted(set(out))


def test_scanner_finds_the_rule_written_out():
    src = ("ok = b % k == 0 and b // k <= mloc\n"
           "if batch % gpus:\n    pass\n"
           "x = spec.max_local < batch // gpus\n"
           "y = i % n\n")
    assert rule_sites(src) == [1, 2, 4]


def test_the_rule_is_written_once():
    found = {}
    for folder in ("models", "solvers", "elasticopt"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith("elasticopt/integrations/") or rel in ALLOWED:
                continue
            lines = rule_sites(path.read_text(), rel)
            if lines:
                found[rel] = lines
    assert not found, ("the option-feasibility rule written outside models/rules.py (call rules.fits / "
                       f"fits_array / why_not instead): {found}")


@pytest.mark.parametrize("rel", sorted(ALLOWED))
def test_allowed_files_exist(rel):
    assert (ROOT / rel).is_file(), f"{rel} is allowed to write the rule but does not exist: drop it from ALLOWED"
