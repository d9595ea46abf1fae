"""GavelPolicy: elasticopt as a Gavel allocation policy (``get_allocation``).

Drop-in
-------
Copy this one file into Gavel's ``scheduler/policies/`` (it needs only the
standard library of Python >= 3.8), start ``elasticopt serve`` where
elasticopt is installed, and construct the policy where Gavel builds its
policies (``utils.get_policy``)::

    from policies.elasticopt_gavel import GavelPolicy    # this file
    policy = GavelPolicy(command=["/opt/eo/bin/elasticopt", "serve", "--stdio"])
    # or GavelPolicy(url="http://127.0.0.1:8765"), or ELASTICOPT_COMMAND / ELASTICOPT_URL
    allocation = policy.get_allocation(throughputs, scale_factors, cluster_spec)

``throughputs[job_id][worker_type]`` is the job's throughput on one share of
that worker type, ``scale_factors[job_id]`` the GPUs it needs,
``cluster_spec[worker_type]`` the number of GPUs of that type.  The answer is
``{job_id: {worker_type: share}}`` as Gavel's other policies return.

Objective, and how it differs from Gavel's own policies
-------------------------------------------------------
Every job on at most one worker type with exactly its scale factor of GPUs,
within each type's GPUs, maximising a sum of per-job values -- an integer
programme solved exactly by elasticopt; ties go to the jobs in the order
Gavel lists them.  Two objectives (``objective=``):

- ``"completion_rate"`` (default): a job on type ``t`` is worth ``weight *
  (1 + age / aging_s) * throughput[t] / steps_remaining``, the jobs it
  finishes per second there (Gavel's priority weight, 1 unless set; the steps
  left floored at ``round_s`` seconds of work on its fastest type, so that a
  job about to finish does not shrink every other value below the model's
  integer resolution), raised by its age (seconds since it arrived, Gavel's
  ``times_since_start``; ``aging_s`` one day by default, None: not raised).
  Without the age, its normalised throughput divided by its remaining time on
  its fastest type: shortest remaining time first, weighed by how much each
  type speeds the job up (the c-mu rule) -- the greedy rule for mean JCT,
  re-applied at every arrival and completion.  With it, a job's priority grows
  with the time it has spent in the system, as in highest-response-ratio-next:
  a long job is not pushed back by every newcomer for ever (docs/integrations.md
  §4, "Aging": mean JCT 0.928 of no aging over 19 settings, geometric mean;
  0.71 at 1 job per hour).  Gavel passes the
  remaining steps only to a policy whose name starts with
  ``"FinishTimeFairness"`` (``Scheduler._compute_allocation``), hence the
  name ``"FinishTimeFairness_Elasticopt_Perf"``; nothing else in Gavel
  reads that prefix.
- ``"normalised_throughput"``: ``throughput[j][t] / max_t
  throughput[j][t]``, each job worth at most 1 (the objective before
  2026-12-07; name ``"Elasticopt_Perf"``, Gavel's plain call).

Gavel's ``max_sum_throughput_perf`` (``ThroughputSumWithPerf``) maximises
the raw sum of throughput x time fraction as a linear programme (fractional
shares, realised over rounds by Gavel's mechanism); ``max_min_fairness_perf``
maximises the smallest normalised share; ``finish_time_fairness_perf`` the
worst ratio of finish time to the job's isolated finish time.  Here shares are
0 or 1, so a job either runs every round on one type or waits (no time
slicing): fewer jobs share the cluster at once and each one finishes sooner.
Measured in Gavel's own simulator (docs/integrations.md §4, "Refusing spare
workers only when every job runs"), with the defaults: at or below the best
Gavel policy's mean JCT in all 31 settings measured -- its artifact trace,
static traces and Poisson arrivals at 0.4-1 jobs per hour on 8 + 8 + 8 GPUs
(19 settings, up to five seeds) and twelve points of its Figure 9 (36 + 36 +
36 GPUs, 0.5-2.5 jobs per hour, seeds 0-2) -- from 0.51 to 1.00 of it (equal
to FIFO where every job runs at once: 0.5 jobs per hour, seed 1).

A sum of per-job values can keep a large job waiting while smaller ones keep
arriving (eight 1-GPU jobs beat one 8-GPU job at every call): with
``"normalised_throughput"`` at 1 job per hour on 8 + 8 + 8 GPUs 8-GPU jobs
waited for hundreds of hours and the simulation did not end. Hence
``patience_calls`` (default 64): a job left without a share by 64 answers in
a row is promoted, and the oldest promoted job is worth more than all others
together until it finishes (docs/integrations.md §4, "Continuous
arrivals": with it that run ends; where no job waited so long it changes
nothing).

Gavel's round mechanism
-----------------------
Gavel turns the allocation into micro-tasks each round
(``Scheduler._schedule_jobs_on_workers``): per worker type, jobs in
decreasing priority (share / fraction of the type's time received; 0 for a
share of 0) take the type's free workers, and the types are visited in the
order v100, p100, k80 only when the policy's ``name`` contains ``"Perf"`` (or
``"Packing"``); otherwise the order is shuffled every round.  With 0/1 shares
a shuffled order lets a job of share 0 on a type take that type's workers
before the type's own jobs are visited (under the earlier name
``"elasticopt"`` the jobs given a type were displaced to slower types or left
idle), so the name ends in
``"_Perf"``: the fixed order visits v100 first, and the jobs given a type
always fit in it.  Gavel's round still hands a type's leftover workers to
jobs of share 0 -- every policy's but FIFO's, which Gavel exempts by its
name (``Scheduler._schedule_jobs_on_workers_helper``) -- so a job put on a
P100 for being slower on a V100 (Gavel's Recommendation models run there at
0.43-0.51x) runs on a spare V100 at that speed.  The drop-in cannot refuse the
spare workers while its name starts with ``"FinishTimeFairness"`` (the name
that brings the remaining steps), not ``"FIFO"``; with ``fill_spare``
(default) it gives them out itself, in Gavel's visit order, to the jobs that
lose least there (waiting jobs first), and answers the allocation Gavel's
round will run.  After an answer that runs every job, no job waits for a
spare worker and a hand-out can only move a job off the type the answer
chose for it, so by default (``refuse_spare="auto"``) the drop-in then takes
the name ``"FIFO_Elasticopt_Perf"``, which Gavel's round exempts from
hand-outs, until an answer leaves a job waiting; Gavel reads the name at
every round and at every call, so the rounds of that answer and the next call
see it (that call is Gavel's plain one, without remaining steps, valued by
normalised throughput).  ``refuse_spare=True`` keeps the FIFO name throughout
(``normalised_throughput`` only: ahead at light load, behind where jobs queue,
docs/integrations.md §4, "1 job per hour at Figure 9's scale"); ``False``
never takes it.  Gavel calls ``get_allocation(throughputs,
scale_factors, priority_weights, times_since_start, num_steps_remaining,
cluster_spec)`` for ``"FinishTimeFairness_Elasticopt_Perf"`` and
``get_allocation(throughputs, scale_factors, cluster_spec)`` for
``"Elasticopt_Perf"`` and ``"FIFO_Elasticopt_Perf"`` (names none of its
dispatches matches); it recomputes
the allocation when jobs arrive or finish (not every round), and the answer
holds until then.

What it cannot express
----------------------
- time sharing: shares are 0 or 1 (Gavel's LP policies return fractions that
  its round-based mechanism realises over time);
- space-sharing pairs (job id pairs with a list of two throughputs) get 0;
- Gavel's placement inside a worker type (each type is one pool of GPUs here;
  Gavel places a job's workers itself);
- fairness over time, other than ``aging_s`` (completion rate) and
  ``patience_calls``: a job's value grows with its age, and a job left
  without a share that many answers in a row runs next.
"""

