"""Hypothesis strategies that generate allocation problems (docs/design.md §2).

Importable by the project's tests and by users testing their own solvers::

    from hypothesis import given
    from elasticopt.testing.strategies import problems

    @given(problems())
    def test_my_solver(problem): ...

The strategies cover random sizes, running and queued jobs, the idle option,
preemption on and off, heavy ties (integer throughputs from a tiny set), jobs
with a single option, G = 0, jobs that cannot fit (k_min > G) and infeasible
problems (running jobs whose minimum GPUs exceed G).
"""

from __future__ import annotations

from hypothesis import strategies as st

from elasticopt.models.problem import DEFAULT_TYPE, OBJECTIVES, Cluster, Job, Pool, Problem, Running
from elasticopt.profiles.throughput import MeasuredThroughput
from elasticopt.profiles.efficiency import StatisticalEfficiency

__all__ = ["jobs", "problems", "tiny_problems", "feasible_problems", "general_problems", "tiny_general_problems"]


def _values(draw, keys: list[tuple]) -> dict[tuple, float]:
    """Caller values for most of ``keys`` (some left out: those options are then not offered)."""
    out = {}
    for key in keys:
        if draw(st.integers(0, 5)):
            out[key] = float(draw(st.sampled_from([-1, 0, 1, 2, 3, 5, 8])))
    return out


