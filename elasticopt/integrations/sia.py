"""SiaPolicy: elasticopt as the allocation policy of Sia's simulator (SOSP'23 artifact).

Drop-in
-------
Copy this one file next to the simulator's ``sia.py`` (siasosp23/artifacts,
folder ``sia-simulator/``; it needs only the standard library of Python >=
3.8) as e.g. ``elasticopt_sia.py``, and register it before the simulator
imports ``sia`` elsewhere (``multi_simulator.py`` and ``cluster.py`` do
``from sia import SiaPolicy``)::

    import sia, elasticopt_sia
    sia.SiaPolicy = elasticopt_sia.SiaPolicy        # then run multi_simulator.py as usual

or build it yourself where the simulator builds Sia's::

    policy = elasticopt_sia.SiaPolicy(command=["/opt/eo/bin/elasticopt", "serve", "--stdio"], p_fairness=-0.5)

Sia's ``Cluster`` chooses job objects, ``JobInfo`` s and how it applies
allocations by ``isinstance(policy, sia.SiaPolicy)`` (``cluster.py``) and
asserts on any other class, so this class **subclasses the host's
SiaPolicy** when the host's ``sia`` module is importable (it is imported
when this file is; the base is ``object`` otherwise, e.g. in a bare
interpreter).  It overrides every method the simulator calls
(``populate_valid_configs``, ``optimize``) and never calls the host's
``__init__``.  It accepts the host constructor's keywords (``lambda_a``,
``lambda_n``, ``project_throughputs``, ``share_max_replicas``,
``enable_bsz_tuning``, ...).

Sia's shapes (``cluster.py``): ``node_infos`` is ``{cluster: {node_idx:
NodeInfo}}``, one cluster per GPU type; a job's ``speedup_fn``,
``min_replicas``, ``max_replicas``, ``scale_unit`` are dicts by cluster (a
speedup function is None where the job has no profile yet), with
``category`` (``adaptive``, ``scale-gpus``, ``rigid``), ``scaling_underway``,
``cluster_throughputs`` and ``cluster_throughput_ratios``; answers (and
``prev_allocations``) are ``{job: (cluster, [node_idx per GPU])}``, or
``(None, ())`` for a job without GPUs, one entry per job.

Objective (what it optimises)
-----------------------------
Sia's objective, solved exactly: every job's value on GPU type c with k GPUs
is Sia's normalised goodput ``g_c(k) / g_min`` (the host's own
``speedup_fn.get_goodput`` at the tightest layout, ``g_min`` the job's
smallest goodput over its options, so its slowest one-unit option is 1),
times Sia's re-allocation factor ``max(T - R delta_m, 0) / (T + delta_m)``
(1 while T < delta_m) on every option but the one it runs, with Sia's
per-model restart penalty ``delta_m`` (``sia.get_restart_penalty``: 25 s
deepspeech2 ... 250 s imagenet), raised to Sia's ``p`` (default -0.5); the
sum over jobs is maximised (Sia: minimises the sum of ``g^p``) with the
number of running jobs first (lexicographic; Sia: a soft no-allocation
penalty ``lambda_n``, see ``no_alloc``).  Like Sia:

- a GPU type without a profile for the job gets **projected** goodputs:
  those of a profiled type times Sia's learnt type ratio
  (``cluster_throughput_ratios[c][d]``, Sia's ``--project_throughputs``;
  this class projects by default), so unprofiled types are explored instead
  of left idle; a job with no profile anywhere gets one scale unit on each
  type, valued alike (Sia), ties going to the slowest type (``first_unit``,
  below);
- ``scale_unit`` (pipeline stages): counts are multiples of it, the speedup
  is asked for ``k // scale_unit`` replicas;
- ``category == "rigid"`` jobs get exactly their GPU count on one type,
  valued by their throughputs there (``cluster_throughput_ratios``), the
  slowest type worth the GPU count;
- a job with ``scaling_underway`` (checkpoint-restore in flight) keeps its
  allocation and may not be preempted;
- ``share_max_replicas``: the largest replica bound over types holds on all.

How it differs from Sia's own policy
------------------------------------
- exact (Sia: CBC on a MIP to a 1e-4 gap) over Sia's config list (1, 2, 4
  GPUs, then whole nodes; ``sia_configs=False``: every count), each on the
  fewest nodes; the service keeps a job whose count and type are unchanged on
  its nodes;
- a job with no profile anywhere starts on the slowest type with a free GPU
  (Sia: one unit valued alike on every type, the tie left to its MIP solver,
  which in the logs mostly picks a slow type too; ``first_unit``).  It is
  profiled there at the least cost, and its first profile, projected by the
  type ratios, moves it to a fast type at 2 GPUs, a gain large enough to pay
  the restart; started on the fastest type, it stays there at 1 GPU until a
  fast GPU frees (Sia's workload-3: cifar10 jobs 994 s against 884 s, mean
  JCT 3.2 % behind Sia; with this rule ahead, docs/integrations.md);
- running as many jobs as possible comes first (``no_alloc=None``); with
  ``no_alloc=lambda_n`` it is Sia's soft penalty instead;
- the projection source is the profiled type with the most profiled
  replicas (Sia: the first profiled type; ``projection_source="first"``); goodputs are not rounded to 2
  decimals (unless ``round_decimals=2``) nor clipped at 3000 as Sia's matrix is;
- nodes of one cluster with different GPU counts and non-GPU resources
  cannot be expressed.
"""

