"""The dp's int32 kernels against its int64 kernels: the same optimum and choices (solvers/dp/value_type.py)."""

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elasticopt.models import compile_problem
from elasticopt.solvers.common import INFEASIBLE_BELOW, NEG
from elasticopt.solvers.dp.jax_backend import JaxDP, _clip
from elasticopt.solvers.dp.value_type import INT32_MAX, value_dtype
from elasticopt.testing.strategies import tiny_general_problems


def _table(gpus, util, valid, idle, capacity, gpu_type=None, capacities=None):
    """The fields of an OptionTable the kernels' array builders read."""
    gpus, util, valid = (np.asarray(a) for a in (gpus, util, valid))
    gpu_type = np.zeros_like(gpus) if gpu_type is None else np.asarray(gpu_type)
    capacities = np.array([capacity]) if capacities is None else np.asarray(capacities)
    return SimpleNamespace(gpus=gpus.astype(np.int64), utility=np.where(valid, util, NEG).astype(np.int64),
                           valid=valid.astype(bool), idle_allowed=np.asarray(idle, dtype=bool), capacity=int(capacity),
                           gpu_type=gpu_type.astype(np.int64), capacities=capacities.astype(np.int64))


def _solve(table, value_type=None, multi=False):
    """(value type, optimum or None when infeasible, choices) of the kernels on ``table``."""
    be = JaxDP()
    model = be._arrays_multi(table, value_type) if multi else be._arrays(table, table.capacity, value_type)
    model.update(skip=False)
    best, choice = be._run(model)
    n = table.gpus.shape[0]
    return model["value_dtype"], (None if best < INFEASIBLE_BELOW else best), choice[:n]


def _same(table, multi=False):
    """The chosen value type's result equals the int64 one's (and, where int32 was chosen, int32-reset's)."""
    vdt, best, choice = _solve(table, multi=multi)
    _, best64, choice64 = _solve(table, "int64", multi)
    assert best == best64
    if best is not None:
        assert (choice == choice64).all()
    if vdt == "int32":
        _, best_r, choice_r = _solve(table, "int32-reset", multi)
        assert best_r == best64 and (best is None or (choice_r == choice64).all())
    return vdt, best


