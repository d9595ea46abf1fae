"""The dp's walk back through the argmax rows (solvers/dp/kernels.py ``walk_rows``) against the jitted reverse
scan it replaced, on packed and unpacked rows, and the whole backtrack against the plain DP's optimum."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elasticopt.solvers.dp.kernels import walk_rows
from elasticopt.solvers.dp.packed import row_option
from elasticopt.solvers.dp.value_type import ValueType


def jax_walk(rows: np.ndarray, steps: np.ndarray, p: int, vt: ValueType) -> tuple[int, np.ndarray]:
    """The reference: the jitted reverse ``lax.scan`` the dp walked back with before (one state per row)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    option = row_option(vt)

    def backward(q, x):
        a_row, s_row = x
        o = option(a_row[q])
        d = jnp.where(o >= 0, s_row[jnp.maximum(o, 0)], 0)
        return q - d, o

    with jax.enable_x64(True):
        q, ch = lax.scan(backward, jnp.asarray(p, dtype=jnp.int64), (jnp.asarray(rows), jnp.asarray(steps)),
                         reverse=True)
        return int(q), np.asarray(ch, dtype=np.int64)


@st.composite
def walks(draw):
    """Rows on which the walk from the top state stays feasible (each row's option fits the state it reads)."""
    packed = draw(st.booleans())
    shift_bits = draw(st.sampled_from([3, 4, 7])) if packed else 0
    K = draw(st.integers(1, (1 << shift_bits) - 2 if packed else 8))
    T = draw(st.integers(1, 12))
    L = draw(st.integers(1, 40))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    steps = rng.integers(0, L, size=(T, K), dtype=np.int64)
    dtype = np.int8 if shift_bits <= 7 else np.int16
    W = 1 << shift_bits

    def code(o: int) -> int:  # the row entry for option o (-1 idle): a random value whose low bits code it
        if not packed:
            return o
        c = W - 1 if o < 0 else W - 2 - o
        high = int(rng.integers(-(1 << (7 - shift_bits)), 1 << (7 - shift_bits)))
        return int(np.array(high * W + c).astype(dtype))

    rows = np.array([[code(int(rng.integers(-1, K))) for _ in range(L)] for _ in range(T)], dtype=dtype)
    top = p = int(rng.integers(0, L))
    for t in range(T - 1, -1, -1):  # the walk's own states: each gets an option that fits
        fits = [o for o in range(K) if steps[t, o] <= p]
        o = int(rng.choice([-1] + fits))
        rows[t, p] = code(o)
        p -= int(steps[t, o]) if o >= 0 else 0
    return rows, steps, top, ValueType("int64", shift_bits, False)


@settings(max_examples=200, deadline=None)
@given(walks())
def test_walk_rows_is_the_jax_scan(walk):
    rows, steps, top, vt = walk
    want_p, want = jax_walk(rows, steps, top, vt)
    choice = np.empty(rows.shape[0], dtype=np.int64)
    got_p = walk_rows(rows, steps, top, 1 << vt.shift_bits if vt.shift_bits else 0, choice)
    assert got_p == want_p
    np.testing.assert_array_equal(choice, want)


def test_walk_rows_stays_inside_the_rows_on_a_bad_walk():
    """An infeasible walk (options that do not fit, codes past the options) reads no memory outside the rows."""
    rows = np.full((4, 3), 5, dtype=np.int8)  # unpacked: option 5, past K = 2
    steps = np.full((4, 2), 7, dtype=np.int64)
    choice = np.empty(4, dtype=np.int64)
    assert walk_rows(rows, steps, 2, 0, choice) == 2  # out-of-range options move nothing
    rows[:] = 1  # option 1 moves 7 states from state 2: the state goes negative and is clamped when read
    assert walk_rows(rows, steps, 2, 0, choice) == 2 - 4 * 7
    assert list(choice) == [1, 1, 1, 1]


@pytest.mark.parametrize("n,G,K", [(5, 12, 3), (40, 64, 5), (300, 256, 8)])
def test_dp_choice_is_worth_its_optimum(n, G, K):
    """End to end: the jax dp's walked-back choice is feasible and worth the plain numpy DP's optimum."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from bench_dp import random_problem

    import elasticopt

    prob = random_problem(n, G, K, 3)
    dp = elasticopt.solve(prob, solver="dp", fixing=False, window=False)
    ref = elasticopt.solve(prob, solver="numpy-dp")
    assert dp.status.name == ref.status.name == "OPTIMAL"
    assert dp.objective == ref.objective
