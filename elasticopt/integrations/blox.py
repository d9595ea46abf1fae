"""BloxPolicy and BloxPlacement: elasticopt as Blox's scheduling and placement stages.

Drop-in
-------
Copy this one file next to Blox's ``schedulers/`` (it needs only
the standard library of Python >= 3.8; ``gpu_df`` is read through pandas'
own ``to_dict("records")`` when it is a DataFrame), start ``elasticopt serve``
where elasticopt is installed, and use both stages together in the
scheduler's loop::

    from elasticopt_blox import BloxPolicy, BloxPlacement     # this file
    scheduling_policy = BloxPolicy(command=["/opt/eo/bin/elasticopt", "serve", "--stdio"])
    placement_policy = BloxPlacement()
    new_job_schedule = scheduling_policy.schedule(job_state, cluster_state)
    to_suspend, to_launch = placement_policy.place(job_state, cluster_state, new_job_schedule)

These are the calls of Blox's scheduler loop (msr-fiddle/blox); like
Blox's own policies, the stages read ``job_state.active_jobs`` (the
``job_dict``), ``cluster_state.server_map`` (``node_info``) and
``cluster_state.gpu_df``; ``schedule_jobs`` / ``place_jobs`` take those
three directly.  ``job_dict[job_id]`` holds the job's ``num_GPUs`` (its
request; the largest count for an elastic job) and ``submit_time``;
``gpu_df`` has one row per GPU with ``GPU_ID``, ``Local_GPU_ID``,
``Node_ID``, ``IP_addr``, ``IN_USE`` and ``JOB_IDS`` (the job on it), and
``GPU_type`` where the cluster has types.  ``schedule`` returns Blox's
``{"job_order": [(job_id, job), ...], "run_all_jobs": False}`` (jobs that
run first, then the rest, each group in the tie order below) plus ``"elasticopt"``:
the GPU count and GPU ids chosen per job; ``place`` returns
``(jobs_to_terminate, {job_id: [GPU ids]})`` as Blox's placement does.

Objective, and how it differs from Blox's own policies
------------------------------------------------------
Without a speedup function: the most jobs running at their requested GPU
count (a knapsack, solved exactly: no head-of-line blocking).  With
``speedup_fn(job_id, job_info, num_gpus)``: elastic, 1 .. ``num_GPUs`` GPUs
per job, Pollux's power-mean fairness of speedups (``p_fairness``), the
number of running jobs maximised first.  Ties (``order``) go as Blox's
``Fifo`` orders its jobs: ``job_priority`` (Blox raises a job that waited
too long), then oldest; ``order="attained_service"`` breaks them as Blox's
``Las`` does (``job_priority``, then least
``tracked_metrics["attained_service"]``, then oldest), and so suspends a
running job for a waiting one with less service.  When more jobs wait than
fit (on Blox's simulator every job asks for one GPU, so the count is the
same for every choice) the tie order alone decides which run: there, at
load 7 on three windows of 301 tracked jobs, oldest first gave Fifo's mean
JCTs and least attained service Las' (1.2 % and 0.7 % higher on two
windows, 0.2 % lower on the third; 0.5 % higher over the three), as Blox's
windowed mean counts the waits each policy moves onto tracked jobs
(docs/integrations.md §5).  Blox's
``Fifo`` and ``Las`` order the jobs and its placement launches them in
that order while GPUs last, so a large job at the head of the order can
leave GPUs idle that smaller jobs behind it could use; here the set of
running jobs is chosen as a whole, and a running job keeps its GPUs when
it stays in the set.

Blox's loop calls ``schedule`` twice per round (``las_scheduler.py``: before
and after ``prune_jobs``); a call whose request equals the previous one (no
job finished in between) is answered from the previous answer, without a
second request (``requests_sent``, ``repeats_answered`` count them).

What it cannot express
----------------------
- a running job that must be moved is terminated and relaunched (Blox's
  suspend/resume), not migrated in place;
- GPU types (one type per call: the policy does not yet read Blox's types; the
  service and SiaPolicy / GavelPolicy do); nodes with different GPU
  counts; Blox's per-job placement preferences (every job is packed on the
  fewest nodes the free GPUs allow).
"""

import json
import math
import os
import shlex
import subprocess
import sys
import threading
import urllib.error
import urllib.request

