"""The autoscaler's pure functions: action ordering and the payback rule."""

from hypothesis import given, settings
from hypothesis import strategies as st

from elasticopt.scheduling.actions import Action, pays_back, plan_actions


def _apply(state, act):
    state = dict(state)
    state[act.job_id] = None if act.kind == "stop" else (act.gpus, act.batch)
    return state


def _used(state):
    return sum(v[0] for v in state.values() if v is not None)


def test_order_releases_before_taking():
    current = {"a": (4, 64), "b": (2, 32), "c": None, "d": (2, 32), "e": (1, 8)}
    target = {"a": (2, 64), "b": None, "c": (4, 64), "d": (4, 64), "e": (1, 16)}
    acts = plan_actions(current, target)
    assert [a.kind for a in acts] == ["stop", "rescale", "rescale", "rescale", "start"]
    assert acts[0] == Action("stop", "b")
    assert acts[1] == Action("rescale", "a", 2, 64)  # shrink
    assert acts[2] == Action("rescale", "e", 1, 16)  # same k, new batch
    assert acts[3] == Action("rescale", "d", 4, 64)  # grow
    assert acts[4] == Action("start", "c", 4, 64)


def test_unchanged_jobs_get_no_action_and_missing_target_stops():
    assert plan_actions({"a": (1, 8)}, {"a": (1, 8)}) == []
    assert plan_actions({"a": (1, 8)}, {}) == [Action("stop", "a")]
    assert plan_actions({}, {"a": None}) == []


opt = st.one_of(st.none(), st.tuples(st.integers(1, 8), st.sampled_from([8, 16, 32])))


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from("abcdefgh"), st.tuples(opt, opt), max_size=8))
def test_applying_in_order_never_exceeds_max_of_endpoints(pairs):
    current = {j: c for j, (c, _) in pairs.items()}
    target = {j: t for j, (_, t) in pairs.items()}
    bound = max(_used(current), _used(target))
    state = dict(current)
    for act in plan_actions(current, target):
        state = _apply(state, act)
        assert _used(state) <= bound
    assert {j: v for j, v in state.items() if v} == {j: v for j, v in target.items() if v}


def test_pays_back():
    # 1000 samples left at 10/s = 100 s; at 20/s = 50 s + restart
    assert pays_back(1000, 10, 20, restart_cost_s=30)
    assert not pays_back(1000, 10, 20, restart_cost_s=50)  # saves exactly 50 s: not more
    assert not pays_back(1000, 10, 10, restart_cost_s=0)  # no gain, no change
    assert not pays_back(1000, 10, 5, restart_cost_s=0)
    assert pays_back(1000, 0, 5, restart_cost_s=100)  # not progressing at all
    assert not pays_back(1000, 10, 20, restart_cost_s=30, margin=2.0)
