"""The one placer (models/placement.py, models/packing.py): exact where brute force is, bounded, keeps jobs in place."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elasticopt.models import Problem
from elasticopt.models import problem_from_dict
from elasticopt.models.packing import FreeNodes, search_counts, take
from elasticopt.models.placement import pack, place
from elasticopt.models.problem import Pool
from elasticopt.solvers import Reason, Status, solve, verify


def _brute_placeable(free: list[int], g: int, packed: list[int]) -> bool:
    """Independent reference: every way to put each packed job's GPUs on at most ceil(k / g) named nodes."""
    def splits(k: int, m: int, start: int, fr: list[int]):
        if k == 0:
            yield []
            return
        if m == 0:
            return
        for n in range(start, len(fr)):
            for c in range(min(fr[n], k), 0, -1):
                for rest in splits(k - c, m - 1, n + 1, fr):
                    yield [(n, c)] + rest

    def rec(i: int, fr: list[int]) -> bool:
        if i == len(packed):
            return True
        k = packed[i]
        for sp in splits(k, -(-k // g), 0, fr):
            nf = list(fr)
            for n, c in sp:
                nf[n] -= c
            if rec(i + 1, nf):
                return True
        return False

    return rec(0, list(free))


def _check(pool: Pool, jobs, res) -> None:
    """GPU by GPU: every job has exactly its GPUs, free ones, none twice; packed jobs on their fewest nodes."""
    free = {(n, i) for n, ix in enumerate(pool.free_gpus()) for i in ix}
    seen: set = set()
    for (k, packed), d in zip(jobs, res.nodes):
        mine = {(n, i) for n, ix in d.items() for i in ix}
        assert len(mine) == k == sum(len(ix) for ix in d.values())
        assert mine <= free and not mine & seen
        seen |= mine
        if packed:
            assert len(d) <= -(-k // pool.gpus_per_node)


pools = st.builds(
    lambda g, frees: Pool(len(frees), g, tuple(tuple(range(min(f, g))) for f in frees)),
    st.integers(1, 4), st.lists(st.integers(0, 4), min_size=1, max_size=4),
)


@settings(max_examples=300, deadline=None)
@given(pools, st.lists(st.tuples(st.integers(1, 9), st.booleans()), max_size=4))
def test_places_whenever_brute_force_does_and_never_invalidly(pool, jobs):
    g = pool.gpus_per_node
    jobs = [(k, p) for k, p in jobs]
    res = pack(pool, jobs)
    fits = sum(k for k, _ in jobs) <= pool.gpus and _brute_placeable(
        list(pool.free_per_node()), g, [k for k, p in jobs if p])
    assert res.status == ("placed" if fits else "impossible")
    if fits:
        _check(pool, jobs, res)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 8), st.lists(st.integers(0, 8), min_size=1, max_size=12),
       st.lists(st.integers(1, 24), max_size=6))
def test_count_search_agrees_with_brute_force(g, frees, sizes):
    frees = [min(f, g) for f in frees]
    sizes = sorted(sizes, reverse=True)
    if len(frees) > 6 or sum(sizes) > 18:  # keep the node-by-node reference small
        res = search_counts(frees, g, sizes, 10**6)
        assert res[0] in ("placed", "impossible")
        return
    res = search_counts(frees, g, sizes, 10**6)
    assert (res[0] == "placed") == (sum(sizes) <= sum(frees) and _brute_placeable(frees, g, sizes))


@settings(max_examples=200, deadline=None)
@given(pools, st.lists(st.tuples(st.integers(1, 6), st.booleans(), st.integers(-2, 2)), min_size=1, max_size=4),
       st.randoms(use_true_random=False))
def test_running_jobs_stay_where_they_are(pool, spec, rnd):
    """A job whose k did not change keeps its GPUs (a packed one if they are on its fewest nodes);
    an unpacked one that shrinks keeps part, one that grows keeps all of them."""
    g = pool.gpus_per_node
    first = pack(pool, [(k, p) for k, p, _ in spec])
    if first.status != "placed":
        return
    jobs = [(max(1, k + dk) if not p else k, p) for k, p, dk in spec]
    cur = [dict(d) if rnd.random() < 0.8 else None for d in first.nodes]
    res = pack(pool, jobs, cur)
    if res.status != "placed":
        assert sum(k for k, _ in jobs) > pool.gpus or res.status == "impossible"
        return
    _check(pool, jobs, res)
    if not res.kept:
        return
    for j, ((k, p), c, d, moved) in enumerate(zip(jobs, cur, res.nodes, res.moved)):
        if not c or j in res.released:
            assert moved or j in res.released
            continue
        mine = {(n, i) for n, ix in d.items() for i in ix}
        had = {(n, i) for n, ix in c.items() for i in ix}
        if len(had) == k:
            assert mine == had and not moved
        elif not p and len(had) > k:
            assert mine <= had
        elif not p:
            assert had <= mine
    assert len(first.nodes) == len(jobs) and g >= 1


def test_keeping_in_place_moves_a_running_job_when_it_blocks_a_packed_job():
    pool = Pool(2, 4)
    # x holds 2 GPUs on each node; z (packed, 4) needs a whole node: x must move
    res = pack(pool, [(4, False), (4, True)], [{0: (0, 1), 1: (0, 1)}, None])
    assert res.status == "placed" and res.kept and res.released == (0,) and res.moved == (True, True)
    assert len(res.nodes[1]) == 1


def test_keeping_in_place_moves_the_fewest_running_jobs():
    """a (1 GPU) on node 0, b (1 GPU) on node 1, a new packed job of 4: one of them moves, not both (packing
    from scratch, as before, moved every job it placed elsewhere); then two of three must move."""
    pool = Pool(2, 4)
    res = pack(pool, [(1, True), (1, True), (4, True)], [{0: (0,)}, {1: (0,)}, None])
    assert res.status == "placed" and res.kept and res.released == (0,)
    assert res.moved == (True, False, True) and res.nodes[1] == {1: (0,)} and res.nodes[0] == {1: (1,)}
    pool = Pool(3, 4)
    res = pack(pool, [(1, True), (1, True), (1, True), (4, True), (4, True)], [{0: (0,)}, {1: (0,)}, {2: (0,)},
                                                                               None, None])
    assert res.status == "placed" and res.kept and res.released == (0, 1)
    assert res.moved == (True, True, False, True, True)


def test_take_is_best_fit_then_fewest_nodes():
    assert take([4, 2, 3], 2) == {1: 2}  # best fit: the fullest node that fits
    assert take([4, 2, 3], 6) == {0: 4, 1: 2}  # emptiest node whole, remainder on the fullest node that fits it
    assert take([1, 1], 3) is None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 8), min_size=0, max_size=24),
       st.lists(st.tuples(st.integers(0, 30), st.integers(0, 3), st.booleans()), max_size=30))