import importlib
import json
import math
import os
import shlex
import subprocess
import sys
import threading
import urllib.error
import urllib.request

__all__ = ["SiaPolicy", "ElasticoptClient", "ElasticoptError", "fairness_utility", "restart_penalty_of"]

GPU = "nvidia.com/gpu"

#: How a job with no profile on any type values its first scale unit per type (``SiaPolicy(first_unit=...)``).
FIRST_UNITS = ("slowest", "alike", "fastest")

#: Which profiled type prices an unprofiled one (``SiaPolicy(projection_source=...)``).
PROJECTION_SOURCES = ("widest", "first")

# Sia's per-model restart penalties in seconds (sia-simulator/sia.py, get_restart_penalty), used where the
# host's function cannot be imported; the first name contained in the job name wins, else the default.
RESTART_PENALTIES_S = (("deepspeech", 25.0), ("imagenet", 250.0), ("cifar", 30.0), ("bert", 120.0),
                       ("yolov3", 45.0))


def _host_module():
    """The host's ``sia`` module (already imported, or importable), or None.

    The name can be changed with ``ELASTICOPT_SIA_HOST_MODULE`` (empty: never look for the host)."""
    name = os.environ.get("ELASTICOPT_SIA_HOST_MODULE", "sia")
    if not name:
        return None
    mod = sys.modules.get(name)
    if mod is None:
        try:
            mod = importlib.import_module(name)
        except Exception:  # not there (a bare interpreter), or its own imports fail: stand alone
            return None
    return mod


def _host_base(mod):
    """The host's own SiaPolicy class (never one of this file's, if the host's name was already replaced)."""
    cls = getattr(mod, "SiaPolicy", None) if mod is not None else None
    if not isinstance(cls, type):
        return object
    for klass in cls.__mro__:
        if "_elasticopt_dropin" not in vars(klass):
            return klass
    return object


_HOST = _host_module()
HostSiaPolicy = _host_base(_HOST)


def restart_penalty_of(job_name, default=30.0):
    """Sia's restart penalty of a job in seconds: the host's ``get_restart_penalty`` when importable."""
    fn = getattr(_HOST, "get_restart_penalty", None)
    if callable(fn):
        try:
            return float(fn(str(job_name)))
        except Exception:
            pass
    for part, seconds in RESTART_PENALTIES_S:
        if part in str(job_name):
            return seconds
    return float(default)


def _per_cluster(value, cluster, default):
    """Sia keeps replica bounds, scale units and speedup functions per cluster (dicts); a plain value holds for all."""
    if isinstance(value, dict):
        return value.get(cluster, default)
    return default if value is None else value


def _positive(x):
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if x > 0 and math.isfinite(x) else None


def goodputs_at(fn, nodes, replicas, base=1.0):
    """Raw goodputs of ``fn`` at the points: the host's ``get_goodput`` (float32 arrays, as Sia calls it) where it
    has one, else its speedups times ``base``."""
    get = getattr(fn, "get_goodput", None)
    np = sys.modules.get("numpy")
    if callable(get) and np is not None and len(nodes) > 0:
        try:
            out = get(np.asarray(nodes, dtype=np.float32), np.asarray(replicas, dtype=np.float32))
            if getattr(out, "shape", None) == (len(nodes),):
                return [float(x) for x in out]
        except Exception:
            pass
    return [s * base for s in speedups_at(fn, nodes, replicas)]