__all__ = ["BloxPolicy", "BloxPlacement", "ElasticoptClient", "ElasticoptError", "fairness_utility"]

ORDERS = ("arrival", "attained_service")  # BloxPolicy's tie orders: Blox's Fifo (default), Blox's Las



def gpu_rows(gpu_df):
    """The rows of Blox's ``gpu_df`` as dicts (a pandas DataFrame or any iterable of dicts).

    A DataFrame is read column by column (``Series.tolist``: Python scalars, NaN kept, as ``to_dict("records")``
    gives them): 0.09 ms for Blox's 128 GPUs, against 6.7 ms for ``to_dict("records")`` in Blox's pandas 1.3,
    which the drop-in called twice per ``schedule`` call (two calls a round) and once in ``place``."""
    if hasattr(gpu_df, "columns") and hasattr(gpu_df, "to_dict"):
        cols = list(gpu_df.columns)
        return [dict(zip(cols, row)) for row in zip(*[gpu_df[c].tolist() for c in cols])]
    return [dict(r) for r in gpu_df]


def _cluster(gpu_df, node_info):
    """Node ids in order, their GPU ids, the GPU type, and each job's current GPU ids."""
    nodes, holder = {}, {}
    rows = gpu_rows(gpu_df)
    for row in rows:
        nodes.setdefault(row["Node_ID"], []).append(row["GPU_ID"])
        job = row.get("JOB_IDS")
        if row.get("IN_USE") and job is not None and not (isinstance(job, float) and math.isnan(job)):
            holder.setdefault(job, []).append(row["GPU_ID"])
    node_ids = list(nodes)
    sizes = set(len(g) for g in nodes.values())
    if len(sizes) > 1:
        raise ElasticoptError("nodes with different GPU counts %s: the model has one node size" % sorted(sizes))
    types = set(str(r["GPU_type"]) for r in rows if r.get("GPU_type") is not None)  # placement.py
    types |= set(str(node_info[n]["gpu_type"]) for n in node_ids if (node_info.get(n) or {}).get("gpu_type"))
    types = types or {"gpu"}
    if len(types) > 1:
        raise ElasticoptError("GPU types %s: BloxPolicy handles one GPU type" % sorted(types))
    return node_ids, dict((n, sorted(g)) for n, g in nodes.items()), (types.pop() if types else "gpu"), holder


