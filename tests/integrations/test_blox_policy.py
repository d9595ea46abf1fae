"""BloxPolicy + BloxPlacement in a stand-in of Blox's scheduling round."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blox_standin import BloxCluster
from elasticopt.integrations import blox
from elasticopt.integrations.blox import BloxPlacement, BloxPolicy

DROPIN = blox  # the conftest's client fixture uses this file's client


def test_rigid_jobs_most_that_fit_without_head_of_line_blocking(client):
    cluster = BloxCluster(nodes=2, gpus_per_node=4)
    jobs = {1: {"num_GPUs": 8, "submit_time": 0}, 2: {"num_GPUs": 2, "submit_time": 1},
            3: {"num_GPUs": 4, "submit_time": 2}, 4: {"num_GPUs": 2, "submit_time": 3}}
    running = cluster.round(BloxPolicy(client=client), BloxPlacement(), jobs, elastic=False)
    assert sorted(running) == [2, 3, 4]  # FIFO would block on job 1 (8 GPUs) with nothing else running
    for job, ids in running.items():
        nodes = {i // 4 for i in ids}
        assert len(nodes) == math.ceil(len(ids) / 4)  # packed on the fewest nodes


def test_elastic_rounds_keep_running_jobs_in_place(client):
    cluster = BloxCluster(nodes=2, gpus_per_node=4)
    speed = lambda jid, info, k: k ** (0.6 + 0.1 * (jid % 3))  # noqa: E731
    policy, placement = BloxPolicy(speedup_fn=speed, client=client), BloxPlacement()
    jobs = {i: {"num_GPUs": 4, "submit_time": i} for i in range(3)}
    first = cluster.round(policy, placement, jobs, elastic=True)
    assert set(first) == {0, 1, 2} and sum(len(v) for v in first.values()) == 8
    again = cluster.round(policy, placement, jobs, elastic=True)  # nothing changed: nothing moves
    assert again == first
    jobs[3] = {"num_GPUs": 4, "submit_time": 3}
    third = cluster.round(policy, placement, jobs, elastic=True)
    assert set(third) == {0, 1, 2, 3}  # the newcomer gets in: the most jobs run first


@pytest.mark.parametrize("gpus", [[3, 3, 2, 1], [4, 4, 4], [1, 2, 5, 3, 2]])
def test_rigid_choice_is_the_exact_maximum(client, gpus):
    cluster = BloxCluster(nodes=2, gpus_per_node=4)
    jobs = {i: {"num_GPUs": g, "submit_time": i} for i, g in enumerate(gpus)}
    running = cluster.round(BloxPolicy(client=client), BloxPlacement(), jobs, elastic=False)
    best = max(sum(c) for c in itertools.product([0, 1], repeat=len(gpus))
               if sum(g * x for g, x in zip(gpus, c)) <= 8)
    assert len(running) == best


class CountingClient:
    """The service client, counting the requests that reach it."""

    def __init__(self, inner):
        self.inner, self.sent = inner, 0

    def request(self, doc):
        self.sent += 1
        return self.inner.request(doc)


def test_the_second_schedule_call_of_a_round_is_answered_once(client):
    """Blox calls ``schedule`` twice per round (before and after ``prune_jobs``): with nothing pruned the
    second call is answered from the first one's answer (the old drop-in sent both: 2 requests a round);
    after a job finished the state differs and the second call is solved again."""
    counting = CountingClient(client)
    cluster = BloxCluster(nodes=2, gpus_per_node=4)
    policy, placement = BloxPolicy(client=counting), BloxPlacement()
    jobs = {i: {"num_GPUs": g, "submit_time": i} for i, g in enumerate([2, 4, 2, 1])}
    first = cluster.round(policy, placement, jobs, elastic=False)
    assert counting.sent == 1 and policy.requests_sent == 1 and policy.repeats_answered == 1
    assert cluster.round(policy, placement, jobs, elastic=False) == first
    assert counting.sent == 2 and policy.repeats_answered == 2  # jobs now hold GPUs: one new request
    done = next(iter(first))
    after = cluster.round(policy, placement, jobs, elastic=False, finished=[done])
    # the first call sees round 2's state (answered from it), the second the pruned state: solved again
    assert counting.sent == 3 and policy.repeats_answered == 3
    assert done not in after and len(after) >= len(first) - 1


def _blox_job(gpus: int, submit: float, served: float, priority: int = 999) -> dict:
    """A job dict as Blox's JobState keeps it (job_state.py: ``job_priority`` 999, or 1 once it waited past
    Blox's threshold; ``tracked_metrics`` with ``attained_service``)."""
    return {"num_GPUs": gpus, "submit_time": submit, "job_priority": priority,
            "tracked_metrics": {"attained_service": served, "per_iter_time": 1}}


