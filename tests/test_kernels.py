"""The compiled kernels (models/kernels.py) against plain-Python statements of the same rules."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elasticopt import solve
from elasticopt.models import compile_problem
from elasticopt.solvers.dp.reduced_costs import quick_proof_multi
from elasticopt.models.kernels import NEG, check_choice, keep_index
from elasticopt.models.placement import node_name, place
from elasticopt.models.table_placement import place_choice
from elasticopt.models.problem import Pool
from elasticopt.testing.brute import brute_force
from elasticopt.testing.strategies import tiny_general_problems


@st.composite
def sorted_options(draw):
    """Flat options sorted by (job, type, k, packed, b), with utilities, current flags and idle rights."""
    n = draw(st.integers(1, 4))
    opts = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, 1), st.integers(1, 6), st.booleans(),
                                   st.integers(1, 4), st.integers(-5, 20)), max_size=30, unique_by=lambda o: o[:5]))
    opts.sort(key=lambda o: (o[0], o[1], o[2], o[3], o[4]))
    cur = draw(st.lists(st.integers(-1, max(len(opts) - 1, 0)), min_size=n, max_size=n))
    idle = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    is_cur = np.zeros(len(opts), dtype=bool)
    for j, c in enumerate(cur):
        if 0 <= c < len(opts) and opts[c][0] == j:
            is_cur[c] = True
    cols = [np.array([o[i] for o in opts], dtype=np.int64) for i in range(6)]
    rows, t, g, p, b, u = cols
    return rows, t, g, p.astype(bool), b, u, is_cur, idle, np.array(draw(st.sampled_from([[], [4, 2], [8, 3]])),
                                                                      dtype=np.int64)


def _reference_keep(rows, t, g, p, u, is_cur, idle, sizes, best_batch, dominance):
    """The reductions as stated in docs/design.md §2, option by option."""
    m = rows.size
    alive = list(range(m))
    if best_batch:
        alive = []
        for i in range(m):
            grp = [x for x in range(m) if (rows[x], t[x], g[x], p[x]) == (rows[i], t[i], g[i], p[i])]
            best = max(grp, key=lambda x: (2 * u[x] + is_cur[x], -x))
            if best == i:
                alive.append(i)
    if not dominance:
        return alive
    kept = []
    for i in alive:
        thr = 0 if idle[rows[i]] else NEG
        for x in alive:
            if x == i or (rows[x], t[x]) != (rows[i], t[i]):
                continue
            if not p[x] and (g[x] < g[i] or (g[x] == g[i] and p[i])):
                thr = max(thr, u[x])  # unpacked, fewer GPUs (or the same k, i packed)
            if p[x] and p[i] and g[x] < g[i] and sizes.size and g[i] <= sizes[t[i]]:
                thr = max(thr, u[x])  # packed on one node, fewer GPUs
        if u[i] > thr:
            kept.append(i)
    return kept


@settings(max_examples=300, deadline=None)
@given(sorted_options(), st.booleans(), st.booleans())
def test_keep_index_is_the_stated_rule(opts, best_batch, dominance):
    rows, t, g, p, b, u, is_cur, idle, sizes = opts
    got = keep_index(rows, t, g, p, u, is_cur, idle, sizes, best_batch, dominance)
    assert got.tolist() == _reference_keep(rows, t, g, p, u, is_cur, idle, sizes, best_batch, dominance)


@settings(max_examples=80, deadline=None)
@given(tiny_general_problems())
def test_quick_proof_multi_is_optimal_when_it_says_so(problem):
    table = compile_problem(problem)
    if table.n_types < 2 or not table.width:
        return
    proof = quick_proof_multi(table)
    if proof is None:
        return
    inc = proof.choice
    code, _, used = check_choice(inc, table.valid, table.gpus, table.gpu_type, table.idle_allowed,
                                 np.asarray(table.capacities))
    assert code == 0 and proof.value == table.objective_of(inc)[0] >= proof.bound
    assert (proof.left == np.asarray(table.capacities) - used).all()
    assert proof.options_removed == table.n_options - int((inc >= 0).sum())
    # the bound relaxes placement too: the totals' optimum is at most the bound, the placed one at most that
    ref = brute_force(problem)
    assert ref is None or ref <= proof.bound


def _reference_place_choice(table, choice):
    """place_choice as it was written before the kernel: place() per type."""
    rows = np.flatnonzero(choice >= 0)
    cols = choice[rows]
    out, status = {}, "placed"
    for ti, name in enumerate(table.types):
        sel = table.gpu_type[rows, cols] == ti
        r, k, pk = rows[sel], table.gpus[rows, cols][sel], table.packed[rows, cols][sel]
        if not r.size:
            continue
        res = place(table.pools[ti], k[pk].tolist(), k[~pk].tolist())
        if res.status != "placed":
            status = res.status if status == "placed" or res.status == "impossible" else status
            continue
        for row, d in zip(r[pk].tolist() + r[~pk].tolist(), res.nodes):
            out[row] = {node_name(name, n): ix for n, ix in d.items()}
    return status, (out if status == "placed" else {})


@settings(max_examples=150, deadline=None)
@given(tiny_general_problems(), st.randoms(use_true_random=False))
def test_place_choice_equals_place_per_type(problem, rnd):
    table = compile_problem(problem)
    for _ in range(5):
        choice = np.array([rnd.choice([-1] + np.flatnonzero(table.valid[j]).tolist()) if table.width else -1
                           for j in range(table.n_jobs)], dtype=np.int64)
        got = place_choice(table, choice)
        want = _reference_place_choice(table, choice)
        assert got == want and list(got[1]) == list(want[1])  # the same placement, in the same order
    sol = solve(problem, "dp")
    running = [jid for jid, a in sol.allocation.items() if a is not None]
    assert sorted(sol.placement) == sorted(running)  # every job that runs is placed, by the kernel


def test_place_choice_fragmented_pool_matches_place():
    from elasticopt.models.kernels import place_types

    pool = Pool(3, 4, ((0, 1), (0, 1, 2, 3), (1, 3)))
    free = np.array([2, 4, 2], dtype=np.int64)
    ks = np.array([3, 2, 1, 2], dtype=np.int64)
    packed = np.array([True, False, True, False])
    done, job, node, off, cnt = place_types(ks, packed, np.zeros(4, dtype=np.int64), free,
                                            np.array([0, 3], dtype=np.int64), np.array([4], dtype=np.int64))
    res = place(pool, [3, 1], [2, 2])
    assert done[0] and res.status == "placed"
    got: dict[int, dict[int, tuple[int, ...]]] = {}
    for j, n, a, c in zip(job.tolist(), node.tolist(), off.tolist(), cnt.tolist()):
        got.setdefault(j, {})[n] = pool.free_gpus()[n][a:a + c]
    assert [got[0], got[2], got[1], got[3]] == list(res.nodes)  # packed (3, 1) first, then unpacked (2, 2)


@settings(max_examples=200, deadline=None)
@given(tiny_general_problems(), st.randoms(use_true_random=False))
def test_check_choice_finds_what_is_wrong(problem, rnd):
    table = compile_problem(problem)
    caps = np.asarray(table.capacities)
    for _ in range(5):
        choice = np.array([rnd.randrange(-1, table.width + 1) for _ in range(table.n_jobs)], dtype=np.int64)
        code, where, used = check_choice(choice, table.valid, table.gpus, table.gpu_type, table.idle_allowed, caps)
        bad = [j for j in range(table.n_jobs) if (choice[j] < 0 and not table.idle_allowed[j])
               or (choice[j] >= 0 and (choice[j] >= table.width or not table.valid[j, choice[j]]))]
        if bad:
            assert code in (1, 2) and where == bad[0]
            continue
        want = np.zeros(table.n_types, dtype=np.int64)
        for j, c in enumerate(choice.tolist()):
            if c >= 0:
                want[table.gpu_type[j, c]] += table.gpus[j, c]
        assert used.tolist() == want.tolist()
        over = np.flatnonzero(want > caps)
        assert (code, where) == ((3, int(over[0])) if over.size else (0, -1))


@settings(max_examples=150, deadline=None)
@given(tiny_general_problems(), st.lists(st.floats(0, 2e6, allow_nan=False), min_size=4, max_size=4))
def test_lagrangian_choice_is_the_numpy_choice(problem, lams):
    from elasticopt.solvers.dp.lagrangian_bound import LagArrays

    table = compile_problem(problem)
    if table.n_types < 2:
        return
    lag = LagArrays(table)
    lam = np.array(lams[:table.n_types])
    v, ch, used = lag.value_by_type(lam)
    v_ref, ch_ref, _ = lag.value(lam)  # numpy: argmax over the score matrix, pairwise sum
    assert ch.tolist() == ch_ref.tolist()
    assert used.tolist() == table.gpus_by_type(ch_ref).tolist()
    assert v == pytest.approx(v_ref, rel=1e-12, abs=1e-6) or (np.isinf(v) and v == v_ref)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 9), min_size=1, max_size=70), st.lists(st.integers(1, 40), min_size=1, max_size=25))
def test_bucketed_take_is_the_plain_take(sizes, ks):
    """place_types' bucketed take (a bitset per free size) gives the plain take's nodes and counts, job by job."""
    from elasticopt.models.kernels import _bucket_add, _take, _take_buckets

    plain = np.array(sizes, dtype=np.int64)
    fast = plain.copy()
    nn, top = plain.size, int(plain.max())
    bits = np.zeros((top + 1, (nn + 63) >> 6), dtype=np.uint64)
    lo = np.full(top + 1, (nn + 63) >> 6, dtype=np.int64)
    for n in range(nn):
        if fast[n] > 0:
            _bucket_add(bits, lo, fast[n], n)
    rn, rc = np.empty(nn + 1, np.int64), np.empty(nn + 1, np.int64)
    fn, fc = np.empty(nn + 1, np.int64), np.empty(nn + 1, np.int64)
    for k in ks:
        m = _take(plain, k, rn, rc)
        f = _take_buckets(bits, lo, fast, top, k, fn, fc)
        assert m == f
        if m < 0:
            assert (fast == plain).all()  # a failed take leaves the sizes as they were
            continue
        assert fn[:f].tolist() == rn[:m].tolist() and fc[:f].tolist() == rc[:m].tolist()
        for n, c in zip(rn[:m].tolist(), rc[:m].tolist()):
            plain[n] -= c
        assert (fast == plain).all()