class BloxPolicy(object):
    """Blox's scheduling stage (``schedule``), answered by ``elasticopt serve``.

    Parameters
    ----------
    speedup_fn
        None (jobs run at their requested count) or ``(job_id, job_info,
        num_gpus) -> speedup`` (elastic, 1 .. num_GPUs).
    p_fairness
        Exponent of the power mean of speedups (elastic only).
    gpus_key, arrival_key
        The job_dict fields with the GPU request and the submission time.
    order
        Ties between allocations: ``"arrival"`` (Blox's ``Fifo`` order:
        ``job_priority``, then oldest) or ``"attained_service"`` (Blox's
        ``Las``: ``job_priority``, then least
        ``tracked_metrics["attained_service"]``, then oldest); missing
        fields count as 0.
    solver, time_limit_s
        elasticopt backend and per-call limit.
    url, command, client
        Where the service is: see :class:`ElasticoptClient` (or pass one).
    """

    def __init__(self, speedup_fn=None, p_fairness=-1.0, gpus_key="num_GPUs", arrival_key="submit_time",
                 order="arrival", solver="dp", time_limit_s=None, url=None, command=None, client=None):
        if order not in ORDERS:
            raise ElasticoptError("BloxPolicy(order=%r): expected one of %s" % (order, ", ".join(ORDERS)))
        self.speedup_fn = speedup_fn
        self.p_fairness = float(p_fairness)
        self.gpus_key = gpus_key
        self.arrival_key = arrival_key
        self.order = order
        self.solver = solver
        self.time_limit_s = time_limit_s
        self.client = client or ElasticoptClient(url=url, command=command)
        self.last_response = None
        self.requests_sent = 0  # requests that reached the service
        self.repeats_answered = 0  # calls answered from the previous answer (same state: Blox's second call)
        self._last = None  # (the request as sorted JSON, its response)

    def _options(self, job_id, info, cap):
        want = int(info[self.gpus_key])
        if self.speedup_fn is None:
            return [{"gpus": want, "value": 1.0}] if want <= cap else []
        out = []
        for k in range(1, min(want, cap) + 1):
            s = float(self.speedup_fn(job_id, info, k))
            if s > 0 and math.isfinite(s):
                out.append({"gpus": k, "value": fairness_utility(s, self.p_fairness)})
        return out

    def tie_key(self, job_id, info):
        """The sort key of a job in the tie order (``order``): smaller runs first on ties."""
        served = 0.0
        if self.order == "attained_service":
            served = float((info.get("tracked_metrics") or {}).get("attained_service", 0) or 0)
        return (info.get("job_priority", 0), served, info.get(self.arrival_key, 0), str(job_id))

    def build_request(self, job_dict, node_info, gpu_df):
        """The request, node ids in order, GPU ids per node, and the current GPU ids per job."""
        node_ids, gpus_of, gpu_type, holder = _cluster(gpu_df, node_info)
        per_node = len(gpus_of[node_ids[0]]) if node_ids else 0
        index = dict((n, i) for i, n in enumerate(node_ids))
        node_of = dict((g, n) for n in node_ids for g in gpus_of[n])
        order = sorted(job_dict, key=lambda j: self.tie_key(j, job_dict[j]))
        jobs, values = [], []
        for jid in order:
            options = self._options(jid, job_dict[jid], per_node * len(node_ids))
            values.extend(o["value"] for o in options)
            job = {"id": str(jid), "options": options or [{"gpus": 1, "value": 0.0}]}
            if not options:
                job["pools"] = []
            held = holder.get(jid)
            if held:
                counts = {}
                for g in held:
                    counts[index[node_of[g]]] = counts.get(index[node_of[g]], 0) + 1
                job["running"] = {"gpus": len(held), "nodes": sorted([n, c] for n, c in counts.items())}
                job["preemptible"] = True
            jobs.append(job)
        idle = 0.0
        if self.speedup_fn is not None and self.p_fairness <= 0 and values:
            idle = idle_utility(min(values), max(values), len(jobs))
        for job in jobs:
            job["idle_value"] = idle
        doc = {
            "format": "elasticopt-request/1",
            "cluster": {"pools": {gpu_type: {"nodes": len(node_ids), "gpus_per_node": per_node}}},
            "objective": "values",
            "solver": self.solver,
            "priority": [j["id"] for j in jobs],  # ties: the tie order (``order``)
            "jobs": jobs,
        }
        if self.time_limit_s is not None:
            doc["time_limit_s"] = self.time_limit_s
        return doc, node_ids, gpus_of, holder

    def schedule(self, job_state, cluster_state):
        """Blox's call ``scheduling_policy.schedule(job_state, cluster_state)``.

        As Blox's ``SchedulingPolicy.copy_arguments`` wrapper: the stage reads
        ``job_state.active_jobs``, ``cluster_state.server_map`` and
        ``cluster_state.gpu_df`` (not modified) and answers with
        :meth:`schedule_jobs`.
        """
        return self.schedule_jobs(job_state.active_jobs, cluster_state.server_map, cluster_state.gpu_df)

    def schedule_jobs(self, job_dict, node_info, gpu_df, global_placement_policy=None):
        """Blox's ``schedule_info`` for the unwrapped arguments of a policy's ``schedule``: job order (runners
        first) as ``[(job_id, job), ...]``, ``run_all_jobs``, and elasticopt's placement."""
        if not job_dict:
            return {"job_order": [], "run_all_jobs": False, "elasticopt": {"gpus": {}, "gpu_ids": {}}}
        by_id = dict((str(j), j) for j in job_dict)
        if len(by_id) != len(job_dict):
            raise ElasticoptError("job ids must stay distinct as strings")
        doc, node_ids, gpus_of, holder = self.build_request(job_dict, node_info, gpu_df)
        key = json.dumps(doc, sort_keys=True, separators=(",", ":"))
        if self._last is not None and self._last[0] == key:  # the same jobs, GPUs and holders: the same answer
            resp = self._last[1]
            self.repeats_answered += 1
        else:
            resp = self.client.request(doc)
            self.requests_sent += 1
            self._last = (key, resp)
        self.last_response = resp
        kept, chosen = {}, {}
        for rid, a in resp["allocation"].items():
            if a:
                chosen[by_id[rid]] = a
                if not a["moved"]:
                    kept[by_id[rid]] = sorted(holder[by_id[rid]])
        taken = set(g for ids in kept.values() for g in ids)
        gpu_ids = dict(kept)
        for jid, a in chosen.items():
            if jid in kept:
                continue
            ids = []
            for node, count in a["nodes"]:
                free = [g for g in gpus_of[node_ids[node]] if g not in taken]
                ids.extend(free[:count])
                taken.update(free[:count])
            gpu_ids[jid] = ids
        order = [by_id[j["id"]] for j in doc["jobs"]]  # the tie order
        order = [j for j in order if j in chosen] + [j for j in order if j not in chosen]
        return {
            "job_order": [(j, job_dict[j]) for j in order],
            "run_all_jobs": False,
            "elasticopt": {"gpus": dict((j, a["gpus"]) for j, a in chosen.items()), "gpu_ids": gpu_ids},
        }


