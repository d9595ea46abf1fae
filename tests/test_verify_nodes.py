"""``verify``'s set-based check of a placement (``_nodes_plainly_ok``) and the GPU-by-GPU reference that words
what is wrong (``_check_nodes``) give the same verdict: random placements on pools with busy GPUs, valid ones and
ones broken in every way the reference names (a node of another type or none, a GPU not free, a GPU twice in a
job or across jobs, the wrong count, a packed job spread).  A node named other than ``TYPE/INDEX`` (``a/01``, which
the reference reads as node 1) is left to the reference: then the set check says "not shown"."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from elasticopt.models.problem import Cluster, Pool
from elasticopt.models.problem import Option
from elasticopt.solvers.verify import _check_nodes, _nodes_plainly_ok

CLUSTER = Cluster(pools={"a": Pool(3, 4, free=((0, 1, 2, 3), (1, 3), (0, 1, 2, 3))), "b/x": Pool(2, 2)})


@st.composite
def placements(draw):
    """Jobs each given GPUs of one type's free ones (disjoint), then perhaps one thing broken."""
    left = {("a", n): list(g) for n, g in enumerate(CLUSTER.pools["a"].free_gpus())}
    left.update({("b/x", n): list(g) for n, g in enumerate(CLUSTER.pools["b/x"].free_gpus())})
    chosen, placement, odd_name = {}, {}, False
    for j in range(draw(st.integers(0, 4))):
        t = draw(st.sampled_from(["a", "b/x"]))
        nodes = {}
        for (tt, n), gpus in left.items():
            if tt == t and gpus and draw(st.booleans()):
                c = draw(st.integers(1, len(gpus)))
                nodes[f"{t}/{n}"], left[(tt, n)] = tuple(gpus[:c]), gpus[c:]
        k = sum(map(len, nodes.values()))
        if not k:
            continue
        g = CLUSTER.pools[t].gpus_per_node
        chosen[f"j{j}"] = Option(t, k, k, draw(st.booleans()) and len(nodes) <= -(-k // g), 1.0)
        placement[f"j{j}"] = nodes
    if chosen and draw(st.booleans()):
        jid = draw(st.sampled_from(sorted(chosen)))
        how = draw(st.sampled_from(["other type", "no node", "leading zero", "busy", "twice", "shared", "count",
                                    "spread", "unplaced", "empty"]))
        nodes, opt = dict(placement[jid]), chosen[jid]
        name = next(iter(nodes))
        if how == "other type":
            nodes["b/x/0" if opt.gpu_type == "a" else "a/0"] = (0,)
        elif how == "no node":
            nodes[f"{opt.gpu_type}/9"] = (0,)
        elif how == "leading zero":
            nodes[f"{opt.gpu_type}/0{name.rsplit('/', 1)[1]}"] = nodes.pop(name)
            odd_name = True
        elif how == "busy":
            nodes["a/1"] = (0,)
        elif how == "twice":  # the same GPU twice, the count kept
            ix = nodes[name]
            nodes[name] = ix[:-1] + ix[:1] if len(ix) > 1 else ix + ix
        elif how == "shared":  # another job of the type also on one of its GPUs, its count kept
            others = [j for j in chosen if j != jid and chosen[j].gpu_type == opt.gpu_type] or ["extra"]
            placement[others[0]] = dict(placement.get(others[0], {}), **{name: nodes[name][:1]})
            k = sum(map(len, placement[others[0]].values()))
            chosen[others[0]] = Option(opt.gpu_type, k, k, False, 1.0)
        elif how == "count":
            chosen[jid] = Option(opt.gpu_type, opt.gpus + 1, opt.batch, opt.packed, 1.0)
        elif how == "spread":
            chosen[jid] = Option(opt.gpu_type, opt.gpus, opt.batch, True, 1.0)
        elif how == "unplaced":
            del placement[jid]
            return chosen, placement, odd_name
        elif how == "empty":
            nodes[f"{opt.gpu_type}/1"] = ()
        placement[jid] = nodes
    return chosen, placement, odd_name


@settings(max_examples=400, deadline=None)
@given(case=placements())
def test_the_set_check_and_the_reference_agree(case):
    chosen, placement, odd_name = case
    problem, solution = SimpleNamespace(cluster=CLUSTER), SimpleNamespace(placement=placement)
    errors: list[str] = []
    _check_nodes(problem, solution, chosen, errors)  # type: ignore[arg-type]
    ok = _nodes_plainly_ok(problem, solution, chosen)  # type: ignore[arg-type]
    assert ok == (not errors and not odd_name), errors
