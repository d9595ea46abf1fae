"""GavelPolicy against a stand-in of Gavel's ``get_allocation`` contract, called as Gavel's scheduler calls it
(``gavel_standin.compute_allocation``: the arguments depend on the policy's name)."""

from __future__ import annotations

import itertools
import random

import pytest

from elasticopt.integrations import gavel
from elasticopt.integrations.gavel import GavelPolicy
from gavel_standin import JobIdPair, accept, compute_allocation

DROPIN = gavel  # the conftest's client fixture uses this file's client


@pytest.fixture(scope="module")
def policy(client):
    """The ``normalised_throughput`` objective (each job worth at most 1), its name fixed."""
    return GavelPolicy(client=client, objective="normalised_throughput", refuse_spare=False)


@pytest.fixture(scope="module")
def rate_policy(client):
    """The default objective, ``completion_rate``, its name fixed (``refuse_spare=False``: every call carries
    the remaining steps; the default name's changes are tested below)."""
    return GavelPolicy(client=client, refuse_spare=False)


@pytest.fixture(scope="module")
def solve_policy(client):
    """The normalised-throughput objective, the solve's answer alone (``fill_spare=False``)."""
    return GavelPolicy(client=client, objective="normalised_throughput", fill_spare=False, refuse_spare=False)


@pytest.fixture(scope="module")
def rate_solve_policy(client):
    """The completion-rate objective, the solve's answer alone (``fill_spare=False``), its name fixed."""
    return GavelPolicy(client=client, fill_spare=False, refuse_spare=False)


@pytest.mark.parametrize("seed", range(5))
def test_one_worker_type_runs_the_most_jobs_that_fit(policy, seed):
    rng = random.Random(seed)
    spec = {"v100": rng.choice([4, 6, 8])}
    ids = [JobIdPair(i, None) for i in range(rng.randrange(3, 8))]
    scale = {j: rng.choice([1, 2, 4]) for j in ids}
    tput = {j: {"v100": rng.uniform(1, 10)} for j in ids}
    tput[JobIdPair(0, 1)] = {"v100": [1.0, 2.0]}  # a space-sharing pair: given no share
    alloc = compute_allocation(policy, tput, scale, spec)
    accept(alloc, tput, scale, spec)
    assert alloc[JobIdPair(0, 1)] == {"v100": 0.0}
    got = sum(1 for j in ids if alloc[j]["v100"] == 1.0)
    best = max(sum(c) for c in itertools.product([0, 1], repeat=len(ids))
               if sum(s * x for s, x in zip((scale[j] for j in ids), c)) <= spec["v100"])
    assert got == best  # every job is worth 1 (normalised throughput): the most jobs that fit


def test_ties_go_to_jobs_in_gavel_order(policy):
    ids = [JobIdPair(i, None) for i in range(4)]
    alloc = compute_allocation(policy, {j: {"k80": 2.0} for j in ids}, {j: 2 for j in ids}, {"k80": 4})
    assert [alloc[j]["k80"] for j in ids] == [1.0, 1.0, 0.0, 0.0]


@pytest.mark.parametrize("seed", range(4))
def test_several_worker_types_the_exact_optimum(solve_policy, seed):
    rng = random.Random(seed)
    spec = {"k80": rng.choice([2, 4]), "p100": rng.choice([2, 4]), "v100": rng.choice([2, 4])}
    ids = [JobIdPair(i, None) for i in range(rng.randrange(3, 7))]
    scale = {j: rng.choice([1, 2]) for j in ids}
    tput = {j: {"k80": rng.uniform(1, 3), "p100": rng.uniform(2, 6), "v100": rng.uniform(4, 10)} for j in ids}
    alloc = compute_allocation(solve_policy, tput, scale, spec)
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
def test_gavel_rounds_realise_the_allocation_only_with_a_perf_name(solve_policy, name, seed):
    """Gavel's mechanism shuffles worker types per round unless the policy name has "Perf"
    (scheduler.py:879-881).  With the drop-in's name every job given a share runs every round on its type
    or a faster one visited before it; with the old name ("elasticopt") the stand-in reproduces what the
    real Gavel did: micro-tasks of share-0 jobs take a type's workers and share holders wait or run slower."""
    from gavel_standin import GavelRounds, WORKER_TYPE_ORDER

    policy = solve_policy
    spec, ids, scale, tput = _oversubscribed(seed)
    alloc = compute_allocation(policy, tput, scale, spec)
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
        alloc = compute_allocation(policy, {j: {"k80": 1.0} for j in ids}, {j: 8 if j == big else 1 for j in ids},
                                   {"k80": 8}, num_steps_remaining={j: 1000 * (1 + 7 * (j == big)) for j in ids})
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
    compute_allocation(patient, {JobIdPair(1, None): {"k80": 1.0}}, {JobIdPair(1, None): 1}, {"k80": 8})
    assert patient.promoted == set() and patient.waited == {"1": 0}  # a job that left is forgotten


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "3"])
def test_patience_calls_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match="patience_calls: expected an integer >= 1 or None"):
        GavelPolicy(client=object(), patience_calls=bad)