class BloxPlacement(object):
    """Blox's placement stage for a :class:`BloxPolicy` schedule: ``place(...) -> (terminate, launch)``."""

    def place(self, job_state, cluster_state, new_job_schedule, **kwargs):
        """Blox's call ``placement_policy.place(job_state, cluster_state, new_job_schedule)``.

        As Blox's ``JobPlacement.copy_arguments`` wrapper: reads
        ``job_state.active_jobs``, ``cluster_state.server_map`` and
        ``cluster_state.gpu_df`` and answers with :meth:`place_jobs`.
        """
        return self.place_jobs(job_state.active_jobs, new_job_schedule, cluster_state.server_map,
                               cluster_state.gpu_df, **kwargs)

    def place_jobs(self, active_jobs, new_job_schedule, node_info, gpu_df, **kwargs):
        """Jobs to terminate (idle now, or moved) and ``{job_id: [GPU ids]}`` to launch."""
        chosen = new_job_schedule["elasticopt"]["gpu_ids"]
        current = {}
        for row in gpu_rows(gpu_df):
            job = row.get("JOB_IDS")
            if row.get("IN_USE") and job is not None and not (isinstance(job, float) and math.isnan(job)):
                current.setdefault(job, []).append(row["GPU_ID"])
        terminate = [j for j in current if sorted(current[j]) != sorted(chosen.get(j, []))]
        launch = dict((j, list(ids)) for j, ids in chosen.items() if sorted(current.get(j, [])) != sorted(ids))
        return terminate, launch


def fairness_utility(speedup, p):
    """Per-job utility whose sum maximises the power mean of speedups with exponent ``p`` (speedup > 0)."""
    if p < 0:
        return -(speedup ** p)
    if p == 0:
        return math.log(speedup)
    return speedup ** p


def speedups_at(fn, nodes, replicas):
    """``[fn(nodes[i], replicas[i])]``: one vectorised call where ``fn`` takes arrays, else one call per point.

    The hosts' ``SpeedupFunction`` (AdaptDL's ``simulator/speedup.py``, Sia's copy) is numpy-vectorised but
    asserts on array comparisons (``num_nodes > 0``), so lists would fail: the points go in as arrays of the
    host's own numpy, which the host has already imported (this file never imports it).  Without numpy, or
    where the vectorised call fails, one call per point with plain ints (the hosts accept scalars).
    """
    np = sys.modules.get("numpy")
    if np is not None and len(nodes) > 0:
        try:
            out = fn(np.asarray(nodes, dtype=np.int64), np.asarray(replicas, dtype=np.int64))
            if getattr(out, "shape", None) == (len(nodes),):
                return [float(x) for x in out]
        except Exception:  # not vectorised: the per-point calls below raise the host's real errors
            pass
    return [float(fn(int(n), int(k))) for n, k in zip(nodes, replicas)]

def idle_utility(lo, hi, n_jobs):
    """A finite utility of "no GPUs" below every trade of one running job for others.

    With ``n_jobs`` jobs whose option utilities lie in [lo, hi], an idle value
    below ``lo - n_jobs * (hi - lo) - 1`` makes every allocation with fewer idle
    jobs better than every allocation with more: the optimum first runs as many
    jobs as possible, then maximises the sum of utilities of those that run.
    """
    return lo - n_jobs * (hi - lo) - 1.0


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