@st.composite
def jobs(draw, job_id: str, max_gpus: int = 8, max_options: int = 5, ties: bool | None = None) -> Job:
    """One job with measured points; sometimes running, tied, single-option or unfit."""
    ties = draw(st.booleans()) if ties is None else ties
    n_opt = draw(st.integers(1, max_options))
    points: dict[tuple[int, int], float] = {}
    for _ in range(n_opt):
        k = draw(st.integers(1, max(1, max_gpus)))
        local = draw(st.sampled_from([1, 2, 4, 8, 16]))
        if ties:
            t = float(draw(st.sampled_from([1, 2, 3, 4])) * k)
        else:
            t = draw(st.floats(0.5, 1000.0, allow_nan=False, allow_infinity=False))
        points[(k, k * local)] = t
    bs = sorted(b for _, b in points)
    ks = sorted(k for k, _ in points)
    # constraints that usually keep every point, sometimes cut some off (never all)
    keep = draw(st.sampled_from(sorted(points)))
    bmin = draw(st.sampled_from([b for b in bs if b <= keep[1]]))
    bmax = draw(st.sampled_from([b for b in bs if b >= keep[1]]))
    gmin = draw(st.sampled_from([k for k in ks if k <= keep[0]]))
    gmax = draw(st.one_of(st.none(), st.sampled_from([k for k in ks if k >= keep[0]])))
    max_local = draw(st.sampled_from(sorted({b // k for k, b in points if b // k >= keep[1] // keep[0]})))
    tp = MeasuredThroughput(points)
    job = Job(job_id, tp, bmin, bmax, max_local, gpus_min=gmin, gpus_max=gmax)
    feas = [(k, b) for k, b, _ in job.options()]
    running = None
    if draw(st.integers(0, 2)) == 0:
        k, b = draw(st.sampled_from(feas))
        running = Running(k, b)
    remaining = draw(st.floats(1.0, 1e7, allow_nan=False))
    weight = draw(st.sampled_from([1.0, 1.0, 2.0, 0.5]))
    phi = draw(st.sampled_from([None, 0.0, 3.0, 50.0, float("inf")]))  # statistical efficiency (goodput)
    eff = None if phi is None else StatisticalEfficiency(bmin, phi)
    values = _values(draw, [(DEFAULT_TYPE, k, b) for k, b in points])
    return Job(
        job_id, tp, bmin, bmax, max_local, gpus_min=gmin, gpus_max=gmax,
        running=running, remaining_samples=remaining, weight=weight, efficiency=eff, values=values,
    )


@st.composite
def problems(
    draw,
    max_jobs: int = 8,
    max_gpus: int = 16,
    max_options: int = 5,
    objectives: tuple[str, ...] = OBJECTIVES,
) -> Problem:
    """A random problem; may be infeasible (running jobs that cannot fit)."""
    G = draw(st.one_of(st.just(0), st.integers(0, max_gpus)))
    g = draw(st.sampled_from([1, 2, 4, 8]))
    n = draw(st.integers(0, max_jobs))
    ties = draw(st.booleans())
    js = [draw(jobs(f"j{i}", max_gpus=max(1, max_gpus // 2), max_options=max_options, ties=ties)) for i in range(n)]
    prio = None
    if n and draw(st.booleans()):
        prio = tuple(draw(st.permutations([j.id for j in js])))
    return Problem(
        cluster=Cluster(G, g),
        jobs=tuple(js),
        objective=draw(st.sampled_from(objectives)),
        allow_preemption=draw(st.booleans()),
        rescale_penalty=draw(st.sampled_from([0.0, 0.0, 0.05, 0.5, 2.0])),
        priority=prio,
    )


def tiny_problems() -> st.SearchStrategy[Problem]:
    """Problems small enough for :func:`elasticopt.testing.brute.brute_force`."""
    return problems(max_jobs=5, max_gpus=8, max_options=4)


def feasible_problems(**kw) -> st.SearchStrategy[Problem]:
    """Problems whose jobs may all idle (preemption allowed), hence always feasible."""
    from dataclasses import replace

    return problems(**kw).map(lambda p: replace(p, allow_preemption=True))


@st.composite
def pools(draw, max_types: int = 3, max_nodes: int = 3, max_per_node: int = 4) -> dict[str, Pool]:
    """1 to ``max_types`` GPU types, each a pool of nodes, sometimes fragmented (some GPUs not free)."""
    n_types = draw(st.integers(1, max_types))
    out = {}
    for t in range(n_types):
        nodes = draw(st.integers(1, max_nodes))
        g = draw(st.integers(1, max_per_node))
        free = None
        if draw(st.booleans()):
            free = tuple(
                tuple(sorted(draw(st.sets(st.integers(0, g - 1), max_size=g)))) for _ in range(nodes)
            )
        out[f"t{t}"] = Pool(nodes, g, free)
    return out


@st.composite
def general_jobs(draw, job_id: str, pool_map: dict[str, Pool], max_options: int = 4) -> Job:
    """A job with measured points per GPU type (some packed), maybe restricted, running, with caller values."""
    types = list(pool_map)
    allowed = draw(st.lists(st.sampled_from(types), min_size=1, max_size=len(types), unique=True))
    k_top = max(max(p.gpus_per_node * p.nodes for p in pool_map.values()), 1)
    models = {}
    keys = []
    for t in allowed:
        pts, packed = {}, {}
        for _ in range(draw(st.integers(1, max_options))):
            k = draw(st.integers(1, min(k_top, 8)))
            local = draw(st.sampled_from([1, 2, 4]))
            tp = float(draw(st.sampled_from([1, 2, 3, 5])) * k)
            if draw(st.integers(0, 2)) == 0:
                packed[(k, k * local)] = tp + float(draw(st.sampled_from([0, 1, 2])))
                keys.append((t, k, k * local, "packed"))
            else:
                pts[(k, k * local)] = tp
                keys.append((t, k, k * local))
        models[t] = MeasuredThroughput(pts, packed=packed)
    restrict = tuple(allowed) if draw(st.booleans()) else None
    job = Job(job_id, models, 1, 64, 64, types=restrict)
    running = None
    if draw(st.integers(0, 2)) == 0:
        opts = job.typed_options(Cluster(pools=pool_map))
        if opts:
            o = draw(st.sampled_from(opts))
            pool = pool_map[o.gpu_type]
            nodes = None
            if draw(st.booleans()):
                m = -(-o.gpus // pool.gpus_per_node)
                span = m if o.packed else draw(st.integers(1, min(pool.nodes, o.gpus)))
                span = min(span, pool.nodes)
                nodes = tuple(draw(st.permutations(range(pool.nodes)))[:span])
            running = Running(o.gpus, o.batch, o.gpu_type, nodes)
    weight = draw(st.sampled_from([1.0, 2.0]))
    return Job(job_id, models, 1, 64, 64, running=running, remaining_samples=1000.0, weight=weight,
               types=restrict, values=_values(draw, keys))


@st.composite
def general_problems(draw, max_jobs: int = 4, max_types: int = 3, max_nodes: int = 3, max_per_node: int = 4,
                     objectives: tuple[str, ...] = OBJECTIVES) -> Problem:
    """Problems on heterogeneous, possibly fragmented clusters with packed options (docs/design.md §2)."""
    pool_map = draw(pools(max_types, max_nodes, max_per_node))
    n = draw(st.integers(0, max_jobs))
    js = [draw(general_jobs(f"j{i}", pool_map)) for i in range(n)]
    return Problem(
        cluster=Cluster(pools=pool_map),
        jobs=tuple(js),
        objective=draw(st.sampled_from(objectives)),
        allow_preemption=draw(st.booleans()),
        rescale_penalty=draw(st.sampled_from([0.0, 0.5])),
    )


def tiny_general_problems() -> st.SearchStrategy[Problem]:
    """General problems small enough for :func:`elasticopt.testing.brute.brute_force`."""
    return general_problems(max_jobs=4, max_types=2, max_nodes=3, max_per_node=4)