def test_completion_rate_runs_the_jobs_nearest_to_finishing(rate_policy):
    """One type, equal throughputs: jobs finished per second is largest for the fewest steps left (shortest
    remaining time first), whatever Gavel's job order."""
    ids = [JobIdPair(i, None) for i in range(6)]
    steps = dict(zip(ids, [9000, 500, 7000, 800, 100000, 3000]))
    alloc = compute_allocation(rate_policy, {j: {"v100": 2.0} for j in ids}, {j: 1 for j in ids}, {"v100": 3},
                               num_steps_remaining=steps)
    assert sorted(j[0] for j in ids if alloc[j]["v100"] == 1.0) == [1, 3, 5]


@pytest.mark.parametrize("seed", range(4))
def test_completion_rate_the_exact_optimum(rate_solve_policy, seed):
    """The answer maximises sum weight * throughput / max(steps left, round_s of work), checked by brute force
    (values are integers in the model: equal within their rounding)."""
    rng = random.Random(seed)
    spec = {"k80": rng.choice([2, 4]), "p100": rng.choice([2, 4]), "v100": rng.choice([2, 4])}
    ids = [JobIdPair(i, None) for i in range(rng.randrange(3, 7))]
    scale = {j: rng.choice([1, 2]) for j in ids}
    tput = {j: {"k80": rng.uniform(1, 3), "p100": rng.uniform(2, 6), "v100": rng.uniform(4, 10)} for j in ids}
    steps = {j: rng.choice([10, rng.uniform(1e3, 1e6)]) for j in ids}  # some about to finish (floored)
    weights = {j: rng.choice([1.0, 2.0]) for j in ids}
    ages = {j: rng.choice([0.0, rng.uniform(0, 5e5)]) for j in ids}
    alloc = compute_allocation(rate_solve_policy, tput, scale, spec, num_steps_remaining=steps,
                               priority_weights=weights, times_since_start=ages)
    accept(alloc, tput, scale, spec)

    def rate(j, t):
        aged = weights[j] * (1 + ages[j] / rate_solve_policy.aging_s)
        return aged * tput[j][t] / max(steps[j], rate_solve_policy.round_s * max(tput[j].values()))

    top = max(rate(j, t) for j in ids for t in spec)
    got = sum(x * rate(j, t) / top for j in ids for t, x in alloc[j].items())
    best = 0.0
    for combo in itertools.product([None, *spec], repeat=len(ids)):
        if all(sum(scale[j] for j, c in zip(ids, combo) if c == t) <= spec[t] for t in spec):
            best = max(best, sum(rate(j, c) / top for j, c in zip(ids, combo) if c))
    assert got == pytest.approx(best, abs=len(ids) * 2.0 ** -19)


