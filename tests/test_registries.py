"""Every registry refuses a second entry under a taken name unless asked to replace (issue 21).

Solvers, policies, profiles, objectives and the incremental path's vector
objectives: a duplicate raises :class:`DuplicateNameError` naming the
registry, the name, what holds it and the fix; ``replace=True`` replaces;
the same object again is a no-op.  Each test removes what it added.
"""

from __future__ import annotations

import pytest

from elasticopt.errors import DuplicateNameError, ValidationError
from elasticopt.models import MeasuredThroughput


def test_error_names_registry_name_holder_and_fix():
    class Holder:
        pass

    exc = DuplicateNameError("solver", "dp", Holder)
    assert isinstance(exc, ValidationError)
    text = str(exc)
    assert "solver name" in text and "'dp'" in text and "Holder" in text and "replace=True" in text


def test_solver_registry():
    from elasticopt.solvers import registry
    from elasticopt.solvers.base import Backend

    real = registry._REGISTRY["numpy-dp"]

    class Fake(Backend):
        name = "numpy-dp"

    with pytest.raises(DuplicateNameError, match="solver name.*numpy-dp.*NumpyDP|solver name.*numpy-dp"):
        registry.register(Fake)
    assert registry._REGISTRY["numpy-dp"] is real
    assert registry.register(real) is real  # the same class again: no-op
    try:
        assert registry.register(Fake, replace=True) is Fake
        assert registry._REGISTRY["numpy-dp"] is Fake
    finally:
        registry._REGISTRY["numpy-dp"] = real

    class Mine(Backend):
        name = "test-registries-mine"

    try:
        assert registry.register(replace=False)(Mine) is Mine  # decorator with arguments
        with pytest.raises(DuplicateNameError):
            registry.register(type("Other", (Backend,), {"name": "test-registries-mine"}))
    finally:
        registry._REGISTRY.pop("test-registries-mine", None)


def test_policy_registry():
    from elasticopt.scheduling.policies import base

    real = base._REGISTRY["elastic"]
    with pytest.raises(DuplicateNameError, match="policy name"):
        base.register_policy("elastic", lambda: None)
    assert base._REGISTRY["elastic"] is real
    assert base.register_policy("elastic", real) is real

    def mine():
        return None

    try:
        base.register_policy("test-registries-p")(mine)
        with pytest.raises(DuplicateNameError):
            @base.register_policy("test-registries-p")
            class Other:
                pass
        other = lambda: None  # noqa: E731
        assert base.register_policy("test-registries-p", other, replace=True) is other
        assert base._REGISTRY["test-registries-p"] is other
    finally:
        base._REGISTRY.pop("test-registries-p", None)


def test_profile_registry():
    from elasticopt.profiles import get_profile, register_profile, unregister_profile

    first = register_profile(MeasuredThroughput({(1, 8): 1.0}, name="lab/test-registries"))
    try:
        with pytest.raises(DuplicateNameError, match="profile name"):
            register_profile(MeasuredThroughput({(1, 8): 2.0}, name="lab/test-registries"))
        assert get_profile("lab/test-registries") is first
        assert register_profile(first) is first
        second = register_profile(MeasuredThroughput({(1, 8): 2.0}, name="lab/test-registries"), replace=True)
        assert get_profile("lab/test-registries") is second
    finally:
        unregister_profile("lab/test-registries")


def test_pollux_policies_share_their_objective():
    from elasticopt.models.objectives import get_objective
    from elasticopt.scheduling import get_policy

    assert get_policy("pollux").objective == "pollux"  # the built-in objective at idle_speedup 0.01
    a = get_policy("pollux", idle_speedup=0.05)
    obj = get_objective(a.objective)
    b = get_policy("pollux", idle_speedup=0.05)  # the same parameter again: the registered objective is kept
    assert a.objective == b.objective == "pollux:0.05" and get_objective(b.objective) is obj
