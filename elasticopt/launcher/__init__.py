"""The launcher: real training jobs started and rescaled by the autoscaler (docs/design.md §5, docs/launcher.md).

- :mod:`~elasticopt.launcher.devices`: the GPUs (or CPU slots) handed out to jobs, with their nodes;
- :mod:`~elasticopt.launcher.protocol`: the files between launcher and job (spec, control, status, checkpoints);
- :mod:`~elasticopt.launcher.launch_state`: a job's generation state machine and accounting;
- :mod:`~elasticopt.launcher.generations`: :class:`GenerationExecutor`, the real
  :class:`~elasticopt.scheduling.Executor`, whatever backend starts the generations
  (:mod:`~elasticopt.launcher.backend`);
- :mod:`~elasticopt.launcher.torchrun`: :class:`TorchrunExecutor`, one ``torchrun`` process group per generation;
- :mod:`~elasticopt.launcher.ray_backend` / :mod:`~elasticopt.launcher.ray_worker`: ``RayExecutor``,
  generations on a Ray cluster run by warm worker actors (extra ``ray``; imported on demand);
- :mod:`~elasticopt.launcher.journal` / :mod:`~elasticopt.launcher.recovery`: what survives the
  launcher being killed, and what it says;
- :mod:`~elasticopt.launcher.driver` / ``elasticopt launch``: the loop with the autoscaler;
- :mod:`~elasticopt.launcher.jobsfile`: the JOBS_FILE format;
- :mod:`~elasticopt.launcher.elastic` (the protocol for any ``torch.distributed`` script) and
  :mod:`~elasticopt.launcher.trainer` (the helper built on it): job side, they import torch;
- ``examples/``: ``mlp_job.py`` (the trainer), ``plain_ddp_job.py`` (plain DDP), ``fake_job.py`` (no torch).

Nothing the launcher itself imports needs torch or ray.
"""

from elasticopt.launcher.devices import DevicePool
from elasticopt.launcher.generations import GenerationExecutor
from elasticopt.launcher.observed import ObservedThroughput
from elasticopt.launcher.plan import BatchPlan, LRRamp, rank_slice, scaled_lr, split_batch
from elasticopt.launcher.torchrun import TorchrunExecutor

__all__ = ["DevicePool", "GenerationExecutor", "TorchrunExecutor", "ObservedThroughput", "BatchPlan", "LRRamp", "rank_slice",
           "scaled_lr", "split_batch"]
