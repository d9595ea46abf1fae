"""SiaPolicy: elasticopt as the allocation policy of Sia's simulator (SOSP'23 artifact).

Drop-in
-------
Copy this one file next to the simulator's ``sia.py`` (siasosp23/artifacts,
folder ``sia-simulator/``; it needs only the standard library of Python >=
3.8), start ``elasticopt serve`` where elasticopt is installed, and use it
where the simulator builds its ``SiaPolicy``::

    from elasticopt_sia import SiaPolicy                 # this file
    policy = SiaPolicy(command=["/opt/eo/bin/elasticopt", "serve", "--stdio"])
    allocations = policy.optimize(job_infos, node_infos, prev_allocations)

Sia's shapes (``cluster.py``): ``node_infos`` is ``{cluster: {node_idx:
NodeInfo}}``, one cluster per GPU type, ``NodeInfo.resources``
{"nvidia.com/gpu": n}; a job's ``speedup_fn``, ``min_replicas`` and
``max_replicas`` are dicts by cluster (a speedup function may be None: the
job was not profiled there yet, and gets one replica); allocations (and
``prev_allocations``) are ``{job: (cluster, [node_idx per replica])}``, or
``(None, ())`` for a job without GPUs, and every job gets an entry.  Sia's
simulator calls ``policy.populate_valid_configs(...)`` once; this policy
accepts and ignores it (it reads the nodes on every call).

Objective
---------
Sia's shape, solved exactly as a separable sum: the job's utility on
cluster c with k replicas is ``-(s)^p`` (p < 0; ``log s`` for p = 0,
``s^p`` for 0 < p <= 1) with ``s`` = its speedup there at the tightest
layout, times Sia's re-allocation factor ``max(T - R delta, 0) / (T +
delta)`` (1 while the job is younger than delta) when a running job changes
cluster or replica count; the number of running jobs is maximised first
(idle has speedup 0), oldest first on ties.  Speedups of different clusters
are put on one scale with the job's ``cluster_throughputs`` (Sia's
one-replica throughput per cluster) when the job has them, else taken as
they are.

What it cannot express
----------------------
- nodes of one cluster with different GPU counts; rigid jobs' fixed GPU
  counts beyond ``min_replicas`` = ``max_replicas``; non-GPU resources;
- Sia's own config list (1, 2, 4, 8, then whole nodes): every count from
  min to max replicas is offered, packed on the fewest nodes (where its
  speedup was priced), so a job never runs spread.
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

__all__ = ["SiaPolicy", "ElasticoptClient", "ElasticoptError", "fairness_utility"]

GPU = "nvidia.com/gpu"



def _per_cluster(value, cluster, default):
    """Sia keeps replica bounds and speedup functions per cluster (dicts); a plain value holds for all."""
    if isinstance(value, dict):
        return value.get(cluster, default)
    return default if value is None else value


def _scales(info, clusters):
    """Factor per cluster putting the job's speedups on one scale: Sia's one-replica throughput per cluster
    (``job_info.cluster_throughputs``) over the slowest one's; 1 where the job has none."""
    tputs = getattr(info, "cluster_throughputs", None)
    if not isinstance(tputs, dict):
        return dict((c, 1.0) for c in clusters)
    known = [float(tputs[c]) for c in clusters if c in tputs and float(tputs[c]) > 0]
    base = min(known) if known else 1.0
    return dict((c, float(tputs[c]) / base if c in tputs and float(tputs[c]) > 0 else 1.0) for c in clusters)