import json
import math
import os
import shlex
import subprocess
import threading
import urllib.error
import urllib.request

__all__ = ["GavelPolicy", "ElasticoptClient", "ElasticoptError"]



class GavelPolicy(object):
    """Gavel's policy interface, answered by ``elasticopt serve``.

    Parameters
    ----------
    solver
        elasticopt backend (``dp`` is exact and fast).
    time_limit_s
        Per-call solver time limit (None: none).
    url, command, client
        Where the service is: see :class:`ElasticoptClient` (or pass one).
    patience_calls
        A job left without a share by this many answers in a row is *promoted* until it finishes; the oldest
        promoted job (Gavel's job order) is worth more than all other jobs together, so every answer runs it
        (wherever it fits, other jobs giving way) until it finishes, then the next oldest: no job waits for
        ever.  Default 64 (module docstring: it changed nothing where no job starved); None: never (the
        objective alone).
    objective
        ``"completion_rate"`` (default: jobs finished per second, which needs Gavel's remaining steps and
        hence the ``FinishTimeFairness`` name) or ``"normalised_throughput"`` (module docstring).
    round_s
        ``completion_rate``: a job is taken to have at least this many seconds of work left on its fastest
        type (Gavel's round, 360 s by default).
    aging_s
        ``completion_rate``: a job's value is multiplied by ``1 + age / aging_s``, its age the seconds since it
        arrived (Gavel's ``times_since_start``); default 86,400 (one day), None: values not aged.
    fill_spare
        Answer the allocation Gavel's round will run (default True): GPUs the solve leaves free on a type
        are given, in Gavel's visit order, to the jobs that lose least (or gain most) by running there, as
        Gavel's round would give them anyway to jobs of share 0 in its own order (:meth:`fill_spare`).
        False: the solve's allocation alone.
    refuse_spare
        Whether Gavel's round may hand a type's free workers to jobs of share 0 (it does for every policy
        but one whose name starts with ``"FIFO"``: ``Scheduler._schedule_jobs_on_workers_helper``).
        ``"auto"`` (default): after each answer, the name is :attr:`fifo_name` (``"FIFO_Elasticopt_Perf"``:
        no hand-outs) when the answer runs every job that can run, else :attr:`taking_name` (the
        objective's name; ``fill_spare`` then gives the spare workers out, waiting jobs first).  Gavel reads
        the name at every round and every call, so it holds for that answer's rounds and the next call,
        which under the FIFO name is Gavel's plain one (no remaining steps: valued by normalised
        throughput).  True: named ``"FIFO_Elasticopt_Perf"`` throughout (needs ``objective=
        "normalised_throughput"`` and ``fill_spare=False``: Gavel passes it no remaining steps and hands
        it no spare workers).  False: never (the objective's name throughout).  docs/integrations.md §4,
        "Refusing spare workers only when every job runs".
    """

    #: The name Gavel reads (module docstring): "Perf" keeps Gavel's worker-type order, and the prefix
    #: "FinishTimeFairness" is the one of Gavel's name dispatches (``Scheduler._compute_allocation``) that
    #: hands a policy its jobs' priority weights, times since start and remaining steps, which the
    #: ``completion_rate`` objective needs.
    name = "FinishTimeFairness_Elasticopt_Perf"
    #: The name with the ``normalised_throughput`` objective: Gavel's plain call, no remaining steps.
    plain_name = "Elasticopt_Perf"
    #: The name with ``refuse_spare``: Gavel's plain call, and no spare workers handed to jobs of share 0.
    fifo_name = "FIFO_Elasticopt_Perf"
    objectives = ("completion_rate", "normalised_throughput")
    #: The order in which Gavel's round hands out worker types (``Scheduler._schedule_jobs_on_workers``,
    #: fixed for a name containing "Perf"); a type not named here is never scheduled by Gavel.
    visit_order = ("v100", "p100", "k80")

    def __init__(self, solver="dp", time_limit_s=None, url=None, command=None, client=None,
                 patience_calls=64, objective="completion_rate", round_s=360.0, fill_spare=True,
                 aging_s=86400.0, refuse_spare="auto"):
        if patience_calls is not None and (isinstance(patience_calls, bool) or not isinstance(patience_calls, int)
                                           or patience_calls < 1):
            raise ValueError("patience_calls: expected an integer >= 1 or None, found %r" % (patience_calls,))
        if objective not in self.objectives:
            raise ValueError("objective: expected one of %s, found %r"
                             % (", ".join(map(repr, self.objectives)), objective))
        self.solver = solver
        self.time_limit_s = time_limit_s
        self.patience_calls = patience_calls
        self.objective = objective
        if isinstance(round_s, bool) or not isinstance(round_s, (int, float)) or not 0 <= round_s < float("inf"):
            raise ValueError("round_s: expected a finite number of seconds >= 0, found %r" % (round_s,))
        self.round_s = float(round_s)
        if aging_s is not None and (isinstance(aging_s, bool) or not isinstance(aging_s, (int, float))
                                    or not 0 < aging_s < float("inf")):
            raise ValueError("aging_s: expected a finite number of seconds > 0 or None, found %r" % (aging_s,))
        self.aging_s = None if aging_s is None else float(aging_s)
        if not isinstance(fill_spare, bool):
            raise ValueError("fill_spare: expected True or False, found %r" % (fill_spare,))
        self.fill_spare_gpus = fill_spare
        if not isinstance(refuse_spare, bool) and refuse_spare != "auto":
            raise ValueError("refuse_spare: expected True, False or 'auto', found %r" % (refuse_spare,))
        if refuse_spare is True and (objective != "normalised_throughput" or fill_spare):
            raise ValueError("refuse_spare: Gavel passes no remaining steps to a policy named 'FIFO...' and hands "
                             "it no spare workers: expected objective='normalised_throughput' and "
                             "fill_spare=False, found objective=%r, fill_spare=%r" % (objective, fill_spare))
        self.refuse_spare = refuse_spare
        #: The name that takes Gavel's spare workers (its call passes the remaining steps where the objective
        #: needs them); ``refuse_spare="auto"`` switches between it and ``fifo_name`` after every answer.
        self.taking_name = self.name if objective == "completion_rate" else self.plain_name
        self.name = self.fifo_name if refuse_spare is True else self.taking_name
        self.names_answered = {}  # the name set after each answer -> how many answers (refuse_spare="auto")
        self.client = client or ElasticoptClient(url=url, command=command)
        self.last_response = None
        self.waited = {}  # request job id -> answers in a row without a share
        self.promoted = set()  # request job ids waited patience_calls answers (until they leave)
        self.boosted = {}  # request job id -> the value added to its options by the last build_request

    def build_request(self, throughputs, scale_factors, cluster_spec, num_steps_remaining=None,
                      priority_weights=None, times_since_start=None):
        """The elasticopt request of one ``get_allocation`` call and the job id of every request id.

        Without ``num_steps_remaining`` a job on worker type ``t`` is worth its normalised throughput
        ``throughput[t] / max_t throughput``; with it (the ``completion_rate`` objective), ``weight * (1 + age /
        aging_s) * throughput[t] / steps_remaining`` (jobs finished per second; ``weight`` from
        ``priority_weights``, default 1; ``age`` from ``times_since_start``, default 0), divided by the largest
        such value of the call.
        """
        types = [t for t in cluster_spec if int(cluster_spec[t]) > 0]
        rates_of = {}  # job id -> {type: value before normalisation}
        for job_id in throughputs:
            row = throughputs[job_id]
            if any(isinstance(row.get(t), (list, tuple)) for t in row):
                continue  # a space-sharing pair
            rates = dict((t, float(row.get(t, 0.0))) for t in types)  # numpy scalars as floats
            rates = dict((t, r) for t, r in rates.items() if r > 0 and math.isfinite(r))
            if num_steps_remaining is None:
                best = max(list(rates.values()) or [0.0])
                rates = dict((t, r / best) for t, r in rates.items())
            else:  # at least round_s of work left on its fastest type: a job about to finish does not make
                # the others' values vanish once divided by the largest value (they are integers in the model)
                floor = self.round_s * max(list(rates.values()) or [0.0])
                steps = max(float(num_steps_remaining.get(job_id, 0.0)), floor, 1e-9)
                weight = float((priority_weights or {}).get(job_id, 1.0))
                if self.aging_s is not None:  # (a negative or non-finite age counts as 0)
                    age = float((times_since_start or {}).get(job_id, 0.0))
                    weight *= 1.0 + (age / self.aging_s if 0 < age < float("inf") else 0.0)
                rates = dict((t, weight * r / steps) for t, r in rates.items())
            rates_of[job_id] = rates
        top = max([r for rates in rates_of.values() for r in rates.values() if math.isfinite(r)] or [1.0])
        jobs, ids = [], {}
        for job_id, rates in rates_of.items():
            k = int(scale_factors[job_id])
            options = [{"gpus": k, "pool": t, "value": r / top} for t, r in rates.items()
                       if r / top > 0 and k <= int(cluster_spec[t])]
            rid = str(job_id)
            if rid in ids:
                raise ElasticoptError("job ids must stay distinct as strings: %r" % (rid,))
            ids[rid] = job_id
            job = {"id": rid, "options": options or [{"gpus": max(k, 1), "value": 0.0}]}
            if not options:
                job["pools"] = []
            jobs.append(job)
        first = next((j for j in jobs if j["id"] in self.promoted and j.get("pools") != []), None)
        if first is not None:  # the oldest promoted job: worth more than all others together, so it runs
            boost = 1.0 + sum(max([o["value"] for o in j["options"]] or [0.0]) for j in jobs)
            for o in first["options"]:
                o["value"] += boost
        self.boosted = {} if first is None else {first["id"]: boost}  # (fill_spare compares values without it)
        doc = {
            "format": "elasticopt-request/1",
            "cluster": {"pools": dict((t, {"nodes": 1, "gpus_per_node": int(cluster_spec[t])}) for t in types)}
            if types else {"gpus": 0},
            "objective": "values",
            "solver": self.solver,
            "priority": [j["id"] for j in jobs],
            "jobs": jobs,
        }
        if self.time_limit_s is not None:
            doc["time_limit_s"] = self.time_limit_s
        return doc, ids

    def get_allocation(self, unflattened_throughputs, scale_factors, *state):
        """``{job_id: {worker_type: share}}`` with shares 0.0 or 1.0 (see the module docstring).

        Gavel calls it by the policy's name (``Scheduler._compute_allocation``): ``(throughputs,
        scale_factors, cluster_spec)`` for ``plain_name`` and ``fifo_name``; ``(throughputs, scale_factors, priority_weights,
        times_since_start, num_steps_remaining, cluster_spec)`` for ``name`` (the ``FinishTimeFairness``
        prefix).
        """
        if len(state) == 1:
            (cluster_spec,), remaining, weights, since_start = state, None, None, None
        elif len(state) == 4:
            weights, since_start, remaining, cluster_spec = state
        else:
            raise TypeError("get_allocation(throughputs, scale_factors, cluster_spec) or (throughputs, "
                            "scale_factors, priority_weights, times_since_start, num_steps_remaining, "
                            "cluster_spec): got %d arguments after scale_factors" % len(state))
        if self.objective != "completion_rate" or (remaining is None and self.refuse_spare == "auto"):
            remaining, weights, since_start = None, None, None  # ("auto" after an answer that ran every job:
        elif remaining is None:  # Gavel's plain call, valued by normalised throughput)
            raise TypeError("objective 'completion_rate' needs num_steps_remaining: Gavel passes it to a policy "
                            "whose name starts with 'FinishTimeFairness' (GavelPolicy.name); this one is named "
                            "%r" % (self.name,))
        out = dict((job_id, dict((t, 0.0) for t in cluster_spec)) for job_id in unflattened_throughputs)
        doc, ids = self.build_request(unflattened_throughputs, scale_factors, cluster_spec, remaining, weights,
                                      since_start)
        if not doc["jobs"]:
            return out
        resp = self.client.request(doc)
        self.last_response = resp
        pools = dict((rid, a["pool"] if a else None) for rid, a in resp["allocation"].items())
        fill = self.fill_spare_gpus
        if self.refuse_spare == "auto":  # every job that can run runs: nothing waits for Gavel's spare workers
            everyone = all(pools.get(j["id"]) is not None for j in doc["jobs"] if j.get("pools") != [])
            self.name = self.fifo_name if everyone else self.taking_name  # (read by this answer's rounds and
            self.names_answered[self.name] = self.names_answered.get(self.name, 0) + 1  # the next call)
            fill = fill and not everyone
        if fill:
            pools = self.fill_spare(doc, pools, scale_factors, cluster_spec, ids)
        for rid, pool in pools.items():
            if pool is not None:
                out[ids[rid]][pool] = 1.0
        self._count_waits(pools)
        return out

    def fill_spare(self, doc, pools, scale_factors, cluster_spec, ids):
        """The allocation Gavel's round runs: ``pools`` (request job id -> worker type or None) with the free GPUs
        given out as Gavel's mechanism would, but to the jobs the request values most there.

        Gavel's round (``Scheduler._schedule_jobs_on_workers_helper``) visits the types in
        :attr:`visit_order`; on each it schedules the jobs of positive share first, then hands the type's
        free workers to jobs not scheduled yet *whatever their share* (share 0 included, ordered by
        deficit), skipping only a job with zero throughput there or more GPUs than are free.  So GPUs the
        solve leaves free on a type visited early are taken by jobs it gave a later type -- a
        Recommendation job put on a p100 for being 2x slower on a v100 then runs on a spare v100 at half
        speed.  Here each visited type's free GPUs go, before Gavel can give them out, to the unscheduled
        jobs that lose least there: jobs waiting first, then in increasing order of ``1 / value there - 1 /
        value where the solve put them`` (with ``completion_rate`` values, the remaining time the job gains
        or loses by the move, in units of the call's shortest; with ``normalised_throughput``, its
        slowdown), each that fits moving there with share 1 (its GPUs on the later type are then free in
        their turn); a type whose free GPUs no job fits stays as Gavel would leave it.
        """
        boosted = self.boosted
        values = dict((j["id"], dict((o["pool"], o["value"] - boosted.get(j["id"], 0.0)) for o in j["options"]
                                     if "pool" in o and o["value"] - boosted.get(j["id"], 0.0) > 0))
                      for j in doc["jobs"] if j.get("pools") != [])
        rank = dict((rid, i) for i, rid in enumerate(doc["priority"]))
        out = dict(pools)
        scheduled = set()
        for t in self.visit_order:
            if int(cluster_spec.get(t, 0)) <= 0:
                continue
            holders = [rid for rid, pool in out.items() if pool == t]
            scheduled.update(holders)
            free = int(cluster_spec[t]) - sum(int(scale_factors[ids[rid]]) for rid in holders)
            gains = []
            for rid, options in values.items():
                if rid in scheduled or t not in options:
                    continue
                here = out.get(rid)
                if here not in options:  # waiting: it starts
                    cost = -float("inf")
                else:  # the time it loses: 1 / value is its remaining time (completion_rate) or slowdown
                    cost = 1.0 / options[t] - 1.0 / options[here]
                gains.append((cost, rank[rid], rid))
            for _, _, rid in sorted(gains):
                k = int(scale_factors[ids[rid]])
                if free <= 0:
                    break
                if k <= free:
                    out[rid] = t
                    scheduled.add(rid)
                    free -= k
        return out

    def _count_waits(self, allocation):
        """Answers in a row without a share, per job of this answer; promote those that waited patience_calls."""
        waited = dict((rid, 0 if a else self.waited.get(rid, 0) + 1) for rid, a in allocation.items())
        self.waited = waited
        self.promoted = set(rid for rid in self.promoted if rid in waited)  # a finished job leaves
        if self.patience_calls is not None:
            self.promoted.update(rid for rid, n in waited.items() if n >= self.patience_calls)


