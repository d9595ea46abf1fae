"""GavelPolicy against a stand-in of Gavel's ``get_allocation`` contract."""

from __future__ import annotations

import itertools
import random

import pytest

from elasticopt.integrations import gavel
from elasticopt.integrations.gavel import ElasticoptError, GavelPolicy
from gavel_standin import JobIdPair, accept

DROPIN = gavel  # the conftest's client fixture uses this file's client


@pytest.fixture(scope="module")
def policy(client):
    return GavelPolicy(client=client)


@pytest.mark.parametrize("seed", range(5))
def test_one_worker_type_runs_the_most_jobs_that_fit(policy, seed):
    rng = random.Random(seed)
    spec = {"v100": rng.choice([4, 6, 8])}
    ids = [JobIdPair(i, None) for i in range(rng.randrange(3, 8))]
    scale = {j: rng.choice([1, 2, 4]) for j in ids}
    tput = {j: {"v100": rng.uniform(1, 10)} for j in ids}
    tput[JobIdPair(0, 1)] = {"v100": [1.0, 2.0]}  # a space-sharing pair: given no share
    alloc = policy.get_allocation(tput, scale, spec)
    accept(alloc, tput, scale, spec)
    assert alloc[JobIdPair(0, 1)] == {"v100": 0.0}
    got = sum(1 for j in ids if alloc[j]["v100"] == 1.0)
    best = max(sum(c) for c in itertools.product([0, 1], repeat=len(ids))
               if sum(s * x for s, x in zip((scale[j] for j in ids), c)) <= spec["v100"])
    assert got == best  # every job is worth 1 (normalised throughput): the most jobs that fit


def test_ties_go_to_jobs_in_gavel_order(policy):
    ids = [JobIdPair(i, None) for i in range(4)]
    alloc = policy.get_allocation({j: {"k80": 2.0} for j in ids}, {j: 2 for j in ids}, {"k80": 4})
    assert [alloc[j]["k80"] for j in ids] == [1.0, 1.0, 0.0, 0.0]


def test_several_worker_types_wait_for_the_general_model(policy):
    ids = [JobIdPair(i, None) for i in range(2)]
    with pytest.raises(ElasticoptError, match="unsupported"):
        policy.get_allocation({j: {"k80": 1.0, "v100": 3.0} for j in ids}, {j: 1 for j in ids}, {"k80": 2, "v100": 2})
