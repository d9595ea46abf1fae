"""The dp's packed kernels (int32 and int64) against its unpacked int64 kernel: the same optimum and choices.

solvers/dp/value_type.py decides, per table, the narrowest packing whose range provably holds the DP.
"""

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from elasticopt.models import compile_problem
from elasticopt.solvers.common import INFEASIBLE_BELOW, NEG
from elasticopt.solvers.dp.jax_backend import JaxDP, _clip
from elasticopt.solvers.dp.value_type import ARGMAX64, ValueType, value_type
from elasticopt.testing.strategies import tiny_general_problems


def _table(gpus, util, valid, idle, capacity, gpu_type=None, capacities=None):
    """The fields of an OptionTable the kernels' array builders read."""
    gpus, util, valid = (np.asarray(a) for a in (gpus, util, valid))
    gpu_type = np.zeros_like(gpus) if gpu_type is None else np.asarray(gpu_type)
    capacities = np.array([capacity]) if capacities is None else np.asarray(capacities)
    return SimpleNamespace(gpus=gpus.astype(np.int64), utility=np.where(valid, util, NEG).astype(np.int64),
                           valid=valid.astype(bool), idle_allowed=np.asarray(idle, dtype=bool), capacity=int(capacity),
                           gpu_type=gpu_type.astype(np.int64), capacities=capacities.astype(np.int64))


def _solve(table, vt=None, multi=False):
    """(value type, optimum or None when infeasible, choices) of the kernels on ``table``."""
    be = JaxDP()
    model = be._arrays_multi(table, vt) if multi else be._arrays(table, table.capacity, vt)
    model.update(skip=False)
    best, choice = be._run(model)
    return model["value_type"], (None if best < INFEASIBLE_BELOW else best), choice[: table.gpus.shape[0]]


def _same(table, multi=False):
    """The chosen kernel's result equals the unpacked int64 kernel's, and so do the wider packings'."""
    vt, best, choice = _solve(table, multi=multi)
    _, best64, choice64 = _solve(table, ARGMAX64, multi)
    assert best == best64
    if best is not None:
        assert (choice == choice64).all()
    others = [replace(vt, reset=True)] if vt.shift_bits else []
    if vt.dtype == "int32":
        others.append(replace(vt, dtype="int64"))
    for other in others:  # a wider type or the reset never changes the result
        _, b, c = _solve(table, other, multi)
        assert b == best64 and (b is None or (c == choice64).all())
    return (vt.dtype, vt.reset), best


