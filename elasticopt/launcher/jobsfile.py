"""The JOBS_FILE of ``elasticopt launch``: training jobs to run on this machine.

A JSON file, format ``elasticopt-jobs/1``::

    {"format": "elasticopt-jobs/1",
     "defaults": {"script": "example:mlp", "mode": "torchrun", "checkpoint_every_s": 30},
     "jobs": [
       {"id": "mlp-a", "arrival_s": 0,
        "script": "example:mlp", "args": ["--hidden", "256"],
        "total_samples": 2000000,
        "batch_min": 64, "batch_max": 512, "max_local": 128,
        "gpus_min": 1, "gpus_max": 2,
        "submitted_gpus": 1, "submitted_batch": 128,
        "throughput": [[1, 64, 9000], [1, 128, 11000], [2, 128, 17000], [2, 256, 20000]]},
       {"id": "resnet-b", "arrival_s": 120, "script": "train_resnet.py",
        "profile": "t4/imagenet", "duration_s": 600}
     ]}

Per job, the scheduling keys are those of a workload entry
(:mod:`elasticopt.scheduling.workload`): ``id``, ``arrival_s`` (seconds after
the launcher starts), ``total_samples`` or ``duration_s``, ``batch_min``,
``batch_max``, ``max_local``, ``gpus_min``, ``gpus_max``, ``submitted_gpus``,
``submitted_batch``, ``weight``, ``restart_cost_s`` and the *prior*
throughput, either a ``profile`` name or measured ``throughput`` points
``[gpus, global_batch, samples_per_s]``.  The launcher learns the real rates
as the job runs and the policy uses those.  Launcher keys (each may also be
given once in ``defaults``):

``script``
    The training script; a path relative to the JOBS_FILE, or
    ``example:mlp`` (the trainer helper), ``example:plain`` (plain
    ``torch.distributed``) or ``example:fake`` (no torch) for the bundled
    examples.  Required.
``args``
    List of command-line arguments for the script (default none).
``mode``
    ``torchrun`` (default: one ``torchrun --standalone --nproc-per-node=k``
    per generation) or ``python`` (one plain process that reads k from its
    spec, e.g. ``example:fake``).
``env``
    Extra environment variables (object of strings).
``checkpoint_every_s``
    Periodic checkpoint interval of the job (default 30).
``cwd``
    Working directory of the job (default: the launcher's).

The file is read as every input file is (:mod:`elasticopt.models.jsontext`): UTF-8,
nesting depth, integers within ±(2**53 - 1), finite numbers; every error names the
file and the JSON path.

The scheduling part of the file (everything but the launcher keys) is also
written as a workload file, so ``elasticopt simulate`` can replay the same
jobs in simulation.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from elasticopt.errors import InstanceError
from elasticopt.models.jsontext import read_json
from elasticopt.scheduling.jobspec import JobSpec
from elasticopt.scheduling.workload import job_from_dict

__all__ = ["JOBS_FORMAT", "LAUNCHER_KEYS", "load_jobs", "resolve_script", "EXAMPLES"]

JOBS_FORMAT = "elasticopt-jobs/1"
LAUNCHER_KEYS = ("script", "args", "mode", "env", "checkpoint_every_s", "cwd")
_EXAMPLES_DIR = Path(__file__).resolve().parent / "examples"
EXAMPLES = {"example:mlp": _EXAMPLES_DIR / "mlp_job.py", "example:plain": _EXAMPLES_DIR / "plain_ddp_job.py",
            "example:fake": _EXAMPLES_DIR / "fake_job.py"}


def resolve_script(script: str, base_dir: Path) -> str:
    """Absolute path of a job script (``example:NAME`` or relative to ``base_dir``)."""
    if script in EXAMPLES:
        return str(EXAMPLES[script])
    p = Path(script).expanduser()
    return str(p if p.is_absolute() else (base_dir / p).resolve())


def _launcher_payload(entry: dict[str, Any], defaults: dict[str, Any], file: str, path: str, base: Path) -> dict:
    merged = {**defaults, **{k: entry[k] for k in LAUNCHER_KEYS if k in entry}}
    script = merged.get("script")
    if not isinstance(script, str) or not script.strip():
        raise InstanceError(file, f"{path}.script", "a script path or one of " + ", ".join(EXAMPLES), script)
    args = merged.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, (str, int, float)) for a in args):
        raise InstanceError(file, f"{path}.args", "a list of strings", args)
    mode = merged.get("mode", "torchrun")
    if mode not in ("torchrun", "python"):
        raise InstanceError(file, f"{path}.mode", "'torchrun' or 'python'", mode)
    env = merged.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(k, str) for k in env):
        raise InstanceError(file, f"{path}.env", "an object of strings", env)
    ck = merged.get("checkpoint_every_s", 30.0)
    if not isinstance(ck, (int, float)) or not ck > 0:
        raise InstanceError(file, f"{path}.checkpoint_every_s", "a number > 0", ck)
    payload: dict[str, Any] = {
        "script": resolve_script(script.strip(), base),
        "args": [str(a) for a in args],
        "mode": mode,
        "env": {k: str(v) for k, v in env.items()},
        "checkpoint_every_s": float(ck),
    }
    if merged.get("cwd") is not None:
        payload["cwd"] = str(merged["cwd"])
    return payload


def load_jobs(path: str | os.PathLike[str]) -> list[JobSpec]:
    """Read a JOBS_FILE; each job's launcher keys end up in ``JobSpec.payload``.

    Raises
    ------
    InstanceError
        Naming the file, the JSON path, what was expected and what was found.
    """
    p = Path(path)
    file = str(p)
    doc = read_json(p, "jobs file")  # the loader discipline of every input file (elasticopt.models.jsontext)
    if not isinstance(doc, dict) or doc.get("format") != JOBS_FORMAT:
        found = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        hint = "an instance file: 'elasticopt solve FILE' reads it" if str(found).startswith("elasticopt-instance/") \
            else None
        raise InstanceError(file, "format", repr(JOBS_FORMAT), found, hint)
    defaults = doc.get("defaults", {})
    if not isinstance(defaults, dict) or set(defaults) - set(LAUNCHER_KEYS):
        raise InstanceError(file, "defaults", "an object with keys among " + ", ".join(LAUNCHER_KEYS), defaults)
    entries = doc.get("jobs")
    if not isinstance(entries, list) or not entries:
        raise InstanceError(file, "jobs", "a non-empty list", entries)
    out: list[JobSpec] = []
    seen: set[str] = set()
    base = p.resolve().parent
    for i, entry in enumerate(entries):
        path_i = f"jobs[{i}]"
        if not isinstance(entry, dict):
            raise InstanceError(file, path_i, "an object", type(entry).__name__)
        sched = {k: v for k, v in entry.items() if k not in LAUNCHER_KEYS}
        spec = job_from_dict(sched, file, path_i)
        if spec.id in seen:
            raise InstanceError(file, f"{path_i}.id", "a unique id", spec.id)
        if "/" in spec.id or spec.id in (".", ".."):
            raise InstanceError(file, f"{path_i}.id", "an id usable as a directory name (no '/')", spec.id)
        seen.add(spec.id)
        payload = _launcher_payload(entry, defaults, file, path_i, base)
        out.append(dataclasses.replace(spec, payload=payload))
    return out