def test_an_old_job_overtakes_a_younger_shorter_one_as_it_ages(client):
    """Aging (``aging_s``, one day by default): one GPU, equal throughputs; the young job has half the old one's
    steps left.  Without aging (or at equal ages) the shorter runs; the old job, two days in the system, is
    worth 1 + 2 = 3 times its rate and runs.  ``aging_s=None`` turns it off; a negative age counts as 0."""
    old, young = JobIdPair(0, None), JobIdPair(1, None)
    args = ({old: {"v100": 1.0}, young: {"v100": 1.0}}, {old: 1, young: 1}, {"v100": 1})
    steps = {old: 4000.0, young: 2000.0}

    def runs(policy, ages):
        alloc = compute_allocation(policy, *args, num_steps_remaining=steps, times_since_start=ages)
        return [j[0] for j in (old, young) if alloc[j]["v100"] == 1.0]

    aged, unaged = GavelPolicy(client=client, fill_spare=False), GavelPolicy(client=client, fill_spare=False,
                                                                             aging_s=None)
    assert runs(aged, {old: 0.0, young: 0.0}) == [1]
    assert runs(aged, {old: 2 * 86400.0, young: 60.0}) == [0]
    assert runs(unaged, {old: 2 * 86400.0, young: 60.0}) == [1]
    assert runs(aged, {old: -2 * 86400.0, young: 0.0}) == [1]


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "86400", True])
def test_aging_s_must_be_positive_finite_seconds(bad):
    with pytest.raises(ValueError, match="aging_s: expected a finite number of seconds > 0 or None"):
        GavelPolicy(client=object(), aging_s=bad)


def test_a_job_about_to_finish_does_not_erase_the_others_values(client):
    """Values are divided by the call's largest and made integers (2**20 units at most per 1.0): a job with a
    few steps left would leave every other job below one unit, their types chosen by tie order.  Floored at
    one round of work, the long job B still gets the V100, where it is 50 times faster (C, first in Gavel's
    order, 2 times)."""
    a, c, b = (JobIdPair(i, None) for i in range(3))
    tput = {a: {"v100": 1e6, "k80": 1e5}, c: {"v100": 2.0, "k80": 1.0}, b: {"v100": 50.0, "k80": 1.0}}
    steps = {a: 1, c: 1e7, b: 1e7}
    args = (tput, {a: 1, c: 1, b: 1}, {"v100": 2, "k80": 1})
    alloc = compute_allocation(GavelPolicy(client=client), *args, num_steps_remaining=steps)
    assert alloc[b]["v100"] == 1.0 and alloc[c]["k80"] == 1.0 and alloc[a]["v100"] == 1.0

    def values(policy):
        doc, _ = policy.build_request(*args, num_steps_remaining=steps)
        return {(j["id"], o["pool"]): o["value"] for j in doc["jobs"] for o in j["options"]}

    floored, unfloored = values(GavelPolicy(client=object())), values(GavelPolicy(client=object(), round_s=0.0))
    assert floored[("2", "v100")] * 2.0 ** 20 > 1000 and floored[("2", "v100")] == pytest.approx(25 * floored[("1", "v100")])
    assert max(v for (j, _), v in unfloored.items() if j != "0") * 2.0 ** 20 < 1e-3  # the defect the floor removes


def test_gavel_passes_the_remaining_steps_by_the_policy_name(rate_policy, policy):
    """Gavel hands a policy its jobs' remaining steps only when the name starts with "FinishTimeFairness"
    (``Scheduler._compute_allocation``); the name keeps "Perf" (the worker-type order).  Called as Gavel
    calls a policy of another name, the completion-rate drop-in says what is wrong."""
    assert rate_policy.name.startswith("FinishTimeFairness") and "Perf" in rate_policy.name
    assert policy.name == "Elasticopt_Perf"
    ids = [JobIdPair(0, None)]
    with pytest.raises(TypeError, match="needs num_steps_remaining.*FinishTimeFairness"):
        rate_policy.get_allocation({ids[0]: {"v100": 1.0}}, {ids[0]: 1}, {"v100": 1})
    with pytest.raises(ValueError, match="objective: expected one of 'completion_rate', 'normalised_throughput'"):
        GavelPolicy(client=object(), objective="jct")


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), "360", True])
def test_round_s_must_be_finite_seconds(bad):
    with pytest.raises(ValueError, match="round_s: expected a finite number of seconds >= 0"):
        GavelPolicy(client=object(), round_s=bad)