def test_more_jobs_than_gpus_least_attained_service_runs_as_blox_las(client):
    """Ten one-GPU jobs on 8 GPUs: the two with the most service wait, whatever their age (Blox's Las);
    by default (Blox's Fifo order) the two newest wait."""
    served = [900, 0, 3000, 300, 600, 2700, 0, 1200, 300, 1500]
    jobs = {i: _blox_job(1, submit=i, served=s) for i, s in enumerate(served)}
    las = BloxPolicy(order="attained_service", client=client)
    running = BloxCluster(nodes=2, gpus_per_node=4).round(las, BloxPlacement(), jobs, elastic=False)
    assert sorted(running) == [0, 1, 3, 4, 6, 7, 8, 9]  # 2 (3000 s) and 5 (2700 s) wait
    running = BloxCluster(nodes=2, gpus_per_node=4).round(BloxPolicy(client=client), BloxPlacement(), jobs,
                                                          elastic=False)
    assert sorted(running) == list(range(8))


def test_a_running_job_with_more_service_is_suspended_for_a_new_one(client):
    cluster = BloxCluster(nodes=1, gpus_per_node=2)
    policy, placement = BloxPolicy(order="attained_service", client=client), BloxPlacement()
    jobs = {0: _blox_job(1, 0, 0), 1: _blox_job(1, 1, 0)}
    assert sorted(cluster.round(policy, placement, jobs, elastic=False)) == [0, 1]
    jobs[0], jobs[1] = _blox_job(1, 0, 600), _blox_job(1, 1, 300)
    jobs[2] = _blox_job(1, 2, 0)  # arrives: job 0 (most service) gives its GPU up
    assert sorted(cluster.round(policy, placement, jobs, elastic=False)) == [1, 2]


def test_arrival_order_keeps_the_oldest_and_blox_priority_comes_first(client):
    cluster = BloxCluster(nodes=1, gpus_per_node=2)
    jobs = {0: _blox_job(1, 0, 600), 1: _blox_job(1, 1, 300), 2: _blox_job(1, 2, 0)}
    fifo = BloxPolicy(client=client)  # the default order: Blox's Fifo
    assert sorted(cluster.round(fifo, BloxPlacement(), jobs, elastic=False)) == [0, 1]
    jobs[2] = _blox_job(1, 2, 0, priority=1)  # Blox raised it (waited past its threshold): it runs first
    cluster = BloxCluster(nodes=1, gpus_per_node=2)
    assert sorted(cluster.round(fifo, BloxPlacement(), jobs, elastic=False)) == [0, 2]
    jobs[0] = _blox_job(1, 0, 0, priority=1)
    cluster = BloxCluster(nodes=1, gpus_per_node=2)
    las = BloxPolicy(order="attained_service", client=client)
    assert sorted(cluster.round(las, BloxPlacement(), jobs, elastic=False)) == [0, 2]


def test_an_unknown_order_is_refused():
    with pytest.raises(blox.ElasticoptError, match="order='srtf'"):
        BloxPolicy(order="srtf", client=object())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 6), st.sampled_from([1, 999])), min_size=1, max_size=14),
       st.sampled_from(["arrival", "attained_service"]))
def test_one_gpu_jobs_the_first_in_the_tie_order_run(client, served_priority, order):
    """Invariant: with one-GPU jobs the running set is the first min(n, GPUs) jobs in Blox's Fifo order
    (job_priority, submission) or Las order (job_priority, attained service, submission)."""
    cluster = BloxCluster(nodes=2, gpus_per_node=4)
    jobs = {i: _blox_job(1, submit=i, served=300 * s, priority=p) for i, (s, p) in enumerate(served_priority)}
    running = cluster.round(BloxPolicy(order=order, client=client), BloxPlacement(), jobs, elastic=False)
    served = (lambda j: jobs[j]["tracked_metrics"]["attained_service"]) if order != "arrival" else (lambda j: 0)
    first = sorted(jobs, key=lambda j: (jobs[j]["job_priority"], served(j), j))
    assert sorted(running) == sorted(first[:8])


@given(st.lists(st.tuples(st.integers(0, 3), st.booleans(), st.one_of(st.none(), st.integers(0, 50),
                                                                        st.just(float("nan")))),
                min_size=0, max_size=40))
@settings(max_examples=60, deadline=None)
def test_gpu_rows_of_a_dataframe_are_pandas_own_records(cells):
    """``gpu_rows`` reads Blox's ``gpu_df`` column by column (to_dict("records") took 6.7 ms a call for 128 GPUs
    in Blox's pandas 1.3, five times a round); the rows must be what pandas' own records are: the same keys,
    Python scalars, NaN where a GPU holds no job, in GPU order."""
    import pandas as pd

    from elasticopt.integrations.blox import gpu_rows

    rows = [{"GPU_ID": i, "Local_GPU_ID": i % 4, "Node_ID": i // 4, "IP_addr": "10.0.0.%d" % (i // 4),
             "IN_USE": used, "JOB_IDS": job, "GPU_type": ("V100", "T4", "K80", "A100")[t]}
            for i, (t, used, job) in enumerate(cells)]
    df = pd.DataFrame(rows, columns=["GPU_ID", "Local_GPU_ID", "Node_ID", "IP_addr", "IN_USE", "JOB_IDS", "GPU_type"])
    ours, theirs = gpu_rows(df), df.to_dict("records")
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert list(a) == list(b)
        for k in a:
            x, y = a[k], b[k]
            assert type(x) is type(y) or (isinstance(x, float) and isinstance(y, float)), (k, x, y)
            assert (isinstance(x, float) and math.isnan(x) and math.isnan(y)) or x == y, (k, x, y)