def test_free_nodes_take_as_take_does(size, steps):
    """FreeNodes (the placer's indexed takes) answers what the reference scan take answers, over a sequence of
    takes, each kept (whole or in part, as give and the placer's grows do) or dropped."""
    ref, fast = list(size), FreeNodes(list(size))
    for k, part, keep in steps:
        d = take(ref, k)
        assert fast.take(k) == d
        if d is not None and keep:
            for n, c in d.items():
                c = max(c - part, 0) if part < 3 else c
                ref[n] -= c
                fast.sub(n, c)
        assert fast.size == ref


def test_free_nodes_by_hand():
    free = FreeNodes([4, 2, 3, 2])
    assert free.take(2) == {1: 2}  # best fit, the lowest node on ties
    free.sub(1, 2)
    assert free.take(2) == {3: 2} and free.take(5) == {0: 4, 3: 1}  # node 1 is full now
    free.sub(0, 4)
    assert free.take(5) == {2: 3, 3: 2} and free.take(6) is None and free.size == [0, 0, 3, 2]


def _pollux_like(best: tuple[int, ...], nodes: int = 16, per_node: int = 4) -> Problem:
    """Pollux's shape (elasticopt/integrations/pollux.py): every option 1..64 GPUs packed, three of four jobs
    running; values k + 10 on job i's size ``best[i]`` (0: none), so the totals' optimum is ``best``."""
    total = nodes * per_node
    jobs = []
    for i in range(4):
        want = best[i] if i < len(best) else 0
        rows = [["gpu", k, 32 * k, 100.0 * k, "packed"] for k in range(1, total + 1)]
        vals = [["gpu", k, 32 * k, k + (10.0 if k == want else 0.0), "packed"] for k in range(1, total + 1)]
        job = {"id": f"j{i}", "throughput": rows, "values": vals,
               "batch": {"min": 32, "max": 32 * total, "max_local": 32}, "gpus": {"min": 1, "max": total}}
        if i < 3:
            job["running"] = {"gpus": (3, 6, 5)[i], "batch": 32 * (3, 6, 5)[i], "type": "gpu",
                              "nodes": [[0], [1, 2], [3, 4]][i]}
        jobs.append(job)
    return problem_from_dict({"format": "elasticopt-instance/2", "objective": "value", "allow_preemption": True,
                              "cluster": {"pools": {"gpu": {"nodes": nodes, "gpus_per_node": per_node}}},
                              "jobs": jobs})


