"""A stand-in of Gavel's policy interface (stanford-futuredata/gavel: scheduler/policies/policy.py,
scheduler/job_id_pair.py, scheduler/scheduler.py).

The scheduler calls a policy whose name it does not know as
``get_allocation(throughputs, scale_factors, cluster_spec)``, turns ``None``
into ``{}``, and reads ``allocation[job_id][worker_type]`` for every worker
type it has (``_update_priorities``, ``_reset_time_run_so_far``): every row
names every worker type of the cluster spec.

``get_allocation(unflattened_throughputs, scale_factors, cluster_spec)``:
throughputs ``{job_id: {worker_type: float}}`` (a space-sharing pair has a
list of two floats per type), scale factors ``{job_id: GPUs}``, cluster spec
``{worker_type: GPUs}``; the answer ``{job_id: {worker_type: share}}`` must
give every job shares in [0, 1] summing to at most 1 and keep
``sum_j share[j][t] * scale_factor[j] <= cluster_spec[t]``.
"""

from __future__ import annotations


class JobIdPair:
    """Gavel's job id: one job (``JobIdPair(3, None)``) or a space-sharing pair."""

    def __init__(self, a: int, b: int | None):
        self._a, self._b = a, b

    def __getitem__(self, i):
        return (self._a, self._b)[i]

    def __lt__(self, other):  # Gavel sorts job ids (Policy.flatten)
        return (self._a, -1 if self._b is None else self._b) < (other._a, -1 if other._b is None else other._b)

    def as_tuple(self):
        return (self._a,) if self._b is None else (self._a, self._b)

    def overlaps_with(self, other) -> bool:
        return bool(set(self.as_tuple()) & set(other.as_tuple()))

    def is_pair(self) -> bool:
        return self._b is not None

    def singletons(self):
        return (JobIdPair(self._a, None),) if self._b is None else (JobIdPair(self._a, None), JobIdPair(self._b, None))

    def __hash__(self):
        return hash((self._a, self._b))

    def __eq__(self, other):
        return isinstance(other, JobIdPair) and (self._a, self._b) == (other._a, other._b)

    def __str__(self):
        return str(self._a) if self._b is None else f"({self._a}, {self._b})"

    __repr__ = __str__


def accept(allocation, throughputs, scale_factors, cluster_spec) -> None:
    """What Gavel's scheduler relies on, checked."""
    assert set(allocation) == set(throughputs), "an allocation row for every job id"
    used = {t: 0.0 for t in cluster_spec}
    for job_id, row in allocation.items():
        assert set(row) <= set(cluster_spec), f"{job_id}: unknown worker types {set(row) - set(cluster_spec)}"
        assert set(row) == set(cluster_spec), f"{job_id}: no share for {set(cluster_spec) - set(row)} (read per type)"
        assert all(0.0 <= x <= 1.0 for x in row.values()), f"{job_id}: shares outside [0, 1]"
        assert sum(row.values()) <= 1.0 + 1e-9, f"{job_id}: shares sum above 1"
        for t, x in row.items():
            if x > 0:
                assert throughputs[job_id].get(t, 0) not in (0, 0.0), f"{job_id}: share on a type it cannot run on"
            used[t] += x * (sum(scale_factors[s] for s in job_id.singletons()) if job_id.is_pair() else scale_factors[job_id])
    for t, u in used.items():
        assert u <= cluster_spec[t] + 1e-9, f"type {t}: {u} GPUs allocated, {cluster_spec[t]} exist"


def compute_allocation(policy, throughputs, scale_factors, cluster_spec, num_steps_remaining=None,
                       priority_weights=None, times_since_start=None):
    """How Gavel's scheduler calls a policy (``Scheduler._compute_allocation``, scheduler.py:2116-2145): the
    arguments depend on the policy's ``name``; ``None`` becomes ``{}``.  The state is Gavel's
    ``_get_allocation_state``: every job's priority weight (1), time since start and remaining steps."""
    name = policy.name
    weights = priority_weights or {j: 1.0 for j in throughputs}
    since = times_since_start or {j: 0.0 for j in throughputs}
    steps = num_steps_remaining or {j: 1000 for j in throughputs}
    if name == "AlloX_Perf":
        out = policy.get_allocation(throughputs, scale_factors, since, steps, cluster_spec)
    elif name.startswith("FinishTimeFairness"):
        out = policy.get_allocation(throughputs, scale_factors, weights, since, steps, cluster_spec)
    elif name.startswith("MaxMinFairness"):
        out = policy.get_allocation(throughputs, scale_factors, weights, cluster_spec)
    elif name.startswith("MinTotalDuration"):
        out = policy.get_allocation(throughputs, scale_factors, steps, cluster_spec)
    else:
        out = policy.get_allocation(throughputs, scale_factors, cluster_spec)
    return {} if out is None else out


