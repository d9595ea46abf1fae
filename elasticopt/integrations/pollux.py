"""PolluxPolicy: elasticopt as the allocation policy of Pollux's simulator (OSDI'21 artifact).

Drop-in
-------
Copy this one file next to the simulator's ``pollux.py`` (petuum/adaptdl,
branch ``osdi21-artifact``, folder ``simulator/``); it needs only the standard
library of Python >= 3.8.  Start ``elasticopt serve`` where elasticopt is
installed, and point the policy at it::

    from elasticopt_pollux import PolluxPolicy          # this file, renamed as you like
    policy = PolluxPolicy(command=["/opt/eo/bin/elasticopt", "serve", "--stdio"])
    # or PolluxPolicy(url="http://127.0.0.1:8765"), or set ELASTICOPT_COMMAND / ELASTICOPT_URL
    allocations, desired_nodes = policy.optimize(job_infos, node_infos, prev_allocs, node_template)

The simulator calls ``policy.optimize(job_infos, node_infos, prev_allocations,
node_template)`` at every scheduling interval and uses the returned
``{job_key: [node key per replica]}``.

Objective (what it optimises)
-----------------------------
Pollux's own objective (``pollux.py``, ``Problem._evaluate``), solved exactly
instead of by its genetic search: the power mean (``p_fairness``, Pollux: -1)
of every job's scaled speedup plus 1e-3,

    x_j = s_j * f_j / g + 1e-3,   maximise  sum_j -(x_j)^p  (p < 0; log x_j for p = 0; x_j^p for p > 0)

where ``s_j`` is the host's ``speedup_fn(num_nodes, num_replicas)`` at the
tightest layout (ceil(replicas / GPUs per node) nodes) relative to the job's
fair-share configuration (ceil(total GPUs / jobs) replicas on
ceil(nodes / total GPUs) nodes, as Pollux rebases its goodput each call),
``g`` the GPUs per node (Pollux scales by the dominant share times the node
count), and ``f_j = max(T_j - R_j * delta, 0) / (T_j + delta)`` (age T_j,
restarts R_j, ``restart_penalty`` delta = 30 s) on **every job whose
placement changes**, a queued job that starts included (Pollux:
``np.any(states != base_state)``); a running job that keeps its replica count
keeps its nodes (the service's keep-in-place step) and its speedup, unless a
packed job cannot be placed around it: then the fewest such jobs (one, else
two) move, and Pollux restarts them.  Those moves are priced after the solve
(``price_moves``, default): where an answer moves running jobs at their count,
the call also asks for the answers without the placed jobs' chosen counts and
returns the one worth most when every moved job carries its restart factor.  A job
without replicas contributes ``(1e-3)^p`` as in Pollux.  Ties go to the
oldest jobs (Pollux's FIFO order).

How it differs from Pollux's own policy
----------------------------------------
- exact over replica counts (Pollux: NSGA-II, 100 generations of 100 states, random); the moves a
  placement needs are priced after the solve, over at most 3 rounds of 4 alternatives (``price_moves``),
  not inside the search (Pollux's search prices every placement it tries);
- packed layouts only: a job is never spread over more nodes than it needs
  (Pollux's search may spread, and also limits a node to one distributed job);
- ``lexicographic=True`` gives the earlier variant: as many jobs running as
  possible first, then the power mean of the unscaled speedups.

What it cannot express
----------------------
- cluster autoscaling: ``desired_nodes`` is always the current number of nodes;
- nodes with different GPU counts (the model has one node size per pool);
- spread-out layouts (default): every option is offered packed (on the fewest
  nodes, where its speedup was priced), so a job never runs spread, even where
  a spread layout would let one more job run; ``spread=True`` also offers each
  count anywhere, priced at the widest layout (one replica per node, up to
  every node), a lower bound of its speedup wherever it lands;
- resources other than ``nvidia.com/gpu`` (CPU, memory requests are ignored).
"""

