"""Heterogeneous profiles (Gavel) and the hetero / placement generator families."""

import math
import os
from pathlib import Path

import pytest

from elasticopt import solve, verify
from elasticopt.generate import generate_instance
from elasticopt.models import dumps_instance, load_instance
from elasticopt.profiles import get_profile, hetero_profile_names, hetero_profile_sets, profile_names
from elasticopt.profiles.hetero_factor import FactorProfile, fit_factor
from elasticopt.solvers import Status

DATA_DIR = Path(os.environ.get("ELASTICOPT_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def test_gavel_profiles_ship_with_their_fit_figures():
    names = hetero_profile_names()
    assert {n.split("/")[0] for n in names} == {"k80", "p100", "v100"}
    assert not set(names) & set(profile_names())
    assert hetero_profile_sets()["gavel"]["license"] == "MIT"
    for name in names:
        p = get_profile(name)
        assert isinstance(p, FactorProfile) and p.meta["held_out_error"]["median"] <= 0.10
        for k, b in p.candidates(64, p.batch_min, p.batch_max):
            packed, spread = p.samples_per_s(k, b), p.samples_per_s_on_nodes(k, b, k)
            assert packed > 0 and math.isfinite(packed) and spread > 0 and math.isfinite(spread)


def test_committed_gavel_profiles_match_a_refit():
    from elasticopt.profiles.gavel import load_gavel

    assert (DATA_DIR / "profiles" / "gavel").is_dir(), f"public data missing under {DATA_DIR} (set ELASTICOPT_DATA)"
    for name in hetero_profile_names():
        t, net = name.split("/")
        fresh, _, held = fit_factor(load_gavel(DATA_DIR, t, net))
        committed = get_profile(name)
        assert fresh.to_dict()["local"] == committed.to_dict()["local"]
        assert fresh.to_dict()["spread"] == committed.to_dict()["spread"]
        assert held.median == pytest.approx(committed.meta["held_out_error"]["median"], abs=1e-6)


@pytest.mark.parametrize("family,jobs,gpus", [("hetero", 60, 64), ("placement", 40, 48), ("hetero", 30, 17)])
def test_general_families_agree_across_exact_backends(tmp_path, family, jobs, gpus):
    problem = generate_instance(family, jobs, gpus, seed=4)
    f = tmp_path / "p.json"
    f.write_text(dumps_instance(problem))
    loaded = load_instance(f)
    assert dumps_instance(loaded) == dumps_instance(problem)
    assert loaded.cluster.gpus == gpus or family == "placement"
    proven = set()
    for name in ("dp", "numpy-dp", "milp", "scip", "cpsat"):
        s = solve(loaded, name, time_limit_s=60)
        assert verify(loaded, s).ok, (name, verify(loaded, s).errors)
        assert s.status in (Status.OPTIMAL, Status.LIMIT), (name, s.status, s.message)
        if s.status is Status.OPTIMAL:
            proven.add(s.objective)
    assert len(proven) == 1  # every proof gives the same optimum, and at least one backend proves it


def test_hetero_family_is_sia_cluster_at_64_gpus():
    p = generate_instance("hetero", 10, 64, seed=0)
    pools = p.cluster.pools
    assert {t: (pl.nodes, pl.gpus_per_node) for t, pl in pools.items()} == {"t4": (6, 4), "a100": (2, 8), "v100": (3, 8)}
    g = generate_instance("hetero", 10, 90, seed=0, cluster="gavel")
    assert set(g.cluster.types) == {"k80", "p100", "v100"} and g.cluster.gpus == 90
    assert p.node_aware and any(o.packed for j in p.jobs for o in j.typed_options(p.cluster, True))


def test_placement_family_is_fragmented():
    p = generate_instance("placement", 30, 64, seed=2)
    pool = p.cluster.pools["a100"]
    assert pool.free is not None and sum(pool.free_per_node()) < 64
    assert any(j.running is not None and j.running.nodes for j in p.jobs)
