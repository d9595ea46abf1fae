"""The dp kernels' value type: int32 where the table provably allows it, int64 otherwise (docs/design.md §3).

int32 states and utilities give the jax kernels twice the SIMD lanes (~1.5x
faster on CPU).  :func:`value_dtype` decides per call, from the table, before
a kernel is chosen; its bounds are exact (integers throughout), so an int32
kernel computes the same optimum and the same choices as the int64 one
(tests/test_dp_value_type.py).
"""

from __future__ import annotations

import numpy as np

from elasticopt.solvers.common import NEG

__all__ = ["NEG32", "INFEASIBLE_BELOW32", "INT32_MAX", "value_dtype", "np_type", "best_value"]

#: The int32 kernels' -inf: twice it (the pad read plus an invalid option's utility) is -2**31, still an int32.
NEG32 = -(1 << 30)
#: In the int32 kernels a value below this is infeasible: after every job such values are reset to NEG32,
#: so that an infeasible value is at most NEG32 + one utility (int64 keeps NEG plus a sum instead).
INFEASIBLE_BELOW32 = -(1 << 29)
#: The largest int32.
INT32_MAX = (1 << 31) - 1


def value_dtype(utility: np.ndarray, gpus: np.ndarray, valid: np.ndarray, idle_allowed: np.ndarray,
                most_gpus: int) -> str:
    """The DP's value type: ``"int32"`` or ``"int32-reset"`` where its values provably fit int32, else ``"int64"``.

    The int32 kernels are exact when (every bound exact, over the valid options):

    - ``|u| < 2**29`` for every utility: an infeasible value (reset to ``NEG32``
      after each job, then at most one utility added) stays below
      ``INFEASIBLE_BELOW32 = -2**29``. The reset (one pass over the states per
      job, ~12% of the kernel) is left out, ``"int32"``, where no infeasible
      value can arise or grow: every job may idle (F stays feasible; a read of
      the pad, ``NEG32`` plus one utility, never beats it), or the sum over
      jobs of their largest utility is below ``2**29``;
    - the lowest feasible value, ``-sum_j max(0, -min_o u_jo)``, is at least
      ``-2**29``: above every infeasible one;
    - the highest state value ``hi = min(sum_j max(0, max_o u_jo), rho * most_gpus)``
      (``rho`` the largest utility per GPU: a state of p GPUs is worth at most
      ``rho * p``; unbounded if an option of 0 GPUs has u > 0), plus the largest
      utility, is at most ``2**31 - 1``: no candidate overflows;
    - the lowest candidate, the pad ``NEG32`` plus an invalid option's ``NEG32``,
      is ``-2**31``: an int32.

    Parameters
    ----------
    utility, gpus, valid
        ``[n, K]`` option arrays (utilities as integers).
    most_gpus
        The most GPUs a DP state counts (the padded state axis' last index, or the sum of the per-type
        capacities with several types).
    """
    if not valid.any():
        return "int32"
    no_reset = bool(np.all(idle_allowed))
    u = np.where(valid, utility, 0).astype(np.int64)
    lim = 1 << 29
    if int(np.abs(u).max()) >= lim:
        return "int64"
    low = int(np.maximum(-np.where(valid, utility, 0).min(axis=1), 0).sum())
    if low > lim:
        return "int64"
    u_top = int(u.max())
    hi = int(np.maximum(u.max(axis=1), 0).sum())
    k = np.where(valid, gpus, 1)
    if not ((k <= 0) & (u > 0)).any():
        pos = valid & (k > 0)
        # floor(rho * most_gpus) = max_o floor(u_o * most_gpus / k_o), exactly in integers (|u| < 2**29)
        by_rho = int(np.where(pos, np.maximum(u, 0) * int(most_gpus) // k, 0).max())
        hi = min(hi, by_rho)
    if hi + max(u_top, 0) > INT32_MAX:
        return "int64"
    no_reset = no_reset or int(np.maximum(u.max(axis=1), 0).sum()) < lim
    return "int32" if no_reset else "int32-reset"


def np_type(value_dtype: str) -> type:
    """The numpy integer type of a :func:`value_dtype`."""
    return np.int64 if value_dtype == "int64" else np.int32


def best_value(value: int, value_dtype: str) -> int:
    """The DP's optimum as the int64 kernels state it (an infeasible int32 value becomes ``NEG``)."""
    return NEG if value_dtype != "int64" and value < INFEASIBLE_BELOW32 else value