import json
import math
import os
import shlex
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

__all__ = ["PolluxPolicy", "ElasticoptClient", "ElasticoptError", "fairness_utility"]

GPU = "nvidia.com/gpu"



def _num_restarts(info):
    for name in ("num_restarts", "restarts"):
        value = getattr(info, name, None)
        if value is not None:
            return int(value)
    return 0


class PolluxPolicy(object):
    """Pollux's policy interface, answered by ``elasticopt serve``.

    Parameters
    ----------
    p_fairness
        Exponent p of the power mean of speedups (Pollux: -1).
    restart_penalty
        Re-allocation delay delta in seconds (Pollux: 30).
    solver
        elasticopt backend (``dp`` is exact and fast).
    time_limit_s
        Per-call solver time limit (default 10 s; None: none).  It bounds the service's placement fallback
        (an exact solve with node variables where the dp's optimum over GPU totals cannot be placed), which
        without a limit ran for more than 10 min on one 4-job call in Pollux's simulator; a call that ends
        at the limit without an allocation keeps every job where it is. The requests that price moves
        (``price_moves``) share it: none starts after it, each gets what is left of it.
    lexicographic
        False: Pollux's objective as it is (see the module docstring); True: the most running jobs first,
        then the power mean of unscaled speedups, the restart factor only on a running job's count change.
    spread
        Also offer every replica count on any nodes, priced at its widest layout (default: packed only).
    price_moves
        Price the moves of running jobs that keep their replica count (Pollux restarts them): where the
        answer moves some to place a packed job, the call also asks for the allocation without that job's
        chosen count (each such job alone, then all of them), and keeps the one whose value is highest once
        every moved job is valued with its restart factor (default; False: moves are not priced). Not in
        the ``lexicographic`` variant. Measured in Pollux's simulator: docs/integrations.md §3.
    url, command, client
        Where the service is: see :class:`ElasticoptClient` (or pass one).
    """

    def __init__(self, p_fairness=-1.0, restart_penalty=30.0, solver="dp", time_limit_s=10.0,
                 url=None, command=None, client=None, lexicographic=False, spread=False, price_moves=True):
        if p_fairness > 1:
            raise ValueError("p_fairness must be <= 1, got %r" % (p_fairness,))
        self.p_fairness = float(p_fairness)
        self.lexicographic = bool(lexicographic)
        self.spread = bool(spread)
        self.price_moves = bool(price_moves)
        self._kept_moved = {}  # job id -> (value at its current count kept in place, the same count moved)
        self.restart_penalty = float(restart_penalty)
        self.solver = solver
        self.time_limit_s = time_limit_s
        self.client = client or ElasticoptClient(url=url, command=command)
        self.last_response = None

    def _nodes(self, node_infos):
        keys = list(node_infos)
        sizes = set(int(node_infos[k].resources.get(GPU, 0)) for k in keys)
        if len(sizes) > 1:
            raise ElasticoptError("nodes with different GPU counts %s: the model has one node size" % sorted(sizes))
        return keys, (sizes.pop() if sizes else 0)

    def build_request(self, job_infos, node_infos, prev_allocs):
        """The elasticopt request of one ``optimize`` call (also useful to inspect or replay)."""
        node_keys, per_node = self._nodes(node_infos)
        index = dict((k, i) for i, k in enumerate(node_keys))
        total = per_node * len(node_keys)
        p, delta, lex = self.p_fairness, self.restart_penalty, self.lexicographic
        fair_k = max(-(-total // max(len(job_infos), 1)), 1)  # Pollux's fair-share replicas and nodes
        fair_n = max(-(-len(node_keys) // max(total, 1)), 1)
        jobs, lo, hi = [], None, None
        self._kept_moved = {}
        order = sorted(job_infos, key=lambda k: (-(getattr(job_infos[k], "age", 0) or 0), str(k)))
        for key in order:
            info = job_infos[key]
            prev = [r for r in (prev_allocs.get(key) or []) if r in index]
            cur = len(prev)
            age = float(getattr(info, "age", 0) or 0)
            factor = max(age - _num_restarts(info) * delta, 0.0) / (age + delta) if age + delta > 0 else 0.0
            options = []
            ks = list(range(max(int(info.min_replicas), 1), min(int(info.max_replicas), total) + 1))
            spans = [-(-k // per_node) for k in ks]  # the tightest layout of k replicas
            if self.spread:  # also anywhere, priced at the widest layout (one replica per node up to all nodes)
                wide = [(k, min(k, len(node_keys))) for k, n in zip(ks, spans) if min(k, len(node_keys)) > n]
                ks, spans = ks + [k for k, _ in wide], spans + [n for _, n in wide]
            speeds = speedups_at(info.speedup_fn, spans + [min(fair_n, fair_k)], ks + [fair_k]) if ks else []
            base = speeds.pop() if speeds else 1.0
            for k, nodes, s in zip(ks, spans, speeds):
                if lex:
                    if cur and k != cur:
                        s *= factor
                    if not (s > 0 and math.isfinite(s)):
                        continue
                    u = fairness_utility(s, p)
                else:
                    if k != cur:
                        s *= factor  # Pollux: every change of placement restarts the job, a start included
                    x = (s / base if base > 0 else s) / per_node
                    if not math.isfinite(x) or x < 0:
                        continue
                    u = pollux_utility(x, p)
                    if k == cur and nodes == -(-k // per_node):  # the value if a packed job makes it move
                        self._kept_moved[str(key)] = (u, pollux_utility(x * factor, p))
                lo = u if lo is None or u < lo else lo
                hi = u if hi is None or u > hi else hi
                options.append({"gpus": k, "nodes": nodes, "value": u})
            job = {"id": str(key), "options": options or [{"gpus": max(cur, 1), "value": 0.0}]}
            if not options:  # nothing it may run on: it can only idle
                job["pools"] = []
            if cur:
                counts = {}
                for r in prev:
                    counts[index[r]] = counts.get(index[r], 0) + 1
                job["running"] = {"gpus": cur, "nodes": sorted([n, c] for n, c in counts.items())}
                job["preemptible"] = bool(getattr(info, "preemptible", True))
            jobs.append(job)
        if lex:
            idle = idle_utility(lo, hi, len(jobs)) if p <= 0 and lo is not None else 0.0
        else:
            idle = pollux_utility(0.0, p)
        for job in jobs:
            job["idle_value"] = idle
        doc = {
            "format": "elasticopt-request/1",
            "cluster": {"pools": {"gpu": {"nodes": len(node_keys), "gpus_per_node": per_node}}},
            "objective": "values",
            "solver": self.solver,
            "priority": [job["id"] for job in jobs],  # ties: oldest job first (Pollux's FIFO order)
            "jobs": jobs,
        }
        if self.time_limit_s is not None:
            doc["time_limit_s"] = self.time_limit_s
        return doc, node_keys

    def optimize(self, job_infos, node_infos, prev_allocs, node_template=None):
        """One scheduling decision.

        Returns
        -------
        (allocations, desired_nodes)
            ``{job_key: [node key per replica]}`` (sorted by node; [] = no
            replicas) and the number of nodes wanted (always the current one).
        """
        if not job_infos:
            return {}, len(node_infos)
        by_id = dict((str(k), k) for k in job_infos)
        if len(by_id) != len(job_infos):
            raise ElasticoptError("job keys must stay distinct as strings")
        start = time.monotonic()
        doc, node_keys = self.build_request(job_infos, node_infos, prev_allocs)
        resp = self.client.request(doc)
        if self.price_moves and resp.get("ok") and resp.get("allocation"):
            deadline = None if self.time_limit_s is None else start + float(self.time_limit_s)
            resp = self._priced_moves(doc, resp, deadline)
        self.last_response = resp
        if resp["status"] not in ("optimal", "feasible", "limit"):
            raise ElasticoptError("no allocation: %s %s" % (resp["status"], resp.get("message", "")))
        if not resp.get("allocation"):  # the time limit ran out before any allocation: nothing moves
            return dict((key, list(prev_allocs.get(key) or [])) for key in job_infos), len(node_infos)
        allocations = {}
        for jid, key in by_id.items():
            a = resp["allocation"].get(jid)
            replicas = []
            if a:
                for node, count in a["nodes"]:
                    replicas.extend([node_keys[node]] * count)
            allocations[key] = replicas
        return allocations, len(node_infos)

    def _moves(self, doc, resp):
        """(value lost by the running jobs the answer moves at their count, the jobs it placed anew)."""
        alloc, lost, placed = resp["allocation"], 0.0, []
        for job in doc["jobs"]:
            a, run = alloc.get(job["id"]), job.get("running")
            if not a or not a.get("moved"):
                continue
            if run and a["gpus"] == run["gpus"] and job["id"] in self._kept_moved:
                kept, moved = self._kept_moved[job["id"]]
                lost += kept - moved
            else:
                placed.append(job["id"])
        return lost, placed

    def _priced_moves(self, doc, resp, deadline=None, rounds=3, width=3):
        """The answer, or one without some placed jobs' chosen counts, whichever is worth most with moves priced.

        Each round asks again without one placed job's chosen count (each of the first ``width`` such jobs
        alone, then all of them) and goes on from the try worth most; it stops when that try moves no running job.
        ``deadline`` (``time.monotonic()``): the call's time limit, which the tries share (each gets what is left
        of it as its own ``time_limit_s``; none starts after it).
        """
        lost, placed = self._moves(doc, resp)
        if lost <= 0 or resp.get("objective_value") is None:
            return resp
        best, best_value = resp, resp["objective_value"] - lost
        for _ in range(rounds):
            tries = [[jid] for jid in placed[:width]] + ([placed] if len(placed) > 1 else [])
            step = None
            for drop in tries:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return best
                other = self._without_counts(doc, resp, drop)
                if other is None:
                    continue
                if left is not None:
                    other["time_limit_s"] = left
                try:
                    again = self.client.request(other)
                except ElasticoptError:  # e.g. a job left with nothing it may run: this try has no answer
                    continue
                if not again.get("allocation") or again.get("objective_value") is None:
                    continue
                again_lost, again_placed = self._moves(other, again)
                value = again["objective_value"] - again_lost
                if step is None or value > step[0]:
                    step = (value, other, again, again_lost, again_placed)
            if step is None:
                break
            value, doc, resp, lost, placed = step
            if value > best_value + 1e-12 * max(1.0, abs(best_value)):
                best, best_value = resp, value
            if lost <= 0:
                break
        return best

    @staticmethod
    def _without_counts(doc, resp, drop):
        """``doc`` without the chosen replica count of each job in ``drop``; None if one of them may not idle."""
        jobs = []
        for job in doc["jobs"]:
            if job["id"] in drop:
                k = resp["allocation"][job["id"]]["gpus"]
                options = [o for o in job["options"] if o["gpus"] != k]
                if not options:
                    if job.get("running") and not job.get("preemptible", True):
                        return None
                    job = dict(job, options=[{"gpus": k, "value": 0.0}], pools=[])  # it can only idle
                else:
                    job = dict(job, options=options)
            jobs.append(job)
        return dict(doc, jobs=jobs)


POLLUX_EPSILON = 1e-3  # Pollux adds it to every scaled speedup before the power mean


def pollux_utility(x, p):
    """A job's term of Pollux's power mean at scaled speedup ``x`` >= 0 (sum of terms: larger is better)."""
    if p < 0:
        return -((x + POLLUX_EPSILON) ** p)
    if p == 0:
        return math.log(max(x, POLLUX_EPSILON))
    return (x + POLLUX_EPSILON) ** p


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