def _slower_on_v100(seed):
    """Gavel-like inputs with leftover V100s: some jobs are slower on a V100 than on a P100 (Gavel's
    Recommendation models run at 0.43-0.51x there), fewer jobs than GPUs, numpy scalars."""
    import numpy as np

    rng = random.Random(seed)
    spec = {"v100": rng.choice([2, 4]), "p100": rng.choice([2, 4]), "k80": rng.choice([0, 2])}
    ids = [JobIdPair(i, None) for i in range(rng.randrange(2, 7))]
    scale = {j: np.int64(rng.choice([1, 1, 2])) for j in ids}
    tput = {}
    for j in ids:
        p100 = rng.uniform(2, 6)
        tput[j] = {"k80": np.float64(p100 / rng.uniform(1.5, 3)), "p100": np.float64(p100),
                   "v100": np.float64(p100 * rng.choice([0.45, 0.5, 1.01, 1.5]))}
    steps = {j: rng.uniform(1e3, 1e6) for j in ids}
    return spec, ids, scale, tput, steps


@pytest.mark.parametrize("seed", range(12))
def test_the_answer_is_what_gavel_rounds_run(client, seed):
    """Gavel's round gives a type's free workers to jobs of share 0 (all policies but FIFO's), so a job put
    on a P100 for being slower on a V100 runs on a spare V100.  With ``fill_spare`` the answer already holds
    those moves, chosen by the request's values: every job the solve gave a type still runs, and Gavel's
    round (the stand-in) runs each job exactly where the answer puts it -- no micro-task on a share of 0."""
    from gavel_standin import GavelRounds

    spec, ids, scale, tput, steps = _slower_on_v100(seed)
    spec = {t: n for t, n in spec.items() if n}
    tput = {j: {t: x for t, x in row.items() if t in spec} for j, row in tput.items()}
    policy = GavelPolicy(client=client)
    alloc = compute_allocation(policy, tput, scale, spec, num_steps_remaining=steps)
    accept(alloc, tput, scale, spec)
    solved = {rid for rid, a in policy.last_response["allocation"].items() if a}
    assert solved <= {str(j) for j in ids if any(alloc[j].values())}
    rounds = GavelRounds(policy, spec)  # the name as each round reads it (refuse_spare="auto", the default)
    for r in range(5):
        placed = rounds.round(r, alloc, tput, scale)
        assert {j: t for j, t in placed.items()} == {j: t for j in ids for t, x in alloc[j].items() if x}


def test_a_spare_v100_goes_to_the_job_that_loses_least_there(client):
    """One V100 left free by the solve: R runs at half its P100 speed there, S at 0.95.  Gavel's round
    (``fill_spare=False``) gives the V100 to R, the first job of share 0 in its order; the drop-in gives it
    to S, and R keeps its P100.  FIFO's name alone makes Gavel leave the V100 idle."""
    from gavel_standin import GavelRounds

    r, s = JobIdPair(0, None), JobIdPair(1, None)
    tput, scale, spec = {r: {"v100": 1.0, "p100": 2.0}, s: {"v100": 2.0, "p100": 2.1}}, {r: 1, s: 1}, {"v100": 1, "p100": 2}
    steps = {r: 5000, s: 5000}
    plain = compute_allocation(GavelPolicy(client=client, fill_spare=False), tput, scale, spec, num_steps_remaining=steps)
    assert plain[r] == plain[s] == {"v100": 0.0, "p100": 1.0}
    assert GavelRounds("FinishTimeFairness_Elasticopt_Perf", spec).round(0, plain, tput, scale) == {r: "v100", s: "p100"}
    assert GavelRounds("FIFO_Perf", spec).round(0, plain, tput, scale) == {r: "p100", s: "p100"}
    filled = compute_allocation(GavelPolicy(client=client, refuse_spare=False), tput, scale, spec,
                                num_steps_remaining=steps)
    assert filled[r] == {"v100": 0.0, "p100": 1.0} and filled[s] == {"v100": 1.0, "p100": 0.0}
    assert GavelRounds("FinishTimeFairness_Elasticopt_Perf", spec).round(0, filled, tput, scale) == {s: "v100", r: "p100"}


