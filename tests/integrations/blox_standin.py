"""A stand-in of Blox's scheduler loop (msr-fiddle/blox: blox/cluster_state.py, schedulers/, placement/).

Written from its public code: ``ClusterState`` keeps ``server_map`` ({node
counter: node info with ``numGPUs`` and ``ipaddr``}) and ``gpu_df``, a
pandas DataFrame with one row per GPU: ``GPU_ID``, ``Local_GPU_ID``,
``Node_ID``, ``IP_addr``, ``IN_USE``, ``JOB_IDS``; ``JobState`` keeps
``active_jobs`` ({job id: job dict with ``num_GPUs``, ``submit_time``}).
A round is the loop of ``las_scheduler.py``: ``scheduling_policy.schedule(job_state,
cluster_state)``, then ``utils.prune_jobs`` (finished jobs leave
``active_jobs`` and free their GPUs), then ``schedule`` **again** (the
answer used), then ``placement_policy.place(job_state, cluster_state,
new_job_schedule)`` -> ``(to_suspend, to_launch)``; the suspended jobs'
GPUs become free, then the others launch on the GPU ids returned:
:meth:`BloxCluster.round` raises on anything Blox would mis-handle.
"""

from __future__ import annotations

import pandas as pd


class JobState:
    def __init__(self, active_jobs: dict):
        self.active_jobs = active_jobs


class BloxCluster:
    """``ClusterState`` after ``nodes`` registered with ``gpus_per_node`` GPUs each."""

    def __init__(self, nodes: int, gpus_per_node: int):
        rows = [{"GPU_ID": n * gpus_per_node + g, "Local_GPU_ID": g, "Node_ID": n, "IP_addr": f"10.0.0.{n}",
                 "IN_USE": False, "JOB_IDS": None}
                for n in range(nodes) for g in range(gpus_per_node)]
        self.gpu_df = pd.DataFrame(rows, columns=["GPU_ID", "Local_GPU_ID", "Node_ID", "IP_addr", "IN_USE", "JOB_IDS"])
        self.server_map = {n: {"numGPUs": gpus_per_node, "ipaddr": f"10.0.0.{n}"} for n in range(nodes)}

    def running(self) -> dict:
        out: dict = {}
        for row in self.gpu_df.itertuples():
            if row.IN_USE:
                out.setdefault(row.JOB_IDS, []).append(row.GPU_ID)
        return out

    def round(self, policy, placement, job_dict, elastic: bool, finished=()) -> dict:
        """One round of Blox's loop; ``finished`` jobs are pruned between the two ``schedule`` calls
        (and removed from ``job_dict``)."""
        job_state = JobState(dict(job_dict))
        before = self.gpu_df.copy()
        policy.schedule(job_state, self)  # the first call: Blox discards its answer
        assert self.gpu_df.equals(before), "the scheduling stage modified gpu_df"
        for job in finished:  # utils.prune_jobs
            job_state.active_jobs.pop(job)
            job_dict.pop(job)
            mask = self.gpu_df["JOB_IDS"] == job
            self.gpu_df.loc[mask, ["IN_USE", "JOB_IDS"]] = [False, None]
        before = self.gpu_df.copy()
        schedule = policy.schedule(job_state, self)
        assert self.gpu_df.equals(before), "the scheduling stage modified gpu_df"
        assert schedule["run_all_jobs"] is False
        order = [j for j, _ in schedule["job_order"]]  # placement.py: ``job_id, _ = job_order[i]``
        assert sorted(order, key=str) == sorted(job_dict, key=str), "job_order lists every job once"
        terminate, launch = placement.place(job_state, self, schedule)
        assert isinstance(terminate, list) and isinstance(launch, dict)
        for job in terminate:
            mask = self.gpu_df["JOB_IDS"] == job
            assert mask.any(), f"terminating {job}, which is not running"
            self.gpu_df.loc[mask, ["IN_USE", "JOB_IDS"]] = [False, None]
        for job, gpu_ids in launch.items():
            assert job in job_dict, f"launching unknown job {job}"
            assert len(set(gpu_ids)) == len(gpu_ids), f"{job}: a GPU twice"
            want = job_dict[job]["num_GPUs"]
            assert (1 <= len(gpu_ids) <= want) if elastic else len(gpu_ids) == want, f"{job}: {len(gpu_ids)} GPUs"
            rows = self.gpu_df["GPU_ID"].isin(gpu_ids)
            assert rows.sum() == len(gpu_ids), f"{job}: unknown GPU ids {gpu_ids}"
            assert not self.gpu_df.loc[rows, "IN_USE"].any(), f"{job}: GPUs {gpu_ids} are in use"
            self.gpu_df.loc[rows, ["IN_USE", "JOB_IDS"]] = [True, job]
        return self.running()
