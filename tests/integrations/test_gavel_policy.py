"""GavelPolicy against a stand-in of Gavel's ``get_allocation`` contract."""

from __future__ import annotations

import itertools
import random

import pytest

from elasticopt.integrations import gavel
from elasticopt.integrations.gavel import GavelPolicy
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


@pytest.mark.parametrize("seed", range(4))
def test_several_worker_types_the_exact_optimum(policy, seed):
    rng = random.Random(seed)
    spec = {"k80": rng.choice([2, 4]), "p100": rng.choice([2, 4]), "v100": rng.choice([2, 4])}
    ids = [JobIdPair(i, None) for i in range(rng.randrange(3, 7))]
    scale = {j: rng.choice([1, 2]) for j in ids}
    tput = {j: {"k80": rng.uniform(1, 3), "p100": rng.uniform(2, 6), "v100": rng.uniform(4, 10)} for j in ids}
    alloc = policy.get_allocation(tput, scale, spec)
    accept(alloc, tput, scale, spec)
    got = sum(x * tput[j][t] / max(tput[j].values()) for j in ids for t, x in alloc[j].items())
    best = 0.0
    for combo in itertools.product([None, *spec], repeat=len(ids)):
        if all(sum(scale[j] for j, c in zip(ids, combo) if c == t) <= spec[t] for t in spec):
            best = max(best, sum(tput[j][c] / max(tput[j].values()) for j, c in zip(ids, combo) if c))
    assert got == pytest.approx(best, abs=1e-5)


def _oversubscribed(seed):
    """Gavel-like inputs: v100 > p100 > k80 per job, numpy scalars as Gavel's estimator holds them."""
    import numpy as np

    rng = random.Random(seed)
    spec = {"v100": 4, "p100": 4, "k80": 4}
    ids = [JobIdPair(i, None) for i in range(rng.randrange(14, 20))]
    scale = {j: np.int64(rng.choice([1, 1, 1, 2, 4])) for j in ids}
    tput = {}
    for j in ids:
        k80 = rng.uniform(1, 3)
        p100 = k80 * rng.uniform(1.5, 3)
        tput[j] = {"k80": np.float64(k80), "p100": np.float64(p100), "v100": np.float64(p100 * rng.uniform(1.2, 2))}
    return spec, ids, scale, tput


@pytest.mark.parametrize("name", ["drop-in", "elasticopt"])
@pytest.mark.parametrize("seed", [0, 2, 3])  # traces where the allocation leaves a k80 free (a type with leftovers)
def test_gavel_rounds_realise_the_allocation_only_with_a_perf_name(policy, name, seed):
    """Gavel's mechanism shuffles worker types per round unless the policy name has "Perf"
    (scheduler.py:879-881).  With the drop-in's name every job given a share runs every round on its type
    or a faster one visited before it; with the old name ("elasticopt") the stand-in reproduces what the
    real Gavel did: micro-tasks of share-0 jobs take a type's workers and share holders wait or run slower."""
    from gavel_standin import GavelRounds, WORKER_TYPE_ORDER

    spec, ids, scale, tput = _oversubscribed(seed)
    alloc = policy.get_allocation(tput, scale, spec)
    accept(alloc, tput, scale, spec)
    assert "Perf" in policy.name
    assert sum(int(scale[j]) for j in ids if alloc[j]["k80"]) < spec["k80"]  # the case that trips the shuffle
    rounds = GavelRounds(policy.name if name == "drop-in" else name, spec, seed=seed)
    displaced = on_share_zero = 0
    for r in range(20):
        placed = rounds.round(r, alloc, tput, scale)
        for j in ids:
            mine = [t for t, x in alloc[j].items() if x > 0]
            if placed.get(j) is not None and alloc[j][placed[j]] == 0.0:
                on_share_zero += 1
            if mine and (placed.get(j) is None
                         or WORKER_TYPE_ORDER.index(placed[j]) > WORKER_TYPE_ORDER.index(mine[0])):
                displaced += 1
    if name == "drop-in":
        assert displaced == 0, f"{displaced} share holders idle or on a slower type over 20 rounds"
    else:  # the old drop-in's name: the failure seen in the real Gavel, reproduced
        assert displaced > 0 and on_share_zero > 0


def _overloaded_calls(policy, calls: int) -> list[dict]:
    """Gavel's calls under overload (hand-made): one 8-GPU job (id 0) waits on 8 K80s while 1-GPU jobs keep
    arriving; at each call the two oldest 1-GPU jobs finish and two new ones arrive, so 1-GPU jobs always wait."""
    big, small, answers = JobIdPair(0, None), [JobIdPair(i, None) for i in range(1, 11)], []
    nxt = 11
    for _ in range(calls):
        ids = [big, *small]
        alloc = policy.get_allocation({j: {"k80": 1.0} for j in ids}, {j: 8 if j == big else 1 for j in ids},
                                      {"k80": 8})
        accept(alloc, {j: {"k80": 1.0} for j in ids}, {j: 8 if j == big else 1 for j in ids}, {"k80": 8})
        answers.append(alloc)
        small = small[2:] + [JobIdPair(nxt, None), JobIdPair(nxt + 1, None)]
        nxt += 2
    return answers


def test_without_patience_a_large_job_waits_for_ever_and_with_it_runs(client):
    """The starvation measured in Gavel's simulator (docs/integrations.md §4): eight 1-GPU jobs are worth more
    than one 8-GPU job, call after call (``patience_calls=None``; the default, 64, acts only after 64 answers).
    With ``patience_calls=3`` the large job is promoted after 3 answers
    without a share and, the oldest promoted job, runs from the 4th on while 1-GPU jobs promoted after it wait."""
    big = JobIdPair(0, None)
    plain = _overloaded_calls(GavelPolicy(client=client, patience_calls=None), 8)
    assert all(a[big]["k80"] == 0.0 for a in plain)
    patient = GavelPolicy(client=client, patience_calls=3)
    runs = [a[big]["k80"] for a in _overloaded_calls(patient, 8)]
    assert runs == [0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    assert "0" in patient.promoted and patient.waited["0"] == 0  # (1-GPU jobs that waited 3 answers are too)
    patient.get_allocation({JobIdPair(1, None): {"k80": 1.0}}, {JobIdPair(1, None): 1}, {"k80": 8})
    assert patient.promoted == set() and patient.waited == {"1": 0}  # a job that left is forgotten


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "3"])
def test_patience_calls_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match="patience_calls: expected an integer >= 1 or None"):
        GavelPolicy(client=object(), patience_calls=bad)