def test_a_promoted_job_is_moved_by_its_own_values_not_its_boost(client):
    """A promoted job's options carry a boost worth all other jobs together; the spare V100 still goes to the
    job that loses least there by the values without it (S), not to the promoted job B (2x slower there)."""
    b, s = JobIdPair(0, None), JobIdPair(1, None)
    tput, scale, spec = {b: {"v100": 1.0, "p100": 2.0}, s: {"v100": 2.0, "p100": 2.1}}, {b: 1, s: 1}, {"v100": 1, "p100": 2}
    policy = GavelPolicy(client=client, refuse_spare=False)
    policy.promoted = {"0"}  # as after patience_calls answers without a share
    alloc = compute_allocation(policy, tput, scale, spec, num_steps_remaining={b: 5000, s: 5000})
    assert policy.boosted and alloc[b] == {"v100": 0.0, "p100": 1.0} and alloc[s] == {"v100": 1.0, "p100": 0.0}


@pytest.mark.parametrize("bad", [0, 1, "yes", None])
def test_fill_spare_must_be_a_bool(bad):
    with pytest.raises(ValueError, match="fill_spare: expected True or False"):
        GavelPolicy(client=object(), fill_spare=bad)


def test_refuse_spare_is_named_for_gavels_fifo_exemption_and_runs_where_it_answers(client):
    """``refuse_spare``: the name Gavel's round exempts from handing spare workers to jobs of share 0 (its FIFO
    policies'), Gavel's plain call (no remaining steps), and "Perf" kept (the fixed worker-type order).  R,
    slower on the V100, keeps its P100 and the V100 stays idle, as the answer says."""
    from gavel_standin import GavelRounds

    r, s = JobIdPair(0, None), JobIdPair(1, None)
    tput, scale, spec = {r: {"v100": 1.0, "p100": 2.0}, s: {"v100": 2.0, "p100": 2.1}}, {r: 1, s: 1}, {"v100": 1, "p100": 2}
    policy = GavelPolicy(client=client, objective="normalised_throughput", fill_spare=False, refuse_spare=True)
    assert policy.name.startswith("FIFO") and "Perf" in policy.name
    alloc = compute_allocation(policy, tput, scale, spec)  # the stand-in dispatches by name: the plain call
    assert alloc[r] == alloc[s] == {"v100": 0.0, "p100": 1.0}
    assert GavelRounds(policy.name, spec).round(0, alloc, tput, scale) == {r: "p100", s: "p100"}
    for bad in ({"objective": "completion_rate", "fill_spare": False}, {"objective": "normalised_throughput"},
                {"objective": "normalised_throughput", "fill_spare": False, "refuse_spare": 1}):
        with pytest.raises(ValueError, match="refuse_spare"):
            GavelPolicy(client=client, **dict({"refuse_spare": True}, **bad))