@st.composite
def raw_tables(draw):
    """Small tables with utilities of any sign and size (int32 or not), some jobs that must run."""
    n = draw(st.integers(1, 12))
    K = draw(st.integers(1, 4))
    G = draw(st.integers(0, 20))
    top = draw(st.sampled_from([20, 1 << 20, 1 << 24, (1 << 26) - 1, 1 << 28, 1 << 40]))
    gpus = draw(st.lists(st.integers(1, 8), min_size=n * K, max_size=n * K))
    util = draw(st.lists(st.integers(-top // 4, top), min_size=n * K, max_size=n * K))
    valid = draw(st.lists(st.booleans(), min_size=n * K, max_size=n * K))
    idle = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    shape = (n, K)
    return _table(np.reshape(gpus, shape), np.reshape(util, shape), np.reshape(valid, shape), idle, G)


@settings(max_examples=150, deadline=None)
@given(raw_tables())
def test_packed_and_unpacked_kernels_agree(table):
    _same(table)


@settings(max_examples=60, deadline=None)
@given(tiny_general_problems())
def test_packed_and_unpacked_kernels_agree_on_problems(problem):
    table = compile_problem(problem)
    if table.n_types > 1:
        _same(_clip(table), multi=True)
    else:
        _same(table)


def _many(n, u, k=1, idle=True, G=None):
    """n jobs with one option each (width 1: W = 2, int32 M = 2**30): k GPUs, utility u."""
    return _table(np.full((n, 1), k), np.full((n, 1), u), np.ones((n, 1), bool), [idle] * n, n * k if G is None else G)


def _vt(table, most):
    return value_type(table.utility, table.gpus, table.valid, table.idle_allowed, most, 1)


def test_value_type_at_the_int32_boundary():
    # width 1: W = 2, M = 2**30. 7 jobs of u: the largest state 7u plus the largest utility u must be <= M - 1
    u = (1 << 27) - 1  # 8u = 2**30 - 8: fits
    fits, over = _many(7, u), _many(7, u + 1)  # 8(u + 1) = 2**30: does not
    assert _vt(fits, 7) == ValueType("int32", 1, False) and _vt(over, 7) == ValueType("int64", 1, False)
    assert _same(fits) == (("int32", False), 7 * u)
    assert _same(over) == (("int64", False), 7 * (u + 1))
    # the same jobs must run: infeasible values could grow (the sum 7u >= M/4), so they are reset
    assert _same(_many(7, u, idle=False)) == (("int32", True), 7 * u)
    assert _same(_many(7, u, idle=False, G=6)) == (("int32", True), None)  # 7 jobs that must run, 6 GPUs
    # 3 jobs of 8 GPUs that must run on 23: without the reset, the infeasible chain -M/2 + 3u would read as
    # a feasible optimum
    chain = _many(3, (1 << 28) - 1, k=8, idle=False, G=23)
    assert _same(chain) == (("int32", True), None)
    assert _solve(chain, ValueType("int32", 1, False))[1] is not None  # what the kernel without the reset says
    assert _same(_many(3, (1 << 28) - 1, k=8, idle=False, G=24)) == (("int32", True), 3 * ((1 << 28) - 1))
    # a sum below M/4: no reset even with jobs that must run
    u3 = (1 << 28) // 3 - 1
    assert _same(_many(3, u3, idle=False)) == (("int32", False), 3 * u3)


def test_value_type_bounds_states_by_utility_per_gpu():
    # 100 jobs of 2**25 on 16 GPUs: the sum 100 * 2**25 is past M = 2**30, but 63 GPUs hold at most 63 * 2**21
    table = _many(100, 1 << 25, k=16, G=63)
    assert _vt(table, 63).dtype == "int32" and _vt(table, 16 * 240).dtype == "int64"
    assert _same(table) == (("int32", False), 3 * (1 << 25))


def test_value_type_lowest_feasible_value():
    # jobs that must take a negative utility: the lowest feasible value -M/4 = -2**28 fits, one less does not
    at = _many(2, -(1 << 27), idle=False)
    below = _table(np.ones((2, 1)), [[-(1 << 27)], [-(1 << 27) - 1]], np.ones((2, 1), bool), [False, False], 2)
    assert _vt(at, 2).dtype == "int32" and _vt(below, 2).dtype == "int64"
    assert _same(at) == (("int32", False), -(1 << 28))  # no positive utility: nothing to reset
    assert _same(below) == (("int64", False), -(1 << 28) - 1)
    # a single utility of M/4 is too large for the infeasible values' margin
    assert _vt(_many(1, 1 << 28), 1).dtype == "int64"


def test_value_type_falls_back_to_the_unpacked_kernel():
    # 2**15 options: W = 2**16, int64 M = 2**47; a utility of 2**46 leaves no room to pack
    t = _many(1, 1 << 46)
    assert value_type(t.utility, t.gpus, t.valid, t.idle_allowed, 1, 1 << 15) == ARGMAX64
    assert value_type(t.utility, t.gpus, t.valid, t.idle_allowed, 1, 8) == ValueType("int64", 4, False)


def test_multi_type_kernel_packed_agrees():
    rng = np.random.default_rng(3)
    n, K = 40, 4
    gpus = rng.integers(1, 5, size=(n, K))
    ty = rng.integers(0, 2, size=(n, K))
    util = rng.integers(-(1 << 18), 1 << 22, size=(n, K))
    valid = rng.random((n, K)) < 0.8
    for idle in (np.ones(n, bool), rng.random(n) < 0.7):
        table = _table(gpus, util, valid, idle, 14, ty, [6, 8])
        vt = _solve(table, multi=True)[0]
        assert _same(table, multi=True)[0][0] == "int64"  # the multi-type DP packs in int64 only
        _, best, choice = _solve(table, replace(vt, dtype="int32", reset=True), multi=True)  # int32 agrees too
        _, best64, choice64 = _solve(table, ARGMAX64, multi=True)
        assert best == best64 and (choice == choice64).all()


def test_wide_tables_rows_keep_the_option_code():
    # the packed kernels' argmax rows are the carry truncated to int8 (widths <= 127: W <= 128, the code in the
    # low 7 bits, the sign bit a value bit) or int16 (wider: W = 256); the backtrack decodes the code where it
    # reads. Widths around both edges, utilities whose packed values set the rows' high bits, against the
    # unpacked kernel (rows of options)
    rng = np.random.default_rng(7)
    for K in (63, 64, 100, 127, 128, 130):
        n, G = 6, 40
        gpus = rng.integers(1, 12, size=(n, K))
        util = rng.integers(1 << 20, 1 << 40, size=(n, K))
        valid = rng.random((n, K)) < 0.9
        for idle in (np.ones(n, bool), np.array([True, False] * (n // 2))):
            table = _table(gpus, util, valid, idle, G)
            vt, best, choice = _solve(table)
            assert vt.shift_bits == int(JaxDP._arrays(table, G)["width"]).bit_length()
            (_, _), _ = _same(table)
            assert best is not None and (choice >= 0).sum() > 0
