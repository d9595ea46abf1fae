"""SiaPolicy: elasticopt as the allocation policy of a Sia-style simulator (GPU types per node).

Drop-in
-------
Copy this one file next to the simulator's policies (it needs only the
standard library of Python >= 3.8), start ``elasticopt serve`` where
elasticopt is installed, and use it where the simulator builds its policy::

    from elasticopt_sia import SiaPolicy                 # this file
    policy = SiaPolicy(command=["/opt/eo/bin/elasticopt", "serve", "--stdio"])
    allocations, desired_nodes = policy.optimize(job_infos, node_infos, prev_allocs)

The interface is Pollux's with GPU types: ``node_infos[key].resources``
{"nvidia.com/gpu": n} plus the node's GPU type (``node_info.gpu_type``, else
the node key's prefix before its last ``-``, as in ``"t4-3"``; or pass
``gpu_type_of(key, info)``), and a job's ``speedup_fn`` either a dict
``{gpu_type: fn(num_nodes, num_replicas)}`` or one function
``fn(gpu_type, num_nodes, num_replicas)``.  Allocations are
``{job_key: [node key per replica]}``, all replicas of a job on one type.

Objective
---------
Sia's shape, solved exactly as a separable sum: the job's utility on type t
with k replicas is ``-(s)^p`` (p < 0; ``log s`` for p = 0, ``s^p`` for
0 < p <= 1) with ``s`` = its speedup on that type at the tightest layout,
times the re-allocation factor ``(T - R delta) / (T + delta)`` when a running
job changes type or replica count; the number of running jobs is maximised
first (idle has speedup 0), oldest first on ties.  Speedups of different
types must be on one scale (e.g. relative to one GPU of the slowest type).

What it cannot express
----------------------
- nodes of one type with different GPU counts; cluster autoscaling
  (``desired_nodes`` is the current count); non-GPU resources;
- spread-out layouts: every option is offered packed (on the fewest nodes,
  where its speedup was priced), so a job never runs spread, even where a
  spread layout would let one more job run.
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



def default_gpu_type(key, info):
    """The node's GPU type: ``info.gpu_type`` if set, else the key's prefix before its last "-"."""
    gpu_type = getattr(info, "gpu_type", None)
    if gpu_type:
        return str(gpu_type)
    return str(key).rsplit("-", 1)[0]


def _speedups(info, gpu_type, nodes, replicas):
    fn = info.speedup_fn
    if isinstance(fn, dict):
        return speedups_at(fn[gpu_type], nodes, replicas) if gpu_type in fn else [0.0] * len(nodes)
    return [float(fn(gpu_type, n, k)) for n, k in zip(nodes, replicas)]


class SiaPolicy(object):
    """Sia-style policy interface (GPU types per node), answered by ``elasticopt serve``.

    Parameters
    ----------
    p_fairness
        Exponent p of the power mean of speedups.
    restart_penalty
        Re-allocation delay delta in seconds.
    gpu_type_of
        ``(node_key, node_info) -> type`` (default :func:`default_gpu_type`).
    solver, time_limit_s
        elasticopt backend and per-call limit.
    url, command, client
        Where the service is: see :class:`ElasticoptClient` (or pass one).
    """

    def __init__(self, p_fairness=-0.5, restart_penalty=30.0, gpu_type_of=default_gpu_type, solver="dp",
                 time_limit_s=None, url=None, command=None, client=None):
        if p_fairness > 1:
            raise ValueError("p_fairness must be <= 1, got %r" % (p_fairness,))
        self.p_fairness = float(p_fairness)
        self.restart_penalty = float(restart_penalty)
        self.gpu_type_of = gpu_type_of
        self.solver = solver
        self.time_limit_s = time_limit_s
        self.client = client or ElasticoptClient(url=url, command=command)
        self.last_response = None

    def _pools(self, node_infos):
        """Pools in order of first appearance: {type: [node keys]}, {type: GPUs per node}."""
        pools, sizes = {}, {}
        for key, info in node_infos.items():
            t = self.gpu_type_of(key, info)
            pools.setdefault(t, []).append(key)
            sizes.setdefault(t, set()).add(int(info.resources.get(GPU, 0)))
        for t, s in sizes.items():
            if len(s) > 1:
                raise ElasticoptError("nodes of type %r have different GPU counts %s" % (t, sorted(s)))
        return pools, dict((t, s.pop()) for t, s in sizes.items())

    def build_request(self, job_infos, node_infos, prev_allocs):
        """The elasticopt request of one ``optimize`` call, and the node key of every global node index."""
        pools, per_node = self._pools(node_infos)
        node_keys = [k for t in pools for k in pools[t]]
        index = dict((k, i) for i, k in enumerate(node_keys))
        type_of = dict((k, t) for t in pools for k in pools[t])
        p, delta = self.p_fairness, self.restart_penalty
        jobs, lo, hi = [], None, None
        order = sorted(job_infos, key=lambda k: (-(getattr(job_infos[k], "age", 0) or 0), str(k)))
        for key in order:
            info = job_infos[key]
            prev = [r for r in (prev_allocs.get(key) or []) if r in index]
            cur = len(prev)
            cur_type = type_of[prev[0]] if prev else None
            age = float(getattr(info, "age", 0) or 0)
            restarts = getattr(info, "num_restarts", None) or getattr(info, "restarts", None) or 0
            factor = (age - int(restarts) * delta) / (age + delta) if cur else 1.0
            options = []
            for t in pools:
                g = per_node[t]
                ks = list(range(max(int(info.min_replicas), 1), min(int(info.max_replicas), g * len(pools[t])) + 1))
                spans = [-(-k // g) for k in ks]  # the tightest layout of k replicas
                for k, nodes, s in zip(ks, spans, _speedups(info, t, spans, ks)):
                    if cur and (k != cur or t != cur_type):
                        s *= factor
                    if not (s > 0 and math.isfinite(s)):
                        continue
                    u = fairness_utility(s, p)
                    lo = u if lo is None or u < lo else lo
                    hi = u if hi is None or u > hi else hi
                    options.append({"gpus": k, "nodes": nodes, "pool": t, "value": u})
            job = {"id": str(key), "options": options or [{"gpus": max(cur, 1), "value": 0.0}]}
            if not options:
                job["pools"] = []
            if cur:
                counts = {}
                for r in prev:
                    counts[index[r]] = counts.get(index[r], 0) + 1
                job["running"] = {"gpus": cur, "pool": cur_type,
                                  "nodes": sorted([n, c] for n, c in counts.items())}
                job["preemptible"] = bool(getattr(info, "preemptible", True))
            jobs.append(job)
        idle = idle_utility(lo, hi, len(jobs)) if p <= 0 and lo is not None else 0.0
        for job in jobs:
            job["idle_value"] = idle
        doc = {
            "format": "elasticopt-request/1",
            "cluster": {"pools": dict((t, {"nodes": len(pools[t]), "gpus_per_node": per_node[t]}) for t in pools)},
            "objective": "values",
            "solver": self.solver,
            "priority": [job["id"] for job in jobs],  # ties: oldest job first
            "jobs": jobs,
        }
        if self.time_limit_s is not None:
            doc["time_limit_s"] = self.time_limit_s
        return doc, node_keys

    def optimize(self, job_infos, node_infos, prev_allocs, node_template=None):
        """One scheduling decision: ``({job_key: [node key per replica]}, desired_nodes)``."""
        if not job_infos:
            return {}, len(node_infos)
        by_id = dict((str(k), k) for k in job_infos)
        if len(by_id) != len(job_infos):
            raise ElasticoptError("job keys must stay distinct as strings")
        doc, node_keys = self.build_request(job_infos, node_infos, prev_allocs)
        resp = self.client.request(doc)
        self.last_response = resp
        if resp["status"] not in ("optimal", "feasible", "limit"):
            raise ElasticoptError("no allocation: %s %s" % (resp["status"], resp.get("message", "")))
        allocations = {}
        for jid, key in by_id.items():
            a = resp["allocation"].get(jid)
            replicas = []
            if a:
                for node, count in a["nodes"]:
                    replicas.extend([node_keys[node]] * count)
            allocations[key] = replicas
        return allocations, len(node_infos)


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
