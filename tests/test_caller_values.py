"""The caller values of options (``ModelJobs.caller_values``: per job its values as sorted codes, a binary search
per option in numba) equal the option-by-option reference (``_caller_values_by_row``, a dict look-up each): random
jobs' values (plain and packed keys, several GPU types and types the cluster lacks, jobs without values, keys the
codes cannot hold) and random options, some priced and some not; and a values object is read again only when it
is another object."""

from __future__ import annotations

from types import MappingProxyType, SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from elasticopt.models import objectives
from elasticopt.models.objectives import ModelJobs, OptionRows, _caller_values_by_row

TYPES = ("a100", "t4", "v100")
KEY = st.tuples(st.integers(0, 3), st.sampled_from([0, 1, 2, 4, 8]), st.sampled_from([1, 32, 64]), st.booleans())
#: keys the codes cannot hold (then the reference answers): a float k, another 4th field, too short, not a tuple,
#: a type that is not a string, k or b beyond the codes' bounds
ODD = st.sampled_from([("a100", 1.0, 32), ("a100", 1, 32, "spread"), ("t4", 2), "a100", (7, 1, 32),
                       ("a100", 2**20, 32), ("a100", 1, 2**36)])
BIG = (0, (0, 2**20, 32, False)), (0, (0, 1, 2**36, False))  # options beyond the codes' bounds


def _key(t: int, k: int, b: int, packed: bool) -> tuple:
    name = (*TYPES, "k80")[t]  # k80: a type the cluster lacks
    return (name, k, b, "packed") if packed else (name, k, b)


def _rows(picks: list[tuple[int, tuple]]) -> OptionRows:
    keys = [key for _, key in picks]
    return OptionRows(
        job=np.array([j for j, _ in picks], dtype=np.int64),
        gpus=np.array([k[1] for k in keys], dtype=np.int64),
        batch=np.array([k[2] for k in keys], dtype=np.int64),
        samples_per_s=np.ones(len(picks)),
        gpu_type=np.array([min(k[0], 2) for k in keys], dtype=np.int64),
        packed=np.array([k[3] for k in keys], dtype=bool),
        types=TYPES,
    )


@settings(max_examples=300, deadline=None)
@given(jobs=st.lists(st.tuples(st.one_of(st.none(), st.dictionaries(KEY, st.floats(-1e6, 1e6), max_size=12)),
                               st.one_of(st.just([]), st.just([]), st.just([]), st.lists(ODD, min_size=1, max_size=1))),
                     min_size=1, max_size=8),
       picks=st.lists(st.tuples(st.integers(0, 7), KEY), max_size=60), plain=st.booleans(), big=st.integers(0, 9))
def test_caller_values_equal_the_row_by_row_reference(jobs, picks, plain, big):
    model = []
    for values, odd in jobs:
        d = None if values is None else {_key(*key): x for key, x in values.items()}
        if d is not None and odd:
            d[odd[0]] = 5.0
        model.append(SimpleNamespace(values=None if d is None else d if plain else MappingProxyType(d)))
    rows = _rows([(j % len(jobs), key) for j, key in picks] + (list(BIG[big:]) if big < 2 else []))
    for _ in range(2):  # the second time from the kept codes
        got, want = ModelJobs(model).caller_values(rows), _caller_values_by_row(model, rows)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert np.array_equal(got, want, equal_nan=True)


def test_the_codes_of_a_values_object_are_read_once_and_another_object_is_read_again():
    values = MappingProxyType({("t4", 1, 32): 2.0, ("t4", 2, 64, "packed"): 3.0})
    rows = _rows([(0, (1, 1, 32, False)), (0, (1, 2, 64, True)), (0, (1, 2, 64, False))])
    calls = []
    real = objectives._codes_of
    objectives._codes_of = lambda v, t: calls.append(v) or real(v, t)
    try:
        for _ in range(3):
            out = ModelJobs([SimpleNamespace(values=values)]).caller_values(rows)
        assert out.tolist()[:2] == [2.0, 3.0] and np.isnan(out[2]) and len(calls) == 1
        other = MappingProxyType({("t4", 1, 32): 9.0})
        assert ModelJobs([SimpleNamespace(values=other)]).caller_values(rows)[0] == 9.0 and len(calls) == 2
    finally:
        objectives._codes_of = real