@st.composite
def raw_tables(draw):
    """Small tables with utilities of any sign and size up to ~2**31 / jobs (int32 or not), some jobs must run."""
    n = draw(st.integers(1, 12))
    K = draw(st.integers(1, 4))
    G = draw(st.integers(0, 20))
    top = draw(st.sampled_from([20, 1 << 20, 1 << 26, 1 << 28, 1 << 30]))
    gpus = draw(st.lists(st.integers(1, 8), min_size=n * K, max_size=n * K))
    util = draw(st.lists(st.integers(-top // 4, top), min_size=n * K, max_size=n * K))
    valid = draw(st.lists(st.booleans(), min_size=n * K, max_size=n * K))
    idle = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    shape = (n, K)
    return _table(np.reshape(gpus, shape), np.reshape(util, shape), np.reshape(valid, shape), idle, G)


@settings(max_examples=150, deadline=None)
@given(raw_tables())
def test_int32_and_int64_kernels_agree(table):
    vdt, best = _same(table)
    if vdt != "int64" and best is not None:
        assert best <= INT32_MAX


@settings(max_examples=60, deadline=None)
@given(tiny_general_problems())
def test_int32_and_int64_kernels_agree_on_problems(problem):
    table = compile_problem(problem)
    if table.n_types > 1:
        _same(_clip(table), multi=True)
    else:
        _same(table)


def _many(n, u, k=1, idle=True, G=None):
    """n jobs with one option each: k GPUs, utility u."""
    return _table(np.full((n, 1), k), np.full((n, 1), u), np.ones((n, 1), bool), [idle] * n, n * k if G is None else G)


def test_value_dtype_at_the_int32_boundary():
    # 7 jobs of u: the largest state 7u plus the largest utility u must be <= 2**31 - 1
    u = (INT32_MAX + 1) // 8 - 1  # 8u = 2**31 - 8: fits
    fits, over = _many(7, u), _many(7, u + 1)  # 8(u + 1) = 2**31: does not
    assert value_dtype(fits.utility, fits.gpus, fits.valid, fits.idle_allowed, 7) == "int32"
    assert value_dtype(over.utility, over.gpus, over.valid, over.idle_allowed, 7) == "int64"
    assert _same(fits) == ("int32", 7 * u)
    assert _same(over) == ("int64", 7 * (u + 1))
    # the same jobs must run: infeasible values can grow, the reset is needed (the sum 7u >= 2**29)
    must = _many(7, u, idle=False)
    assert _same(must) == ("int32-reset", 7 * u)
    assert _same(_many(7, u, idle=False, G=6)) == ("int32-reset", None)  # 7 jobs that must run, 6 GPUs
    # 3 jobs of 8 GPUs that must run on 23: without the reset the infeasible chain NEG32 + 3u = -2**28 - 3
    # would read as a feasible optimum
    chain = _many(3, (1 << 28) - 1, k=8, idle=False, G=23)
    assert _same(chain) == ("int32-reset", None)
    assert _solve(chain, "int32")[1] == -(1 << 28) - 3  # what the kernel without the reset would return
    assert _same(_many(3, (1 << 28) - 1, k=8, idle=False, G=24)) == ("int32-reset", 3 * ((1 << 28) - 1))
    # a sum below 2**29: no reset even with jobs that must run
    small = _many(3, (1 << 29) // 3 - 1, idle=False)
    assert _same(small) == ("int32", 3 * ((1 << 29) // 3 - 1))


def test_value_dtype_bounds_states_by_utility_per_gpu():
    # 100 jobs of 2**27 on 16 GPUs: the sum 100 * 2**27 is past int32, but 63 GPUs hold at most 63 * 2**23
    table = _many(100, 1 << 27, k=16, G=63)
    assert value_dtype(table.utility, table.gpus, table.valid, table.idle_allowed, 63) == "int32"
    assert value_dtype(table.utility, table.gpus, table.valid, table.idle_allowed, 2 ** 8 * 15) == "int64"
    assert _same(table) == ("int32", 3 * (1 << 27))


def test_value_dtype_lowest_feasible_value():
    # jobs that must take a negative utility: the lowest feasible value -2**29 fits, one less does not
    at = _many(2, -(1 << 28), idle=False)
    below = _table(np.ones((2, 1)), [[-(1 << 28)], [-(1 << 28) - 1]], np.ones((2, 1), bool), [False, False], 2)
    assert value_dtype(at.utility, at.gpus, at.valid, at.idle_allowed, 2) == "int32"
    assert value_dtype(below.utility, below.gpus, below.valid, below.idle_allowed, 2) == "int64"
    assert _same(at) == ("int32", -(1 << 29))
    assert _same(below) == ("int64", -(1 << 29) - 1)
    # a single utility of 2**29 is too large for the infeasible values' margin
    big = _many(1, 1 << 29)
    assert value_dtype(big.utility, big.gpus, big.valid, big.idle_allowed, 1) == "int64"


def test_multi_type_kernel_int32_agrees():
    rng = np.random.default_rng(3)
    n, K = 40, 4
    gpus = rng.integers(1, 5, size=(n, K))
    ty = rng.integers(0, 2, size=(n, K))
    util = rng.integers(-(1 << 20), 1 << 24, size=(n, K))
    valid = rng.random((n, K)) < 0.8
    for idle in (np.ones(n, bool), rng.random(n) < 0.7):
        table = _table(gpus, util, valid, idle, 14, ty, [6, 8])
        vdt, _ = _same(table, multi=True)
        assert vdt in ("int32", "int32-reset")
        assert _same(_table(gpus, util << 6, valid, idle, 14, ty, [6, 8]), multi=True)[0] == "int64"


@pytest.mark.parametrize("bad", ["float32", "int16"])
def test_unknown_value_type_is_refused(bad):
    from elasticopt.solvers.dp.jax_backend import _value_type

    with pytest.raises(ValueError, match="value_dtype"):
        _value_type(bad)
