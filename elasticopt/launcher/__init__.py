"""The launcher: real training jobs on this machine, started and rescaled by the autoscaler (docs/design.md §5).

- :mod:`~elasticopt.launcher.devices`: the GPUs (or CPU slots) handed out to jobs;
- :mod:`~elasticopt.launcher.runner`: one ``torchrun`` process group per job generation;
- :mod:`~elasticopt.launcher.protocol`: the files between launcher and job (spec, control, status, checkpoints);
- :mod:`~elasticopt.launcher.executor`: :class:`LauncherExecutor`, the real :class:`~elasticopt.scheduling.Executor`;
- :mod:`~elasticopt.launcher.journal`: what survives the launcher being killed;
- :mod:`~elasticopt.launcher.driver` / ``elasticopt launch``: the loop with the autoscaler;
- :mod:`~elasticopt.launcher.jobsfile`: the JOBS_FILE format;
- :mod:`~elasticopt.launcher.trainer`: the job-side helper (imports torch; only job scripts import it);
- ``examples/mlp_job.py`` (a real PyTorch job) and ``examples/fake_job.py`` (the protocol without torch).

Nothing here but :mod:`~elasticopt.launcher.trainer` imports torch.
"""

from elasticopt.launcher.devices import DevicePool
from elasticopt.launcher.executor import LauncherExecutor
from elasticopt.launcher.observed import ObservedThroughput
from elasticopt.launcher.plan import BatchPlan, LRRamp, rank_slice, scaled_lr, split_batch

__all__ = ["DevicePool", "LauncherExecutor", "ObservedThroughput", "BatchPlan", "LRRamp", "rank_slice",
           "scaled_lr", "split_batch"]
