"""Fake checkouts of the Pollux and Sia simulators, laid out as the real ones (file names, calling conventions,
output files and ``summary.json`` shapes), with toy physics -- none of the hosts' code.

Pollux (petuum/adaptdl osdi21-artifact ``simulator/``): ``simulator.py [--policy P] [--output O] WORKLOAD``
imports ``PolluxPolicy`` from ``pollux``; one workload: ``--output`` is a file of JSON lines (one record per
round, ``submitted_jobs`` with ``name``, ``num_restarts``, ``submission_time``, ``completion_time``); a folder
of workloads: ``--output`` must be a folder, gets ``<workload>.log`` each and ``summary.json`` =
``{"jcts": {workload: {job: s}}, "avgs": {workload: s}, "mean": s}``; ``results-jobload/{policy}-1.0/
summary.json`` holds the published results in that shape.

Sia (siasosp23/artifacts ``sia-simulator/``): ``multi_simulator.py WORKLOAD --policy=sia ... --output=O`` with
``cluster.py`` dispatching on ``isinstance(policy, sia.SiaPolicy)`` (asserting otherwise), the same log format.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

LOOP = '''
import csv, json, os

def toy_run(policy_call, workload, gpus, hetero):
    jobs = {r["name"]: {"t": float(r["time"]), "work": 300.0 + 60.0 * (i % 3), "done": None, "restarts": None,
                        "alloc": None} for i, r in enumerate(csv.DictReader(open(workload)))}
    now, logs = 0.0, []
    while any(j["done"] is None for j in jobs.values()):
        now += 60.0
        for j in jobs.values():
            if j["done"] is None and j["alloc"]:
                k = len(j["alloc"][1] if hetero else j["alloc"])
                j["work"] -= 60.0 * k ** 0.8
                if j["work"] <= 0:
                    j["done"] = now
        live = [n for n, j in jobs.items() if j["t"] <= now and j["done"] is None]
        if live:
            new = policy_call(live, now, jobs)
            for n in live:
                a = new.get(n, (None, ()) if hetero else [])
                if (a[1] if hetero else a) and a != jobs[n]["alloc"]:
                    jobs[n]["restarts"] = 0 if jobs[n]["restarts"] is None else jobs[n]["restarts"] + 1
                jobs[n]["alloc"] = a
        logs.append({"timestamp": now, "submitted_jobs": [
            {"name": n, "num_restarts": j["restarts"], "submission_time": j["t"], "completion_time": j["done"]}
            for n, j in jobs.items() if j["t"] <= now]})
    jcts = {n: j["done"] - j["t"] for n, j in jobs.items()}
    return logs, jcts

def output_logs(logs, path):
    with open(path, "w") as f:
        for record in logs:
            json.dump(record, f)
            f.write("\\n")
'''

POLLUX_SIMULATOR = LOOP + '''
import argparse, copy, glob
from pollux import PolluxPolicy
from tiresias import TiresiasPolicy

class Info:
    def __init__(self, age, restarts):
        self.speedup_fn = lambda nodes, k: k ** 0.8 / (1 + 0.2 * (nodes - 1))
        self.resources, self.min_replicas, self.max_replicas, self.preemptible = {"nvidia.com/gpu": 1}, 0, 4, True
        self.age, self.num_restarts, self.creation_timestamp, self.attained_service = age, restarts, 0, 0

class Node:
    def __init__(self):
        self.resources, self.preemptible = {"nvidia.com/gpu": 2}, False

def simulate(args):
    policy = TiresiasPolicy() if args.policy == "tiresias" else PolluxPolicy()
    nodes = {0: Node(), 1: Node()}
    def call(live, now, jobs):
        infos = {n: Info(now - jobs[n]["t"], jobs[n]["restarts"] or 0) for n in live}
        prev = {n: jobs[n]["alloc"] for n in live if jobs[n]["alloc"]}
        allocations, _ = policy.optimize(infos, nodes, prev, nodes[0])
        return allocations
    logs, jcts = toy_run(call, args.workload, 4, False)
    if args.output:
        output_logs(logs, args.output)
    return logs, jcts

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("workload", type=str)
    parser.add_argument("--policy", type=str, default="pollux", choices=["tiresias", "optimus", "pollux"])
    parser.add_argument("--interval", type=int, default=60)
    parser.add_argument("--output", type=str)
    args = parser.parse_args()
    if os.path.isdir(args.workload):
        assert args.output is not None and os.path.isdir(args.output)
        args_list = []
        for workload in glob.glob(args.workload + "/*.csv"):
            name = os.path.basename(workload)[:-4]
            args_list.append(copy.deepcopy(args))
            args_list[-1].workload = workload
            args_list[-1].output = args.output + "/" + name + ".log"
        ret_list = [simulate(a) for a in args_list]
        summary = {"jcts": {}, "avgs": {}}
        for args_item, (_, jct_dict) in zip(args_list, ret_list):
            name = os.path.basename(args_item.workload)[:-4]
            summary["jcts"][name] = jct_dict
            summary["avgs"][name] = sum(jct_dict.values()) / len(jct_dict)
        summary["mean"] = sum(summary["avgs"].values()) / len(summary["avgs"])
        with open(args.output + "/summary.json", "w") as f:
            json.dump(summary, f, indent=4)
    else:
        simulate(args)
'''

POLLUX_HOST = '''
class PolluxPolicy(object):
    def optimize(self, jobs, nodes, base_allocations, node_template):
        raise RuntimeError("the host's own PolluxPolicy was called: the drop-in was not installed")
'''

TIRESIAS_HOST = '''
class TiresiasPolicy(object):
    def optimize(self, jobs, nodes, base_allocations, node_template):
        free = [k for k, n in nodes.items() for _ in range(n.resources["nvidia.com/gpu"])]
        out = {}
        for key in sorted(jobs, key=lambda k: -jobs[k].age):
            out[key], free = free[:1], free[1:]
        return out, len(nodes)
'''

SIA_HOST = '''
def get_restart_penalty(jobname):
    return 250 if "imagenet" in jobname else 30

class SiaPolicy(object):
    def __init__(self, p_fairness=-0.5, restart_penalty=30, lambda_a=0.01, lambda_n=1.1,
                 project_throughputs=False, share_max_replicas=False, enable_bsz_tuning=True):
        self.p = p_fairness
    def populate_valid_configs(self, num_nodes, num_gpus, max_physical_nodes=None):
        self.num_gpus = num_gpus
    def optimize(self, jobs, nodes, base_allocations):
        out, free = {}, [(c, i) for c in nodes for i in nodes[c] for _ in range(nodes[c][i].resources["nvidia.com/gpu"])]
        for key in sorted(jobs, key=lambda k: -jobs[k].age):
            if free:
                c, i = free.pop(0)
                out[key] = (c, [i])
            else:
                out[key] = (None, ())
        return out
'''

SIA_CLUSTER = '''
from sia import SiaPolicy
from utils import JobInfo, NodeInfo

class Cluster(object):
    def __init__(self, policy):
        if isinstance(policy, SiaPolicy):
            self.kind = "sia"
        else:
            assert False, f"unsupported policy {policy.__class__.__name__}"
        self.policy = policy

    def job_info(self, age, restarts):
        info = JobInfo({"nvidia.com/gpu": 1}, {"rtx": (lambda n, k: k ** 0.8), "dgx": None}, 0, 0,
                       {"rtx": 0, "dgx": 0}, {"rtx": 4, "dgx": 1})
        info.age, info.num_restarts, info.num_migrations, info.category = age, restarts, 0, "adaptive"
        info.cluster_throughputs = {"rtx": 1.0, "dgx": 2.0}
        info.cluster_throughput_ratios = {"rtx": {"dgx": 0.5}, "dgx": {"rtx": 2.0}}
        info.scale_unit, info.scaling_underway = {"rtx": 1, "dgx": 1}, False
        return info

    def node_infos(self):
        return {"rtx": {0: NodeInfo({"nvidia.com/gpu": 4}, False)}, "dgx": {0: NodeInfo({"nvidia.com/gpu": 2}, False)}}
'''

SIA_UTILS = '''
class JobInfo(object):
    def __init__(self, resources, speedup_fn, creation_timestamp, attained_service, min_replicas, max_replicas,
                 preemptible=True):
        for k, v in max_replicas.items():
            assert v > 0
        self.resources, self.speedup_fn, self.creation_timestamp = resources, speedup_fn, creation_timestamp
        self.attained_service, self.min_replicas, self.max_replicas = attained_service, min_replicas, max_replicas
        self.preemptible = preemptible

class NodeInfo(object):
    def __init__(self, resources, preemptible):
        self.resources, self.preemptible = resources, preemptible
'''

SIA_MULTI = LOOP + '''
import argparse, glob, copy
from cluster import Cluster
from sia import SiaPolicy

def multi_simulate(args):
    policy = SiaPolicy(p_fairness=args.policy_p_val, restart_penalty=30, lambda_a=args.mip_lambda_a,
                       lambda_n=args.mip_lambda_n, project_throughputs=args.project_throughputs,
                       share_max_replicas=args.share_max_replicas, enable_bsz_tuning=True)
    policy.populate_valid_configs({"rtx": 1, "dgx": 1}, {"rtx": 4, "dgx": 2}, {"rtx": 3, "dgx": 2})
    cluster = Cluster(policy)
    state = {}
    def call(live, now, jobs):
        infos = {n: cluster.job_info(now - jobs[n]["t"], jobs[n]["restarts"] or 0) for n in live}
        state["allocs"] = policy.optimize(infos, cluster.node_infos(), {n: jobs[n]["alloc"] for n in live
                                                                        if jobs[n]["alloc"]})
        return state["allocs"]
    logs, jcts = toy_run(call, args.workload, 6, True)
    if args.output:
        output_logs(logs, args.output)
    return logs, jcts

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("workload", type=str)
    parser.add_argument("--policy", type=str, default="sia", choices=["sia", "gavel", "sia_fix"])
    parser.add_argument("--policy_p_val", type=float, default=0.5)
    parser.add_argument("--mip_lambda_n", type=float, default=None)
    parser.add_argument("--mip_lambda_a", type=float, default=None)
    parser.add_argument("--project_throughputs", action="store_true", default=False)
    parser.add_argument("--share_max_replicas", action="store_true", default=False)
    parser.add_argument("--interval", type=int, default=60)
    parser.add_argument("--output", type=str)
    args = parser.parse_args()
    assert args.policy == "sia", "the fake has Sia's policy only"
    multi_simulate(args)
'''


def _workload(path: Path, n: int, apps=("cifar10", "imagenet")) -> None:
    rows = "".join(f"{apps[i % len(apps)]}-{i},{90.0 * i},{apps[i % len(apps)]},1,128\n" for i in range(n))
    path.write_text("name,time,application,num_replicas,batch_size\n" + rows)


def pollux_checkout(root: Path) -> Path:
    """``root/simulator`` laid out as adaptdl's osdi21-artifact ``simulator/``."""
    sim = root / "simulator"
    (sim / "workloads").mkdir(parents=True)
    (sim / "simulator.py").write_text(textwrap.dedent(POLLUX_SIMULATOR))
    (sim / "pollux.py").write_text(POLLUX_HOST)
    (sim / "tiresias.py").write_text(TIRESIAS_HOST)
    for w in (1, 2):
        _workload(sim / "workloads" / f"workload-{w}.csv", 4 + w)
    for policy, jct in (("pollux", 400.0), ("optimus", 900.0), ("tiresias", 700.0)):
        folder = sim / "results-jobload" / f"{policy}-1.0"
        folder.mkdir(parents=True)
        jcts = {f"workload-{w}": {f"cifar10-{i}": jct + 10 * i for i in range(4 + w)} for w in (1, 2)}
        avgs = {k: sum(v.values()) / len(v) for k, v in jcts.items()}
        (folder / "summary.json").write_text(json.dumps({"jcts": jcts, "avgs": avgs,
                                                         "mean": sum(avgs.values()) / len(avgs)}, indent=4))
    return sim


def sia_checkout(root: Path) -> Path:
    """``root/sia-simulator`` laid out as siasosp23/artifacts ``sia-simulator/``."""
    sim = root / "sia-simulator"
    (sim / "workloads" / "saturn").mkdir(parents=True)
    (sim / "multi_simulator.py").write_text(textwrap.dedent(SIA_MULTI))
    (sim / "sia.py").write_text(SIA_HOST)
    (sim / "cluster.py").write_text(SIA_CLUSTER)
    (sim / "utils.py").write_text(SIA_UTILS)
    (sim / "gavel.py").write_text("class GavelPolicy(object):\n    pass\n")
    for w in (1, 2):
        _workload(sim / "workloads" / "saturn" / f"workload-{w}.csv", 12)
    return sim
