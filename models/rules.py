"""The option-feasibility rule, written once (docs/design.md §2 "Options").

(k, b) on GPU type t is an option of a job iff

- ``gpus_min <= k <= gpus_max`` (``gpus_max`` None: no limit but the cluster's),
- ``batch_min <= b <= batch_max``,
- k divides b,
- ``b / k <= max_local`` (the largest per-GPU batch that fits in memory),
- t is a type the job may use (``types`` None: every type).

The job's throughput model must also know (k, b) at a finite rate above 0:
that is the model's answer, read where the rate is read.

The rule comes in three forms with one verdict (a property test,
``tests/test_rules.py``, checks that they agree on random jobs and options):

- :func:`fits` / :func:`allows`: scalar, for one option;
- :func:`fits_array` / :func:`allows_array`: numpy, for many options at once;
- :func:`why_not_fits` / :func:`why_not`: the first clause an option breaks,
  as the message validation errors print (None: it is an option).

``fits*`` take the limits as numbers (the compile path's hot loops);
``allows*`` and ``why_not`` read them from anything with the fields of
:class:`~elasticopt.models.Job` (``gpus_min``, ``gpus_max``, ``batch_min``,
``batch_max``, ``max_local``, ``types``): a model ``Job`` or a scheduler's
``JobSpec``.  :data:`RULE` is the rule in the words of an instance file's
fields, for messages about a job with no option at all.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["RULE", "NO_LIMIT", "fits", "fits_array", "why_not_fits", "divides", "type_allowed", "limits",
           "allows", "allows_array", "why_not"]

#: The rule in the words of an instance file's fields (messages about a job with no option).
RULE = "gpus.min <= k <= gpus.max, batch.min <= b <= batch.max, k divides b, b/k <= batch.max_local"

#: ``gpus_max`` of a job without a GPU limit, as a number (larger than any cluster the model allows).
NO_LIMIT = 1 << 30


def divides(k: int, b: int) -> bool:
    """Whether k GPUs divide the global batch b (each GPU gets b / k samples); k >= 1."""
    return b % k == 0


def fits(k: int, b: int, gmin: int, gmax: int, bmin: int, bmax: int, mloc: int) -> bool:
    """Whether (k, b) keeps to the limits (module docstring); ``gmax`` a number (:data:`NO_LIMIT`)."""
    return gmin <= k <= gmax and bmin <= b <= bmax and b % k == 0 and b // k <= mloc


def fits_array(k: np.ndarray, b: np.ndarray, gmin: Any, gmax: Any, bmin: Any, bmax: Any, mloc: Any) -> np.ndarray:
    """:func:`fits` of every (k[i], b[i]) at once (limits are numbers or arrays that broadcast with k)."""
    k = np.asarray(k)
    b = np.asarray(b)
    inside = (k >= gmin) & (k <= gmax) & (b >= bmin) & (b <= bmax)
    kk = np.where(k >= 1, k, 1)  # k < gmin <= ... is already out; no division by 0
    return inside & (b % kk == 0) & (b // kk <= mloc)


def why_not_fits(k: int, b: int, gmin: int, gmax: int | None, bmin: int, bmax: int, mloc: int,
                 gpus_cap: int | None = None) -> str | None:
    """The first limit (k, b) breaks, as a message; None if it keeps to them all.

    ``gpus_cap``: also refuse k above this many GPUs (the cluster's, or its type's).
    """
    if k < gmin or (gmax is not None and k > gmax):
        return f"k={k} outside [{gmin}, {gmax if gmax is not None and gmax < NO_LIMIT else 'inf'}]"
    if gpus_cap is not None and k > gpus_cap:
        return f"k={k} above the cluster's {gpus_cap} GPUs"
    if not (bmin <= b <= bmax):
        return f"b={b} outside [{bmin}, {bmax}]"
    if b % k != 0:
        return f"k={k} does not divide b={b}"
    if b // k > mloc:
        return f"local batch {b // k} above max_local {mloc}"
    return None


def type_allowed(types: tuple[str, ...] | None, gpu_type: str | None) -> bool:
    """Whether a job restricted to ``types`` (None: any) may use ``gpu_type`` (None: the job's one type)."""
    return types is None or gpu_type is None or gpu_type in types


def limits(job: Any, gpus_cap: int | None = None) -> tuple[int, int, int, int, int]:
    """``(gmin, gmax, bmin, bmax, mloc)`` of a job, ``gmax`` a number: its limit, at most ``gpus_cap``."""
    gmax = job.gpus_max if job.gpus_max is not None else NO_LIMIT
    if gpus_cap is not None and gpus_cap < gmax:
        gmax = gpus_cap
    return job.gpus_min, gmax, job.batch_min, job.batch_max, job.max_local


def allows(job: Any, k: int, b: int, gpu_type: str | None = None) -> bool:
    """Whether (k, b) on ``gpu_type`` is an option of ``job`` by the rule (capacity and throughput aside)."""
    return type_allowed(job.types, gpu_type) and fits(k, b, *limits(job))


def allows_array(job: Any, k: np.ndarray, b: np.ndarray, gpu_type: str | None = None) -> np.ndarray:
    """:func:`allows` of every (k[i], b[i]) on ``gpu_type`` at once."""
    if not type_allowed(job.types, gpu_type):
        return np.zeros(np.shape(k), bool)
    return fits_array(k, b, *limits(job))


def why_not(job: Any, k: int, b: int, gpu_type: str | None = None, gpus_cap: int | None = None) -> str | None:
    """Why (k, b) on ``gpu_type`` is not an option of ``job`` by the rule, or None if it is.

    Parameters
    ----------
    job
        A :class:`~elasticopt.models.Job` or anything with its limit fields.
    k, b
        The option: GPUs and global batch.
    gpu_type
        Its GPU type (None: the job's one type).
    gpus_cap
        Also refuse k above this many GPUs (the cluster's, or the type's).

    Returns
    -------
    str or None
        The first clause broken, e.g. ``"k=3 does not divide b=64"``.
    """
    why = why_not_fits(k, b, job.gpus_min, job.gpus_max, job.batch_min, job.batch_max, job.max_local, gpus_cap)
    if why is None and not type_allowed(job.types, gpu_type):
        return f"the job may not use GPU type {gpu_type!r}"
    return why