WORKER_TYPE_ORDER = ("v100", "p100", "k80")  # scheduler.py: _schedule_jobs_on_workers


class GavelRounds:
    """Gavel's round-based mechanism (scheduler.py, simulation mode), as it treats a policy's allocation.

    Per round (``_schedule_jobs_on_workers``): the worker types in the order
    v100, p100, k80 (those present), **shuffled every round by a seeded
    ``random.Random`` unless the policy's name contains "Perf" or "Packing"**
    (scheduler.py:879-881); per type, the jobs in decreasing (priority,
    deficit, allocation), priority = share x 1e9 before the job has run on the
    type since the last reset, share / fraction of the type's time it received
    after, 0 for a share of 0 (``_update_priorities``); concatenated type by
    type, each job takes the first type in that queue with enough free
    workers where its throughput is positive (``_schedule_jobs_on_workers_helper``:
    a job of share 0 still takes a type's leftover workers, unless the
    policy's name starts with "FIFO").  Micro-task
    accounting: each scheduled job runs one micro-task of ``time_per_round_s``
    on its type, added to its and the type's time so far (scheduler.py:3074).
    """

    def __init__(self, policy_name, cluster_spec: dict, seed: int = 0, time_per_round_s: float = 360.0):
        import random

        self.policy = policy_name  # a name, or the policy itself: Gavel reads ``self._policy.name`` every round
        self.spec = dict(cluster_spec)
        self.shuffler = random.Random(seed + 5)  # scheduler.py:325-326
        self.time_per_round_s = time_per_round_s
        self.job_time: dict = {}
        self.type_time = {t: 0.0 for t in cluster_spec}
        self.microtasks: list[tuple] = []  # (round, job_id, worker type, share of the job on that type)

    def _priority(self, job_id, t, allocation, throughputs) -> float:
        share = allocation.get(job_id, {}).get(t, 0.0)
        if share == 0.0 or throughputs[job_id].get(t, 0.0) == 0:
            return 0.0
        got = self.job_time.get(job_id, {}).get(t, 0.0)
        if self.type_time[t] == 0.0 or got == 0.0:
            return share * 1e9
        return share / (got / self.type_time[t])

    @property
    def name(self) -> str:
        """The policy's name as this round reads it (scheduler.py:830, :879: ``self._policy.name``, not a copy)."""
        return self.policy if isinstance(self.policy, str) else self.policy.name

    def round(self, r: int, allocation: dict, throughputs: dict, scale_factors: dict) -> dict:
        """One round: ``{job_id: worker type}`` of the micro-tasks scheduled (and accounted)."""
        types = [t for t in WORKER_TYPE_ORDER if t in self.spec]
        if "Perf" not in self.name and "Packing" not in self.name:
            self.shuffler.shuffle(types)
        queue = []
        for t in types:
            entries = [(j, t, self._priority(j, t, allocation, throughputs), allocation.get(j, {}).get(t, 0.0))
                       for j in throughputs if not j.is_pair()]
            queue += sorted(entries, key=lambda e: (e[2], e[3]), reverse=True)
        left = dict(self.spec)
        placed: dict = {}
        for j, t, _prio, _share in queue:
            if left[t] == 0 or j in placed or throughputs[j].get(t, 0.0) <= 0:
                continue
            if self.name.startswith("FIFO") and _prio <= 0.0:  # scheduler.py:829-832: FIFO alone skips share 0
                continue
            if scale_factors[j] > left[t]:
                continue
            left[t] -= scale_factors[j]
            placed[j] = t
        for j, t in placed.items():
            self.job_time.setdefault(j, {}).setdefault(t, 0.0)
            self.job_time[j][t] += self.time_per_round_s
            self.type_time[t] += self.time_per_round_s
            self.microtasks.append((r, j, t, allocation.get(j, {}).get(t, 0.0)))
        return placed
