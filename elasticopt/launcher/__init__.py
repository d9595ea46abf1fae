"""The launcher: real training jobs on this machine, started and rescaled by the autoscaler (docs/design.md §5).

- :mod:`~elasticopt.launcher.devices`: the GPUs (or CPU slots) handed out to jobs;
- :mod:`~elasticopt.launcher.protocol`: the files between launcher and job (spec, control, status, checkpoints);
- :mod:`~elasticopt.launcher.jobstate`: a job's generation state machine and accounting;
- :mod:`~elasticopt.launcher.generations`: :class:`GenerationExecutor`, the real
  :class:`~elasticopt.scheduling.Executor`, whatever backend starts the generations;
- :mod:`~elasticopt.launcher.torchrun`: :class:`TorchrunExecutor`, one ``torchrun`` process group per generation;
- :mod:`~elasticopt.launcher.recovery`: what the journal of a killed launcher says;
- :mod:`~elasticopt.launcher.journal`: what survives the launcher being killed;
- :mod:`~elasticopt.launcher.driver` / ``elasticopt launch``: the loop with the autoscaler;
- :mod:`~elasticopt.launcher.jobsfile`: the JOBS_FILE format;
- :mod:`~elasticopt.launcher.trainer`: the job-side helper (imports torch; only job scripts import it);
- ``examples/mlp_job.py`` (a real PyTorch job) and ``examples/fake_job.py`` (the protocol without torch).

Nothing here but :mod:`~elasticopt.launcher.trainer` imports torch.
"""

from elasticopt.launcher.devices import DevicePool
from elasticopt.launcher.generations import GenerationExecutor
from elasticopt.launcher.observed import ObservedThroughput
from elasticopt.launcher.plan import BatchPlan, LRRamp, rank_slice, scaled_lr, split_batch
from elasticopt.launcher.torchrun import TorchrunExecutor

__all__ = ["DevicePool", "GenerationExecutor", "TorchrunExecutor", "ObservedThroughput", "BatchPlan", "LRRamp", "rank_slice",
           "scaled_lr", "split_batch"]
