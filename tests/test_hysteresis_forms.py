"""The anti-thrashing rule in its two forms, ``Hysteresis.allows`` and ``Hysteresis.allows_array``, agrees.

The array form is what the scheduler's incremental table filters with; the
scalar form is what the autoscaler vetoes with and what compiled problems
filter with.  On random running and queued jobs (rates, restart costs,
cool-downs, remaining work) and random rules, every option but the current
one gets the same verdict.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from elasticopt.models import MeasuredThroughput
from elasticopt.scheduling.executor import Phase
from elasticopt.scheduling.hysteresis import Hysteresis
from elasticopt.scheduling.jobspec import JobSpec
from elasticopt.scheduling.state import JobState

rules = st.builds(Hysteresis, min_gain=st.sampled_from([0.0, 0.1, 0.3]),
                  payback_factor=st.sampled_from([0.0, 1.0, 2.0]),
                  min_interval_restarts=st.sampled_from([0.0, 5.0, 15.0]))


@st.composite
def job_states(draw):
    ks = draw(st.lists(st.sampled_from([1, 2, 3, 4, 8]), min_size=1, max_size=5, unique=True))
    # rates from a small set (ties: a gain of exactly min_gain) or anything
    rates = st.one_of(st.sampled_from([100.0, 130.0, 200.0]), st.floats(1.0, 1000.0))
    pts = {(k, m * k): draw(rates) for k in ks for m in (32, 64) if m == 32 or draw(st.booleans())}
    spec = JobSpec("j", MeasuredThroughput(pts), 32, 512, 64, total_samples=draw(st.floats(1e3, 1e7)))
    running = draw(st.booleans())
    k0 = draw(st.sampled_from(ks)) if running else 0
    # cool-downs that end exactly now (5 or 15 restart costs of 10 or 30 s) or anywhere
    since = draw(st.one_of(st.none(), st.sampled_from([0.0, 50.0, 150.0, 450.0]), st.floats(0.0, 5000.0))) \
        if running else None
    state = JobState(spec, Phase.RUNNING if running else Phase.QUEUED, k0, 32 * k0 if running else 0,
                     draw(st.floats(0.0, 900.0)), since, draw(st.sampled_from([0.0, 10.0, 30.0, 120.0])))
    return state, sorted(pts)


@settings(max_examples=300, deadline=None)
@given(rules, st.lists(job_states(), min_size=1, max_size=6))
def test_scalar_and_array_forms_agree(rule, jobs):
    width = max(len(opts) for _, opts in jobs)
    n = len(jobs)
    K = np.ones((n, width))
    rate = np.ones((n, width))
    for j, (s, opts) in enumerate(jobs):
        for o, (k, b) in enumerate(opts):
            K[j, o], rate[j, o] = k, s.progress_per_s(k, b)
    kn = np.array([float(s.gpus) for s, _ in jobs])
    rem = np.array([s.remaining_samples for s, _ in jobs])
    cost = np.array([s.restart_cost_s for s, _ in jobs])
    rnow = np.array([(s.progress_per_s(s.gpus, s.batch) or 0.0) if s.is_running else 0.0 for s, _ in jobs])
    running = np.array([s.is_running for s, _ in jobs])
    since = np.array([np.inf if s.since_rescale_s is None else s.since_rescale_s for s, _ in jobs])
    arr = rule.allows_array(K, rate, kn, rem, cost, rnow, running, since)
    for j, (s, opts) in enumerate(jobs):
        for o, (k, b) in enumerate(opts):
            if (k, b) == s.allocation:
                continue  # the current option is the caller's to keep
            assert bool(arr[j, o]) == rule.allows(s, k, b), (j, k, b, s)


def test_boundaries_by_hand():
    """A gain of exactly min_gain is enough; a cool-down that ends now is over; the same k at another
    batch is no shrink."""
    pts = {(2, 64): 100.0, (4, 128): 130.0, (2, 128): 130.0, (1, 32): 60.0}
    spec = JobSpec("j", MeasuredThroughput(pts), 32, 128, 64, total_samples=1e6)
    s = JobState(spec, Phase.RUNNING, 2, 64, 0.0, 450.0, 30.0)
    rule = Hysteresis(min_gain=0.3, payback_factor=1.0, min_interval_restarts=15.0)
    opts = [(4, 128), (2, 128), (1, 32)]
    K = np.array([[float(k) for k, _ in opts]])
    rate = np.array([[pts[o] for o in opts]])
    one = np.array
    arr = rule.allows_array(K, rate, one([2.0]), one([1e6]), one([30.0]), one([100.0]), one([True]), one([450.0]))
    assert [rule.allows(s, k, b) for k, b in opts] == arr[0].tolist() == [True, True, True]
    late = Hysteresis(min_gain=0.31, payback_factor=1.0, min_interval_restarts=15.0)
    arr = late.allows_array(K, rate, one([2.0]), one([1e6]), one([30.0]), one([100.0]), one([True]), one([450.0]))
    assert [late.allows(s, k, b) for k, b in opts] == arr[0].tolist() == [False, False, True]
    early = JobState(spec, Phase.RUNNING, 2, 64, 0.0, 449.0, 30.0)
    arr = rule.allows_array(K, rate, one([2.0]), one([1e6]), one([30.0]), one([100.0]), one([True]), one([449.0]))
    assert [rule.allows(early, k, b) for k, b in opts] == arr[0].tolist() == [False, False, False]