class SiaPolicy(HostSiaPolicy):
    """Sia's policy interface, answered by ``elasticopt serve`` (a subclass of the host's SiaPolicy when importable).

    Parameters
    ----------
    p_fairness
        Exponent p of Sia's objective (Sia: -0.5).
    restart_penalty
        Re-allocation delay in seconds of jobs whose model has no per-model penalty (Sia: 30).
    per_model_penalty
        Use Sia's per-model restart penalties (``restart_penalty_of``) instead of one constant.
    restart_penalties_s
        ``{name part: seconds}`` over Sia's per-model penalties: the first part contained in a job's name gives
        its delta (e.g. the simulator's own re-scale times, ``applications.py``: ``{"yolov3": 80, "cifar": 50}``);
        None (default): Sia's ``get_restart_penalty``.
    project_throughputs
        Price a GPU type the job has no profile on from a profiled one (Sia's ``--project_throughputs``).
    share_max_replicas
        The largest replica bound over types holds on every type (Sia's ``--share_max_replicas``).
    no_alloc
        None: run as many jobs as possible first; a number: Sia's soft penalty ``lambda_n`` of a job without
        GPUs in units of the objective (the utility of idling is ``-no_alloc`` for p < 0).
    sia_configs
        True (default): offer Sia's config list (1, 2, 4 GPUs, then whole nodes: ``CONFIGS_4GPU`` /
        ``CONFIGS_8GPU``); False: every count (measured 2.6 % worse mean JCT in Sia's simulator: jobs pack
        the fastest pool with odd counts and leave the others idle, docs/integrations.md).
    first_unit
        A job with no profile on any type is offered one scale unit on each type, valued: ``"slowest"``
        (default) alike, ties going to the slower type (the value times ``1 + 1e-3 (t_max - t) / t_max``,
        ``t`` the type's one-GPU throughput); ``"alike"`` alike, ties as the solver breaks them (Sia);
        ``"fastest"`` by its one-GPU throughput per type.
    first_by_throughput
        Older spelling of ``first_unit``: True is ``"fastest"``, False ``"alike"``; None (default) leaves
        ``first_unit``.
    projection_source
        Which profiled type prices an unprofiled one (``project_throughputs``): ``"widest"`` (default) the one
        profiled at the most replicas; ``"first"`` the first profiled one in the host's order (Sia's
        ``_compute_goodputs_v2``).
    round_decimals
        None (default): each option's ``s ** p`` as computed.  An integer d: as Sia's matrix holds it,
        rounded to d decimals (Sia: ``np.round(..., 2)``, half to even), so that options Sia cannot tell
        apart tie; a tie between a running job's current option and another goes to the current one (its
        value raised by a quarter of the last digit; Sia leaves such ties to CBC).
    solver
        elasticopt backend.
    time_limit_s
        Per-call solver time limit (default 10 s; None: none).  It bounds the service's placement fallback
        (an exact solve with node variables where the dp's optimum over GPU totals cannot be placed); a call
        that ends at the limit without an allocation keeps every job where it is.
    url, command, client
        Where the service is: see :class:`ElasticoptClient` (or pass one).
    **host_options
        The host constructor's other keywords (``lambda_a``, ``lambda_n``, ``migrate_penalty``,
        ``sched_interval``, ``enable_bsz_tuning``): accepted, kept in ``host_options``, not used.
    """

    _elasticopt_dropin = True

    def __init__(self, p_fairness=-0.5, restart_penalty=30.0, solver="dp", time_limit_s=10.0,
                 url=None, command=None, client=None, per_model_penalty=True, project_throughputs=True,
                 share_max_replicas=False, no_alloc=None, sia_configs=True, first_unit="slowest",
                 first_by_throughput=None, restart_penalties_s=None, round_decimals=None,
                 projection_source="widest", **host_options):
        if p_fairness > 1:
            raise ValueError("p_fairness must be <= 1, got %r" % (p_fairness,))
        self.p_fairness = float(p_fairness)
        self.restart_penalty = float(restart_penalty)
        self.per_model_penalty = bool(per_model_penalty)
        table = dict(restart_penalties_s or {})
        if any(not isinstance(k, str) or not k or not isinstance(v, (int, float)) or isinstance(v, bool)
               or not (v >= 0 and math.isfinite(v)) for k, v in table.items()):
            raise ValueError("restart_penalties_s: expected {name part: seconds >= 0}, got %r" % (restart_penalties_s,))
        self.restart_penalties_s = tuple((k, float(v)) for k, v in table.items())
        self.project_throughputs = bool(project_throughputs)
        self.share_max_replicas = bool(share_max_replicas)
        self.no_alloc = None if no_alloc is None else float(no_alloc)
        self.sia_configs = bool(sia_configs)
        if first_by_throughput is not None:
            first_unit = "fastest" if first_by_throughput else "alike"
        if first_unit not in FIRST_UNITS:
            raise ValueError("first_unit must be one of %s, got %r" % (", ".join(FIRST_UNITS), first_unit))
        self.first_unit = first_unit
        if round_decimals is not None and (not isinstance(round_decimals, int) or isinstance(round_decimals, bool)
                                           or not 0 <= round_decimals <= 12):
            raise ValueError("round_decimals: expected None or an integer 0..12, got %r" % (round_decimals,))
        self.round_decimals = round_decimals
        if projection_source not in PROJECTION_SOURCES:
            raise ValueError("projection_source must be one of %s, got %r"
                             % (", ".join(PROJECTION_SOURCES), projection_source))
        self.projection_source = projection_source
        self.host_options = dict(host_options)
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

    def penalty_of(self, key):
        """The restart penalty delta (s) of job ``key``."""
        for part, seconds in self.restart_penalties_s:
            if part in str(key):
                return seconds
        return restart_penalty_of(key, self.restart_penalty) if self.per_model_penalty else self.restart_penalty

    def realloc_factor(self, key, info):
        """Sia's re-allocation factor of a job: max(T - R delta, 0) / (T + delta); 1 while T < delta
        (rigid jobs: while their attained service is below delta)."""
        delta = self.penalty_of(key)
        age = float(getattr(info, "age", 0) or 0)
        young = float(getattr(info, "attained_service", 0) or 0) if _is_rigid(info) else age
        if young < delta:
            return 1.0
        restarts = int(getattr(info, "num_restarts", 0) or 0)
        return max(age - restarts * delta, 0.0) / (age + delta)

    def job_options(self, key, info, keys, per_node):
        """``[(cluster, gpus, nodes, raw goodput)]`` of one job, before normalisation and restart factors."""
        if _is_rigid(info):
            return self._rigid_options(info, keys, per_node)
        fns = info.speedup_fn if isinstance(info.speedup_fn, dict) else dict((c, info.speedup_fn) for c in keys)
        mins = dict((c, int(_per_cluster(info.min_replicas, c, 0) or 0)) for c in keys)
        maxs = dict((c, int(_per_cluster(info.max_replicas, c, 1) or 1)) for c in keys)
        if self.share_max_replicas:
            lo_all, hi_all = min(mins.values()), max(maxs.values())
            mins, maxs = dict((c, lo_all) for c in keys), dict((c, hi_all) for c in keys)
        units = dict((c, max(int(_per_cluster(getattr(info, "scale_unit", 1), c, 1) or 1), 1)) for c in keys)
        tputs = getattr(info, "cluster_throughputs", None)
        tputs = tputs if isinstance(tputs, dict) else {}
        ratios = getattr(info, "cluster_throughput_ratios", None)
        ratios = ratios if isinstance(ratios, dict) else {}
        profiled = [c for c in keys if fns.get(c) is not None]
        # the projection source: the profiled type with the most profiled replicas (its bound is the largest),
        # or the first profiled one in the host's order (Sia)
        source = None
        if profiled and self.projection_source == "first":
            source = next((c for c in fns if c in profiled), profiled[0])
        elif profiled:
            source = max(profiled, key=lambda c: (int(_per_cluster(info.max_replicas, c, 1) or 1),
                                                  -profiled.index(c)))
        out = []
        for c in keys:
            g, su = per_node[c], units[c]
            if g <= 0:
                continue
            cap = g * len(keys[c])
            lo_r, hi_r = max(mins[c], 1), max(maxs[c], 1)
            fn = fns.get(c)
            if fn is None and (source is None or not self.project_throughputs):
                # no profile to price it from: one scale unit (see first_unit)
                if lo_r <= 1 and su <= cap:
                    out.append((c, su, -(-su // g), self._first_value(c, su, keys, tputs)))
                continue
            rs = [r for r in range(lo_r, hi_r + 1) if r * su <= cap and
                  (not self.sia_configs or r * su in (1, 2, 4) or (r * su) % g == 0)]
            if not rs:
                continue
            ks = [r * su for r in rs]
            spans = [-(-k // g) for k in ks]
            if fn is not None:
                vals = goodputs_at(fn, spans, rs, _positive(tputs.get(c)) or 1.0)
            else:  # projected from the source type: its goodput at the same replicas, times Sia's type ratio
                d = source
                gd, sud = per_node[d], units[d]
                d_spans = [max(-(-(r * sud) // gd), 1) if gd > 0 else 1 for r in rs]
                d_spans = [min(n, r) for n, r in zip(d_spans, rs)]
                ratio = _positive(ratios.get(c, {}).get(d) if isinstance(ratios.get(c), dict) else None)
                if ratio is None:
                    tc, td = _positive(tputs.get(c)), _positive(tputs.get(d))
                    ratio = tc / td if tc and td else 1.0
                base = _positive(tputs.get(d)) or 1.0
                vals = [v * ratio for v in goodputs_at(fns[d], d_spans, rs, base)]
            out.extend((c, k, n, v) for k, n, v in zip(ks, spans, vals))
        return out

    def _first_value(self, cluster, unit, keys, tputs):
        """The value of one scale unit on ``cluster`` of a job with no profile anywhere (``first_unit``)."""
        own = _positive(tputs.get(cluster))
        if self.first_unit == "fastest":
            return own or 1.0
        if self.first_unit == "alike":
            return float(unit)
        known = [t for t in (_positive(tputs.get(c)) for c in keys) if t]
        top = max(known) if known else 1.0
        return float(unit) * (1.0 + 1e-3 * (top - (own or top)) / top)

    def _rigid_options(self, info, keys, per_node):
        k = max(int(v) for v in (info.max_replicas.values() if isinstance(info.max_replicas, dict)
                                  else [info.max_replicas]))
        tputs = getattr(info, "cluster_throughput_ratios", None)  # Sia: a rigid job's throughputs per type
        tputs = tputs if isinstance(tputs, dict) else {}
        known = [_positive(tputs.get(c)) for c in keys]
        slowest = min([t for t in known if t] or [1.0])
        out = []
        for c in keys:
            g = per_node[c]
            if g <= 0 or k > g * len(keys[c]):
                continue
            t = _positive(tputs.get(c)) or slowest
            out.append((c, k, -(-k // g), k * t / slowest))  # Sia: the slowest type is worth the GPU count
        return out

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
            factor = self.realloc_factor(key, info) if cur else 1.0
            raw = self.job_options(key, info, keys, per_node)
            pinned = bool(cur and getattr(info, "scaling_underway", False))
            if pinned:  # checkpoint-restore in flight: Sia keeps its allocation
                raw = [o for o in raw if o[0] == cur_cluster and o[1] == cur] or \
                    [(cur_cluster, cur, -(-cur // max(per_node[cur_cluster], 1)), 1.0)]
            known = [v for _, _, _, v in raw if v > 0 and math.isfinite(v)]
            gmin = min(known) if known else 1.0
            options = []
            for c, k, nodes, v in raw:
                s = v / gmin
                moved = cur and not pinned and (k != cur or c != cur_cluster)
                if moved:
                    s *= factor
                if not (s > 0 and math.isfinite(s)):
                    continue
                u = fairness_utility(s, p)
                if self.round_decimals is not None:  # Sia's matrix: s ** p rounded (np.round: half to even)
                    step = 10.0 ** -self.round_decimals
                    u = round(u / step) * step + (0.25 * step if cur and not moved else 0.0)
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
                job["preemptible"] = bool(getattr(info, "preemptible", True)) and not pinned
            jobs.append(job)
        if self.no_alloc is not None:
            idle = -self.no_alloc if p < 0 else 0.0
        else:
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
        """One scheduling decision: ``{job: (cluster, [node_idx per GPU])}``, ``(None, ())`` for no GPUs."""
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
        if not resp.get("allocation"):  # the time limit ran out before any allocation: nothing moves
            return dict((key, prev_allocations.get(key) or (None, ())) for key in job_infos)
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


def _is_rigid(info):
    return getattr(info, "category", None) == "rigid"


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