# ---- elasticopt client: identical in every drop-in file (a test checks it) ----------------------------------


class ElasticoptError(Exception):
    """The service answered with an error, or could not be reached."""


class ElasticoptClient(object):
    """Sends allocation requests to ``elasticopt serve`` and returns its responses.

    Parameters
    ----------
    url
        Base URL of ``elasticopt serve --http`` (e.g. ``http://127.0.0.1:8765``);
        default: the ``ELASTICOPT_URL`` environment variable.
    command
        Without a URL, the command that starts ``elasticopt serve --stdio`` as a
        subprocess (started on the first request, kept for the next ones);
        default: ``ELASTICOPT_COMMAND`` (split like a shell would), else
        ``elasticopt serve --stdio``.
    timeout_s
        Seconds to wait for one HTTP answer.
    """

    def __init__(self, url=None, command=None, timeout_s=600.0):
        self.url = url if url is not None else os.environ.get("ELASTICOPT_URL")
        if command is None:
            command = shlex.split(os.environ.get("ELASTICOPT_COMMAND", "elasticopt serve --stdio"))
        self.command = list(command)
        self.timeout_s = timeout_s
        self._proc = None
        self._lock = threading.Lock()

    def request(self, doc):
        """Send one request (a dict); return the response dict, or raise ElasticoptError if it is not ok."""
        data = json.dumps(doc, separators=(",", ":"), allow_nan=False).encode("utf-8")
        with self._lock:
            raw = self._http(data) if self.url else self._stdio(data)
        try:
            resp = json.loads(raw.decode("utf-8"))
        except ValueError:
            raise ElasticoptError("elasticopt serve answered something that is not JSON: %r" % raw[:200])
        if not resp.get("ok"):
            err = resp.get("error") or {}
            raise ElasticoptError("elasticopt serve: %s: %s (at %s: expected %s, found %s)" % (
                err.get("code"), err.get("message"), err.get("path"), err.get("expected"), err.get("found")))
        return resp

    def _http(self, data):
        req = urllib.request.Request(self.url.rstrip("/") + "/v1/solve", data=data,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as fh:
                return fh.read()
        except urllib.error.HTTPError as exc:  # error responses carry a JSON body
            return exc.read()
        except (urllib.error.URLError, OSError) as exc:
            raise ElasticoptError("cannot reach elasticopt serve at %s: %s" % (self.url, exc))

    def _stdio(self, data):
        if self._proc is None or self._proc.poll() is not None:
            try:
                self._proc = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            except OSError as exc:
                raise ElasticoptError("cannot start %r: %s (set ELASTICOPT_COMMAND or pass command=)"
                                      % (" ".join(self.command), exc))
        try:
            self._proc.stdin.write(data + b"\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        except OSError as exc:
            line, why = b"", str(exc)
        else:
            why = "it exited with code %s" % self._proc.poll()
        if not line:
            self.close()
            raise ElasticoptError("elasticopt serve (%s) stopped answering: %s" % (" ".join(self.command), why))
        return line

    def close(self):
        """Stop the subprocess, if one was started."""
        proc, self._proc = self._proc, None
        if proc is not None:
            for stream in (proc.stdin, proc.stdout):
                try:
                    stream.close()
                except OSError:
                    pass
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


# ---- end of the elasticopt client ----------------------------------------------------------------------------
