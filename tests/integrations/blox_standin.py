"""A stand-in of Blox's scheduler loop (blox/ scheduling_policies + placement, cluster_state).

``gpu_df`` is a pandas DataFrame with one row per GPU: ``GPU_ID``,
``Local_GPU_ID``, ``Node_ID``, ``IN_USE``, ``JOB_IDS``; ``node_info[node]``
holds ``numGPUs`` (and optionally ``gpu_type``); ``job_dict[job]`` holds
``num_GPUs`` and ``submit_time``.  A round calls ``schedule`` then ``place``,
terminates the returned jobs (their GPUs become free), then launches the
others on the GPU ids returned: :meth:`BloxCluster.round` raises on anything
Blox would mis-handle.
"""

from __future__ import annotations

import pandas as pd


class BloxCluster:
    def __init__(self, nodes: int, gpus_per_node: int):
        rows = [{"GPU_ID": n * gpus_per_node + g, "Local_GPU_ID": g, "Node_ID": n, "IN_USE": False, "JOB_IDS": None}
                for n in range(nodes) for g in range(gpus_per_node)]
        self.gpu_df = pd.DataFrame(rows)
        self.node_info = {n: {"numGPUs": gpus_per_node} for n in range(nodes)}

    def running(self) -> dict:
        out: dict = {}
        for row in self.gpu_df.itertuples():
            if row.IN_USE:
                out.setdefault(row.JOB_IDS, []).append(row.GPU_ID)
        return out

    def round(self, policy, placement, job_dict, elastic: bool) -> dict:
        schedule = policy.schedule(job_dict, self.node_info, self.gpu_df)
        assert schedule["run_all_jobs"] is False
        order = [j for j, _ in schedule["job_order"]]
        assert sorted(order, key=str) == sorted(job_dict, key=str), "job_order lists every job once"
        terminate, launch = placement.place(dict(job_dict), schedule, self.node_info, self.gpu_df)
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