@pytest.mark.parametrize("best", [(54, 5, 3, 2), (41, 18, 3, 2), (59, 3, 2), (31, 30, 3), (3, 3, 58)])
def test_pollux_like_request_is_exact_in_milliseconds(best):
    """4 jobs, options 1..64 packed, 16 nodes x 4 GPUs, three running, the totals' optimum one the greedy
    spreads (the first two place, the others cannot): the dp answers OPTIMAL within milliseconds (the
    set-partition search it replaced ran for minutes on the last three), verified, equal to the milp
    (node variables) where that proves its optimum, within its incumbent and bound elsewhere."""
    p = _pollux_like(best)
    solve(p, "dp")  # compile once
    t = time.perf_counter()
    s = solve(p, "dp", time_limit_s=1.0)
    dt = time.perf_counter() - t
    assert dt < 2.0
    assert s.status is Status.OPTIMAL and s.reason is Reason.SOLVED and verify(p, s).ok, s.message
    placed = sorted((a[0] for a in s.allocation.values() if a), reverse=True)
    if best in ((54, 5, 3, 2), (41, 18, 3, 2)):
        assert placed == sorted(best, reverse=True)
    else:
        assert "proven by the DP over node counts" in s.message
    m = solve(p, "milp", time_limit_s=20)
    assert verify(p, m).ok
    if m.status is Status.OPTIMAL:
        assert s.objective == m.objective
    else:
        assert m.objective <= s.objective <= m.bound


@pytest.mark.parametrize("ks", [(59, 3, 2), (31, 30, 3), (31, 31, 2), (58, 3, 3)])
def test_unplaceable_sizes_are_proven_at_once(ks):
    """Sizes the greedy spreads and no placement fits: the old set-partition search ran past 120 s on each."""
    t = time.perf_counter()
    res = place(Pool(16, 4), list(ks), [])
    assert res.status == "impossible" and time.perf_counter() - t < 0.5
    assert not _brute_placeable([4] * 4, 4, [3, 3, 3, 3, 3])  # the reference itself can say no


def test_search_stops_on_steps_and_on_time():
    frees = [3] * 40
    sizes = [5] * 24  # needs 2 nodes each; 40 nodes of 3 hold 120 GPUs, but pairs leave 1 per pair: impossible
    got = search_counts(frees, 4, sizes, max_steps=50)
    assert got[0] in ("unknown", "impossible")
    if got[0] == "unknown":
        assert got[3] == "steps"
    got = search_counts(frees, 4, sizes, max_steps=10**9, deadline=time.perf_counter() - 1)
    assert got[0] in ("unknown", "impossible")
    if got[0] == "unknown":
        assert got[3] == "time"


def test_pollux_style_requests_through_the_service_finish_fast_with_a_one_second_limit():
    """`elasticopt serve --stdio --time-limit-s 1`: requests shaped as integrations/pollux.py sends them (the last
    three are optima over totals that cannot be placed) are answered exactly, each in well under a second once
    warm (the service before the count search gave no answer to the first of them within 60 s)."""
    import json
    import subprocess
    import sys

    def request(best, rid):
        jobs = []
        for i in range(4):
            want = best[i] if i < len(best) else 0
            opts = [{"gpus": k, "nodes": -(-k // 4), "value": (k + (10.0 if k == want else 0.0)) / 100}
                    for k in range(1, 65)]
            job = {"id": f"j{i}", "options": opts}
            if i < 3:
                job["running"] = {"gpus": (3, 6, 5)[i], "nodes": [[[0, 3]], [[1, 4], [2, 2]], [[3, 4], [4, 1]]][i]}
            jobs.append(job)
        return {"format": "elasticopt-request/1", "id": rid, "objective": "values", "solver": "dp", "jobs": jobs,
                "cluster": {"pools": {"gpu": {"nodes": 16, "gpus_per_node": 4}}}}

    cases = [(54, 6, 3, 1), (59, 3, 2), (31, 30, 3), (3, 3, 58)]
    lines = "".join(json.dumps(request(b, i)) + "\n" for i, b in enumerate([cases[0]] + cases))
    run = subprocess.run([sys.executable, "-m", "elasticopt", "serve", "--stdio", "--time-limit-s", "1"],
                         input=lines, capture_output=True, text=True, timeout=120)
    out = [json.loads(x) for x in run.stdout.splitlines()]
    assert len(out) == len(cases) + 1, run.stderr
    for best, r in zip(cases, out[1:]):  # the first answer also paid the one-time compilation
        assert r["ok"] and r["status"] == "optimal" and r["reason"] == "solved" and r["solver"] == "dp", r
        assert r["timings"]["total_s"] < 0.5
        assert sum(a["gpus"] for a in r["allocation"].values() if a) <= 64