class SiaPolicy(object):
    """Sia's policy interface, answered by ``elasticopt serve``.

    Parameters
    ----------
    p_fairness
        Exponent p of the power mean of speedups (Sia: -0.5).
    restart_penalty
        Re-allocation delay delta in seconds (Sia: 30 by default).
    solver, time_limit_s
        elasticopt backend and per-call limit.
    url, command, client
        Where the service is: see :class:`ElasticoptClient` (or pass one).
    """

    def __init__(self, p_fairness=-0.5, restart_penalty=30.0, solver="dp", time_limit_s=None,
                 url=None, command=None, client=None):
        if p_fairness > 1:
            raise ValueError("p_fairness must be <= 1, got %r" % (p_fairness,))
        self.p_fairness = float(p_fairness)
        self.restart_penalty = float(restart_penalty)
        self.solver = solver
        self.time_limit_s = time_limit_s
        self.client = client or ElasticoptClient(url=url, command=command)
        self.last_response = None

    def populate_valid_configs(self, cluster_num_nodes, cluster_num_gpus, cluster_max_physical_nnodes=None):
        """Sia's set-up call: nothing to do (the nodes are read from ``node_infos`` on every call)."""

    def _pools(self, node_infos):
        """Clusters in order, their node keys, GPUs per node."""
        keys, sizes = {}, {}
        for cluster, nodes in node_infos.items():
            keys[cluster] = list(nodes)
            s = set(int(info.resources.get(GPU, 0)) for info in nodes.values())
            if len(s) > 1:
                raise ElasticoptError("nodes of cluster %r have different GPU counts %s" % (cluster, sorted(s)))
            sizes[cluster] = s.pop() if s else 0
        return keys, sizes

    def _factor(self, info):
        age = float(getattr(info, "age", 0) or 0)
        if age < self.restart_penalty:
            return 1.0  # Sia: a job younger than one restart is not penalised
        restarts = int(getattr(info, "num_restarts", 0) or 0)
        return max(age - restarts * self.restart_penalty, 0.0) / (age + self.restart_penalty)

    def build_request(self, job_infos, node_infos, prev_allocations):
        """The elasticopt request of one ``optimize`` call, and ``(cluster, node key)`` of every global node index."""
        keys, per_node = self._pools(node_infos)
        node_keys = [(c, k) for c in keys for k in keys[c]]
        index = dict((nk, i) for i, nk in enumerate(node_keys))
        p = self.p_fairness
        jobs, lo, hi = [], None, None
        order = sorted(job_infos, key=lambda k: (-(getattr(job_infos[k], "age", 0) or 0), str(k)))
        for key in order:
            info = job_infos[key]
            cur_cluster, cur_nodes = (prev_allocations.get(key) or (None, ()))
            prev = [(cur_cluster, r) for r in (cur_nodes or ()) if (cur_cluster, r) in index]
            cur = len(prev)
            factor = self._factor(info) if cur else 1.0
            scales = _scales(info, keys)
            options = []
            for c in keys:
                g = per_node[c]
                fns = info.speedup_fn
                fn = fns.get(c) if isinstance(fns, dict) else fns
                lo_k = max(int(_per_cluster(info.min_replicas, c, 0)), 1)
                hi_k = max(int(_per_cluster(info.max_replicas, c, 0)), 1)
                if fn is None:  # not profiled on this cluster yet: Sia offers one replica
                    ks, speeds = ([1], [1.0]) if lo_k <= 1 and g > 0 else ([], [])
                    spans = [1] * len(ks)
                else:
                    ks = list(range(lo_k, min(hi_k, g * len(keys[c])) + 1))
                    spans = [-(-k // g) for k in ks]  # the tightest layout of k replicas
                    speeds = speedups_at(fn, spans, ks)
                for k, nodes, s in zip(ks, spans, speeds):
                    s *= scales[c]
                    if cur and (k != cur or c != cur_cluster):
                        s *= factor
                    if not (s > 0 and math.isfinite(s)):
                        continue
                    u = fairness_utility(s, p)
                    lo = u if lo is None or u < lo else lo
                    hi = u if hi is None or u > hi else hi
                    options.append({"gpus": k, "nodes": nodes, "pool": str(c), "value": u})
            job = {"id": str(key), "options": options or [{"gpus": max(cur, 1), "value": 0.0}]}
            if not options:
                job["pools"] = []
            if cur:
                counts = {}
                for r in prev:
                    counts[index[r]] = counts.get(index[r], 0) + 1
                job["running"] = {"gpus": cur, "pool": str(cur_cluster),
                                  "nodes": sorted([n, c] for n, c in counts.items())}
                job["preemptible"] = bool(getattr(info, "preemptible", True))
            jobs.append(job)
        idle = idle_utility(lo, hi, len(jobs)) if p <= 0 and lo is not None else 0.0
        for job in jobs:
            job["idle_value"] = idle
        doc = {
            "format": "elasticopt-request/1",
            "cluster": {"pools": dict((str(c), {"nodes": len(keys[c]), "gpus_per_node": per_node[c]}) for c in keys)},
            "objective": "values",
            "solver": self.solver,
            "priority": [job["id"] for job in jobs],  # ties: oldest job first
            "jobs": jobs,
        }
        if self.time_limit_s is not None:
            doc["time_limit_s"] = self.time_limit_s
        return doc, node_keys

    def optimize(self, job_infos, node_infos, prev_allocations):
        """One scheduling decision: ``{job: (cluster, [node_idx per replica])}``, ``(None, ())`` for no GPUs."""
        if not job_infos:
            return {}
        by_id = dict((str(k), k) for k in job_infos)
        if len(by_id) != len(job_infos):
            raise ElasticoptError("job keys must stay distinct as strings")
        if len(set(str(c) for c in node_infos)) != len(node_infos):
            raise ElasticoptError("cluster names must stay distinct as strings")
        doc, node_keys = self.build_request(job_infos, node_infos, prev_allocations)
        resp = self.client.request(doc)
        self.last_response = resp
        if resp["status"] not in ("optimal", "feasible", "limit"):
            raise ElasticoptError("no allocation: %s %s" % (resp["status"], resp.get("message", "")))
        allocations = {}
        for jid, key in by_id.items():
            a = resp["allocation"].get(jid)
            if not a:
                allocations[key] = (None, ())
                continue
            replicas, cluster = [], None
            for node, count in a["nodes"]:
                cluster, node_key = node_keys[node]
                replicas.extend([node_key] * count)
            allocations[key] = (cluster, replicas)
        return allocations


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
