"""Throughput profiles: tabular, parametric, the fit and the named profiles."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elasticopt.errors import ValidationError
from elasticopt.models import ThroughputModel
from elasticopt.profiles import (
    IterationTimeParams,
    ParametricProfile,
    TabularProfile,
    get_profile,
    profile_names,
    profile_sets,
)
from elasticopt.profiles.fit import fit_params, relative_errors
from elasticopt.profiles.grid import gpu_grid
from elasticopt.profiles.measurements import Measurements

ROOT = Path(__file__).resolve().parents[1]
# the public data (docs/data.md) is where ELASTICOPT_DATA says; .ci/run sets it on CI
DATA_DIR = Path(os.environ["ELASTICOPT_DATA"]) if os.environ.get("ELASTICOPT_DATA") else None

# ---------------------------------------------------------------- named profiles


def test_named_profiles_cover_both_sets():
    names = profile_names()
    assert len([n for n in names if n.startswith("a100/")]) == 7
    assert len([n for n in names if n.startswith("t4/")]) == 6
    assert "a100/resnet50" in names and "t4/imagenet" in names
    sets = profile_sets()
    assert set(sets) == {"a100", "t4"}
    for s in sets.values():
        assert s["license"] == "Apache-2.0" and s["source"]


@pytest.mark.parametrize("name", profile_names())
def test_every_named_profile_loads_and_answers(name):
    p = get_profile(name)
    assert isinstance(p, ThroughputModel)
    assert p.name == name
    assert p.batch_min <= p.batch_max and p.max_local >= 1 and p.gpus_per_node in (4, 8)
    cands = p.candidates(1024, p.batch_min, p.batch_max)
    assert cands, name
    for k, b in cands:
        assert k <= p.gpus_max and b % k == 0 and p.min_local <= b // k <= p.max_local
        assert p.batch_min <= b <= p.batch_max
        v = p.samples_per_s(k, b)
        assert v is not None and math.isfinite(v) and v > 0
    # the fit figures travel with the profile
    assert p.meta["held_out_error"]["median"] <= 0.10


def test_unknown_profile_lists_known_names():
    with pytest.raises(ValidationError) as exc:
        get_profile("a100/nope")
    msg = str(exc.value)
    assert "a100/nope" in msg and "a100/resnet50" in msg and "t4/imagenet" in msg


def test_profile_without_multinode_data_stays_on_one_node():
    p = get_profile("a100/resnet50_cifar10")  # measured on 1..8 GPUs only
    assert p.gpus_max == 8
    assert max(k for k, _ in p.candidates(64, 64, 256)) <= 8


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(profile_names()), st.integers(1, 64), st.integers(1, 1 << 16))
def test_named_profiles_positive_and_finite(name, k, b):
    v = get_profile(name).samples_per_s(k, b)
    if b < k:
        assert v is None
    else:
        assert v is not None and math.isfinite(v) and v > 0


# ---------------------------------------------------------------- parametric

params_st = st.builds(
    IterationTimeParams,
    compute_base_s=st.floats(1e-6, 1.0),
    compute_per_sample_s=st.floats(0.0, 1e-2),
    sync_base_s=st.floats(0.0, 1.0),
    sync_per_gpu_s=st.floats(0.0, 1e-1),
    node_sync_base_s=st.floats(0.0, 2.0),
    node_sync_per_gpu_s=st.floats(0.0, 1e-1),
    gamma=st.floats(1.0, 10.0),
)


@settings(max_examples=100, deadline=None)
@given(params_st, st.sampled_from([4, 8]), st.integers(1, 4096), st.integers(1, 1 << 20))
def test_parametric_positive_and_finite(params, gpn, k, b):
    p = ParametricProfile("x", params, gpn, 1, 1 << 20, 1 << 20)
    v = p.samples_per_s(k, b)
    if b < k:
        assert v is None
        return
    assert v is not None and math.isfinite(v) and v > 0
    # overlap never beats the slower part alone, nor the sum of both
    t = p.iteration_time_s(k, b)
    compute = params.compute_base_s + params.compute_per_sample_s * b / k
    assert t >= compute * (1 - 1e-12)


def test_parametric_gamma_one_adds_times_and_node_step():
    params = IterationTimeParams(0.01, 0.001, 0.02, 0.001, 0.05, 0.002, 1.0)
    p = ParametricProfile("x", params, 8, 1, 4096, 512)
    assert p.iteration_time_s(1, 64) == pytest.approx(0.01 + 0.064)
    assert p.iteration_time_s(8, 64) == pytest.approx(0.01 + 0.008 + 0.02 + 0.006)
    assert p.iteration_time_s(16, 128) == pytest.approx(0.01 + 0.008 + 0.05 + 0.028)


def test_parametric_rejects_bad_params():
    with pytest.raises(ValidationError):
        IterationTimeParams(0.01, 0.001, 0.02, 0.001, 0.05, 0.002, 0.5)
    with pytest.raises(ValidationError):
        IterationTimeParams(-1.0, 0.001, 0.02, 0.001, 0.05, 0.002, 2.0)


def test_gpu_grid_packs_on_nodes():
    assert gpu_grid(64, 8) == [1, 2, 4, 8, 16, 32, 64]
    assert gpu_grid(48, 8) == [1, 2, 4, 8, 16, 32]
    assert gpu_grid(0, 8) == []


# ---------------------------------------------------------------- fitting


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(params_st)
def test_fit_recovers_noise_free_model(params):
    """Points made by the model itself are fitted to (near) zero error."""
    k = np.array([1, 2, 4, 8, 16, 32, 64] * 4)
    local = np.repeat([4.0, 16.0, 64.0, 128.0], 7)
    nodes = -(-k // 8)
    from elasticopt.profiles.parametric import iteration_time_s

    t = iteration_time_s(params, k, nodes, local)
    meas = Measurements("synthetic/x", k, nodes, local, t, np.full(k.size, np.nan), 8)
    fitted = fit_params(meas)
    err = relative_errors(fitted, meas)
    assert np.median(err) < 0.01, (params, fitted)


# ---------------------------------------------------------------- tabular

grid_st = st.tuples(
    st.lists(st.sampled_from([1, 2, 3, 4, 6, 8, 16, 32, 64]), min_size=1, max_size=5, unique=True).map(sorted),
    st.lists(st.integers(1, 4096), min_size=1, max_size=5, unique=True).map(sorted),
)


@st.composite
def tabular_st(draw):
    ks, bs = draw(grid_st)
    values = {}
    for k in ks:
        for b in bs:
            hole = draw(st.integers(0, 9)) == 0
            values[(k, b)] = None if hole else draw(st.floats(1e-3, 1e6))
    if all(v is None for v in values.values()):
        values[(ks[0], bs[0])] = 1.0
    axis = draw(st.sampled_from(["global", "local"]))
    return TabularProfile("t", values, batch_axis=axis)


def _query(tab: TabularProfile, k: int, x: float) -> int:
    """Global batch for a point whose batch-axis coordinate is x."""
    return int(x) if tab.batch_axis == "global" else int(k * x)


@settings(max_examples=100, deadline=None)
@given(tabular_st())
def test_tabular_reproduces_measured_points(tab):
    for (k, b), v in tab.points.items():
        got = tab.samples_per_s(k, _query(tab, k, b))
        assert got == v  # exact, None for the holes


@settings(max_examples=200, deadline=None)
@given(tabular_st(), st.floats(0, 1), st.floats(0, 1))
def test_tabular_interpolation_bounded_by_neighbours(tab, u, w):
    ks = sorted({k for k, _ in tab.points})
    bs = sorted({b for _, b in tab.points})
    k = int(round(ks[0] + u * (ks[-1] - ks[0])))
    if tab.batch_axis == "global":
        b = int(round(bs[0] + w * (bs[-1] - bs[0])))
        x = b
    else:  # choose the local batch, then the global batch k * local
        x = int(round(bs[0] + w * (bs[-1] - bs[0])))
        b = k * x
    v = tab.samples_per_s(k, b)
    lo_k = max(kk for kk in ks if kk <= k)
    hi_k = min(kk for kk in ks if kk >= k)
    lo_b = max(bb for bb in bs if bb <= x)
    hi_b = min(bb for bb in bs if bb >= x)
    corners = [tab.points.get((kk, bb)) for kk in {lo_k, hi_k} for bb in {lo_b, hi_b}]
    if v is None:
        assert any(c is None for c in corners)
        return
    assert math.isfinite(v) and v > 0
    known = [c for c in corners if c is not None]
    assert v <= max(known) * (1 + 1e-12)
    assert v >= min(known) * (1 - 1e-12)


@settings(max_examples=50, deadline=None)
@given(tabular_st())
def test_tabular_refuses_outside_its_data(tab):
    ks = sorted({k for k, _ in tab.points})
    bs = sorted({b for _, b in tab.points})
    far_k = ks[-1] * 2
    with pytest.raises(ValidationError, match="measured ranges"):
        tab.samples_per_s(far_k, _query(tab, far_k, bs[-1]))
    with pytest.raises(ValidationError, match="measured ranges"):
        tab.samples_per_s(ks[0], _query(tab, ks[0], bs[-1] * 2))
    for k, b in tab.candidates(1 << 20, 1, 1 << 30):
        v = tab.samples_per_s(k, b)
        assert v is not None and v > 0


def test_tabular_missing_cell_is_not_interpolated_across():
    # resnet50_cifar10-like: 16 GPUs did not run
    tab = TabularProfile("t", {(8, 64): 100.0, (16, 64): 0.0, (8, 128): 150.0, (16, 128): None})
    assert tab.samples_per_s(8, 96) == pytest.approx(100 + 50 * math.log(96 / 64) / math.log(2))
    assert tab.samples_per_s(12, 64) is None
    assert tab.gpus_max == 8 and tab.max_local == 16
    assert all(k == 8 for k, _ in tab.candidates(64, 64, 128))


# ---------------------------------------------------------------- committed = refitted


# skipped only off CI: on CI (CI=true) the data lies beside the checkout, and its absence must fail
@pytest.mark.skipif(DATA_DIR is None and not os.environ.get("CI"),
                    reason="public measurements not given: set ELASTICOPT_DATA to the data folder (docs/data.md)")
def test_committed_profiles_match_a_refit():
    """Refitting the public data gives the parameters and limits in profiles/data/*.json.

    (validation/fit_profiles.py does the same fit plus the cross-validation for the report.)
    """
    from elasticopt.profiles.fit import measured_constraints
    from elasticopt.profiles.measurements import load_all

    assert DATA_DIR is not None, "ELASTICOPT_DATA is not set: .ci/run sets it to the data beside the clone"
    assert (DATA_DIR / "profiles" / "a100").is_dir(), f"no public measurements under ELASTICOPT_DATA={DATA_DIR}"
    all_meas = load_all(DATA_DIR)
    assert sorted(m.name for m in all_meas) == profile_names()
    for meas in all_meas:
        committed = get_profile(meas.name)
        limits = measured_constraints(meas)
        assert {k: getattr(committed, k) for k in limits} == limits, meas.name
        fresh = fit_params(meas).as_array()
        np.testing.assert_allclose(fresh, committed.params.as_array(), rtol=1e-5, atol=1e-9,
                                   err_msg=meas.name)
        assert committed.meta["points"] == len(meas)
        assert np.median(relative_errors(committed.params, meas)) == pytest.approx(
            committed.meta["fit_error"]["median"], abs=1e-5)
