"""The dp kernels' value type: packed int32 where the table provably allows it, else int64 (docs/design.md §3).

The jax kernels keep, per DP state, one integer ``P = v * W + c``: the value
``v`` and, in the low ``S = log2 W`` bits, a code ``c`` of the option that
reached it (``W - 1`` idle, ``W - 2 - o`` option o; ``W >= width + 1``).  A
plain ``max`` over the options then yields the best value and its argmax at
once, with the int64 kernels' tie rule (idle first, then the lowest option):
one add and one max per option and state instead of add, compare and two
selects.  int32 gives twice the SIMD lanes again.  :func:`value_type`
decides per call, from the table, before a kernel is chosen; its bounds are
exact (integers throughout), so every kernel computes the same optimum and
the same choices (tests/test_dp_value_type.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from elasticopt.solvers.common import INFEASIBLE_BELOW, NEG

__all__ = ["ValueType", "value_type", "ARGMAX64"]


@dataclass(frozen=True)
class ValueType:
    """How the kernels hold the DP's values.

    Attributes
    ----------
    dtype
        ``"int32"`` or ``"int64"``.
    shift_bits
        S: values packed with an S-bit option code (``W = 2**S``); 0: the
        unpacked int64 kernel with an argmax row (``NEG``, widths past what
        packing allows).
    reset
        Whether infeasible values are reset to :attr:`neg` after each job (needed
        where they could otherwise grow into the feasible range).
    """

    dtype: str
    shift_bits: int
    reset: bool

    @property
    def half_range(self) -> int:
        """M = 2**(bits - 1) / W: the packed values' range in value units."""
        return (1 << (31 if self.dtype == "int32" else 63)) >> self.shift_bits

    @property
    def neg(self) -> int:
        """The kernels' -inf in value units (``-M/2``; twice it, packed, is the type's minimum)."""
        return -(self.half_range // 2) if self.shift_bits else NEG

    @property
    def infeasible_below(self) -> int:
        """Values below this are infeasible (``-M/4``)."""
        return -(self.half_range // 4) if self.shift_bits else INFEASIBLE_BELOW

    @property
    def numpy(self) -> type:
        """The numpy integer type."""
        return np.int32 if self.dtype == "int32" else np.int64

    def values(self, row: np.ndarray) -> np.ndarray:
        """A kernel's final row as int64 values (codes removed; infeasible states ``NEG``)."""
        v = row.astype(np.int64) >> self.shift_bits
        return np.where(v < self.infeasible_below, NEG, v)

    def best(self, value: int) -> int:
        """The DP's optimum from a kernel's final state (unpacked; an infeasible value becomes ``NEG``)."""
        value >>= self.shift_bits
        return NEG if value < self.infeasible_below else value


#: The fall-back: the unpacked int64 kernel (NEG = -2**60 leaves every compiled table's totals, < 2**52, room).
ARGMAX64 = ValueType("int64", 0, False)


def value_type(utility: np.ndarray, gpus: np.ndarray, valid: np.ndarray, idle_allowed: np.ndarray,
               most_gpus: int, width: int, dtypes: tuple[str, ...] = ("int32", "int64")) -> ValueType:
    """The first of packed int32, packed int64 whose range provably holds the DP, else :data:`ARGMAX64`.

    With ``W = 2**S >= width + 1`` and ``M = 2**(bits - 1) / W``, the packed
    kernels are exact when (every bound exact, over the valid options):

    - ``|u| < M/4`` for every utility: an infeasible value (reset to
      ``-M/2`` after each job, then at most one utility added) stays below
      ``-M/4``.  The reset (one pass over the states per job) is left out
      where no infeasible value can arise or grow: every job may idle (F
      stays feasible; a read of the pad, ``-M/2`` plus one utility, never
      beats it), or the sum over jobs of their largest utility is below ``M/4``;
    - the lowest feasible value, ``-sum_j max(0, -min_o u_jo)``, is at least
      ``-M/4``: above every infeasible one;
    - the highest state value ``hi = min(sum_j max(0, max_o u_jo), floor(rho * most_gpus))``
      (``rho`` the largest utility per GPU: a state of p GPUs is worth at most
      ``rho * p``; no such bound if an option of 0 GPUs has u > 0), plus the
      largest utility, is at most ``M - 1``: no packed candidate,
      ``(hi + u) * W + W - 1``, overflows;
    - the lowest packed candidate, the pad ``-M/2 * W`` plus an invalid
      option's ``-M/2 * W``, is ``-2**(bits - 1)``: the type's minimum.

    Parameters
    ----------
    utility, gpus, valid
        ``[n, K]`` option arrays (utilities as integers).
    idle_allowed
        ``[n]``: may the job get no GPUs.
    most_gpus
        The most GPUs a DP state counts (the padded state axis' last index, or the sum of the per-type
        capacities with several types).
    width
        The kernel's (padded) number of options.
    dtypes
        The types tried, narrowest first (the multi-type DP passes ``("int64",)``: its state counts change
        with every scheduling decision, and a second value type per shape would be a second compile of each).
    """
    shift = int(width).bit_length()  # W = 2**shift >= width + 1
    u = np.where(valid, utility, 0)
    if not u.size:
        u = np.zeros((1, 1), dtype=np.int64)
    row_max, row_min = u.max(axis=1), u.min(axis=1)
    u_top, u_low = int(row_max.max()), int(row_min.min())
    u_abs = max(u_top, -u_low)
    low = -int(row_min[row_min < 0].sum())
    sum_pos = int(row_max[row_max > 0].sum())
    by_rho: int | None = None  # floor(rho * most_gpus), computed only where the sum does not settle it
    for dtype in dtypes:
        vt = ValueType(dtype, shift, False)
        M = vt.half_range
        if M < 8 or u_abs >= M // 4 or low > M // 4:
            continue
        if sum_pos + max(u_top, 0) > M - 1:
            if by_rho is None:
                by_rho = _by_rho(u, gpus, valid, u_abs, most_gpus, sum_pos)
            if by_rho + max(u_top, 0) > M - 1:
                continue
        no_reset = bool(np.all(idle_allowed)) or sum_pos < M // 4
        return ValueType(dtype, shift, not no_reset)
    return ARGMAX64


def _by_rho(u: np.ndarray, gpus: np.ndarray, valid: np.ndarray, u_abs: int, most_gpus: int, sum_pos: int) -> int:
    """``floor(rho * most_gpus)`` (``rho`` the largest utility per GPU), or ``sum_pos`` where that bounds nothing.

    ``floor(rho * p) = max_o floor(u_o * p / k_o)``, exactly in int64 where no product overflows; no bound
    where an option of 0 GPUs has a positive utility.
    """
    if u_abs * max(int(most_gpus), 1) >= 1 << 62:
        return sum_pos
    k = np.where(valid, gpus, 1)
    if ((k <= 0) & (u > 0)).any():
        return sum_pos
    return min(sum_pos, int((np.maximum(u, 0) * int(most_gpus) // k).max()))