def test_refuse_spare_auto_refuses_spare_workers_only_after_an_answer_that_runs_every_job(client):
    """``refuse_spare="auto"``: after an answer that runs every job that can run, the FIFO name (Gavel's round
    leaves the spare V100 idle and R keeps its P100; the next call is Gavel's plain call, valued by normalised
    throughput); after one where a job waits, the completion-rate name again (the spare workers go to the
    waiting jobs first, ``fill_spare``, and the next call carries the remaining steps)."""
    from gavel_standin import GavelRounds

    r, s, w = JobIdPair(0, None), JobIdPair(1, None), JobIdPair(2, None)
    tput = {r: {"v100": 1.0, "p100": 2.0}, s: {"v100": 2.0, "p100": 2.1}}
    scale, spec, steps = {r: 1, s: 1}, {"v100": 1, "p100": 2}, {r: 5000, s: 5000}
    policy = GavelPolicy(client=client, refuse_spare="auto")
    assert policy.name == policy.taking_name == "FinishTimeFairness_Elasticopt_Perf"
    rounds = GavelRounds(policy, spec)  # reads policy.name at every round, as Gavel does
    alloc = compute_allocation(policy, tput, scale, spec, num_steps_remaining=steps)
    assert alloc[r] == alloc[s] == {"v100": 0.0, "p100": 1.0}  # every job runs: nothing given out
    assert policy.name == "FIFO_Elasticopt_Perf"
    assert rounds.round(0, alloc, tput, scale) == {r: "p100", s: "p100"}  # the V100 stays idle
    again = compute_allocation(policy, tput, scale, spec, num_steps_remaining=steps)  # Gavel's plain call now
    assert again == alloc and policy.name == "FIFO_Elasticopt_Perf"
    tput[w], scale[w], steps[w] = {"v100": 1.5, "p100": 1.0}, 2, 100  # two GPUs: it cannot start beside R, S
    heavy = compute_allocation(policy, tput, scale, spec, num_steps_remaining=steps)
    assert policy.name == policy.taking_name  # a job waits: Gavel's spare workers taken (and given out here)
    placed = rounds.round(1, heavy, tput, scale)
    assert placed == {j: t for j in tput for t, x in heavy[j].items() if x}  # what the answer says runs
    assert policy.names_answered == {"FIFO_Elasticopt_Perf": 2, "FinishTimeFairness_Elasticopt_Perf": 1}
    seen = []
    policy.get_allocation = lambda *args: seen.append(len(args)) or {}  # the next call's arguments, by name
    compute_allocation(policy, tput, scale, spec, num_steps_remaining=steps)
    assert seen == [6]  # throughputs, scale factors, weights, times since start, remaining steps, cluster spec


@pytest.mark.parametrize("seed", range(12))
def test_refuse_spare_auto_the_answer_is_what_gavel_rounds_run_in_either_name(client, seed):
    """Whatever name an answer leaves, Gavel's round (the stand-in, reading the name each round) runs each job
    exactly where the answer puts it, over calls in which jobs arrive and leave -- from fewer jobs than GPUs
    to more (so the name changes both ways) -- each with Gavel's arguments for the name the policy has then."""
    from gavel_standin import GavelRounds

    spec, ids, scale, tput, steps = _slower_on_v100(seed)
    spec = {t: n for t, n in spec.items() if n}
    tput = {j: {t: x for t, x in row.items() if t in spec} for j, row in tput.items()}
    rng = random.Random(seed)
    for i in range(len(ids), len(ids) + sum(spec.values())):  # enough more jobs to wait when all are live
        j = JobIdPair(i, None)
        ids.append(j)
        scale[j], steps[j] = rng.choice([1, 2]), rng.uniform(1e3, 1e6)
        tput[j] = {t: rng.uniform(1, 6) for t in spec}
    policy = GavelPolicy(client=client, refuse_spare="auto")
    rounds = GavelRounds(policy, spec, seed=seed)
    names = []
    for call, share in enumerate((0.2, 1.0, 0.3, 1.0, 0.1, 0.6)):
        live = [j for j in ids if rng.random() < share] or ids[:1]
        sub = lambda d: {j: d[j] for j in live}  # noqa: E731
        alloc = compute_allocation(policy, sub(tput), sub(scale), spec, num_steps_remaining=sub(steps))
        accept(alloc, sub(tput), sub(scale), spec)
        runs = {j for j in live if any(alloc[j].values())}
        assert policy.name == ("FIFO_Elasticopt_Perf" if runs == set(live) else policy.taking_name)
        names.append(policy.name)
        placed = rounds.round(call, alloc, sub(tput), sub(scale))
        assert placed == {j: t for j in runs for t, x in alloc[j].items() if x}
    assert policy.taking_name in names and "FIFO_Elasticopt_Perf" in names  # both ways


def test_refuse_spare_takes_true_false_or_auto(client):
    GavelPolicy(client=client, refuse_spare="auto", objective="normalised_throughput")
    assert GavelPolicy(client=client, refuse_spare="auto", objective="normalised_throughput").taking_name == \
        "Elasticopt_Perf"
    for bad in ("yes", "Auto", 0, None):
        with pytest.raises(ValueError, match="refuse_spare: expected True, False or 'auto'"):
            GavelPolicy(client=client, refuse_spare=bad)
