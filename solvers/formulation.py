"""The 0/1 MILP of an option table as sparse arrays, shared by ``milp``, ``cpsat`` and ``pyomo`` (docs/design.md §3).

Columns (variables), in this order:

- ``x[i]`` in {0, 1}, i = 0..m-1: job ``rows[i]`` runs its option ``cols[i]``.
- Node variables, only on the GPU types where the totals do not imply
  placement (:func:`~elasticopt.models.table_placement.types_needing_placement`), and
  only for packed options i of such a type t, per node n of t with free GPUs:

  - ``y[i, n]`` in {0, 1}: option i uses node n;
  - ``z[i, n]`` integer in [0, min(k_i, free_n)]: GPUs of option i on node n
    (the issue's x[j, o, n]); for a one-node option (k_i <= g_t) z = k_i y is
    substituted and no z column exists.

Rows (constraints):

- job j: ``sum_o x[j, o] <= 1`` (``= 1`` when j may not idle; idle is the slack);
- type t: ``sum_{i of type t} k_i x[i] <= G_t``;
- option i with node variables: ``sum_n y[i, n] = x[i]`` (one node) or
  ``sum_n y[i, n] <= m_i x[i]`` and ``sum_n z[i, n] = k_i x[i]`` (m_i = ceil(k_i / g_t) nodes),
  with ``z[i, n] <= min(k_i, free_n) y[i, n]``;
- node n of such a type: ``sum of its packed GPUs <= free_n``.  Unpacked
  options need no node variables: they fill whatever the packed jobs leave,
  which the type row already bounds.

The objective maximises ``sum_i u_i x[i]`` (integers, exact in doubles below 2**53).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from elasticopt.errors import ModelTooLargeError
from elasticopt.models.table_placement import types_needing_placement
from elasticopt.models.table import OptionTable

__all__ = ["Formulation", "formulate", "node_columns", "MAX_COLUMNS"]

#: Most columns (option and node variables) :func:`formulate` builds; past it, ModelTooLargeError
#: (a Python build of 10^6 node columns takes ~10 s and ~1 GB; the ``placement`` family at
#: n = 10,000 on 10^6 GPUs would need ~10^8).
MAX_COLUMNS = 1_000_000


def node_columns(table: OptionTable) -> int:
    """How many node columns (y and z) :func:`formulate` would create, counted without building them."""
    total = 0
    for t in types_needing_placement(table):
        pool = table.pools[t]
        free = np.asarray(pool.free_per_node(), dtype=np.int64)
        g = pool.gpus_per_node
        sel = table.valid & table.packed & (table.gpu_type == t)
        k = np.sort(table.gpus[sel].astype(np.int64))
        if not k.size:
            continue
        one = k[k <= g]  # one node: a y per node with free >= k
        fs = np.sort(free)
        total += int((fs.size - np.searchsorted(fs, one, side="left")).sum())
        total += 2 * int((k > g).sum()) * int((free > 0).sum())  # several nodes: y and z per node with free GPUs
    return total


@dataclass(frozen=True)
class Formulation:
    """A sparse MILP.  Entry e of the matrix is ``coef[e]`` at (``row_of[e]``, ``col_of[e]``).

    Attributes
    ----------
    rows, cols
        Option column i is option ``cols[i]`` of job row ``rows[i]`` (columns 0..m-1).
    n_cols, n_rows
        Sizes.
    cost
        ``cost[c]``: objective coefficient of column c (u_i for option columns, 0 else).
    col_upper, integer
        Upper bound (lower bounds are 0) and integrality of each column.
    row_lower, row_upper
        Bounds of each row.
    row_of, col_of, coef
        The matrix in coordinate form.
    node_cols
        ``(option column i, type index, node index, y column, z column or -1)`` for every node variable pair.
    """

    rows: np.ndarray
    cols: np.ndarray
    n_cols: int
    n_rows: int
    cost: np.ndarray
    col_upper: np.ndarray
    integer: np.ndarray
    row_lower: np.ndarray
    row_upper: np.ndarray
    row_of: np.ndarray
    col_of: np.ndarray
    coef: np.ndarray
    node_cols: tuple[tuple[int, int, int, int, int], ...]

    def csc(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(start, index, value) of the matrix by columns."""
        order = np.lexsort((self.row_of, self.col_of))
        start = np.searchsorted(self.col_of[order], np.arange(self.n_cols + 1)).astype(np.int32)
        return start, self.row_of[order].astype(np.int32), self.coef[order].astype(np.float64)


def formulate(table: OptionTable) -> Formulation:
    """The MILP of ``table`` (module docstring).

    Raises
    ------
    ModelTooLargeError
        When the model would have more than :data:`MAX_COLUMNS` columns.
    """
    extra = node_columns(table) if types_needing_placement(table) else 0
    if table.n_options + extra > MAX_COLUMNS:
        raise ModelTooLargeError(
            f"the MILP would have {table.n_options + extra:,} columns ({table.n_options:,} options, {extra:,} node "
            f"variables), more than {MAX_COLUMNS:,} (solvers.formulation.MAX_COLUMNS); not built")
    rows, cols = np.nonzero(table.valid)
    n, m, T = table.n_jobs, rows.size, table.n_types
    k = table.gpus[rows, cols]
    ty = table.gpu_type[rows, cols]
    # job rows 0..n-1 and type rows n..n+T-1: two entries per option column
    row_of = [rows, n + ty]
    col_of = [np.arange(m), np.arange(m)]
    coef = [np.ones(m), k.astype(np.float64)]
    row_lower = [np.where(table.idle_allowed, 0.0, 1.0), np.full(T, -np.inf)]
    row_upper = [np.ones(n), np.asarray(table.capacities, dtype=np.float64)]
    cost = [table.utility[rows, cols].astype(np.float64)]
    col_upper = [np.ones(m)]
    integer = [np.ones(m, dtype=bool)]
    n_rows, n_cols = n + T, m
    node_cols: list[tuple[int, int, int, int, int]] = []
    for t in types_needing_placement(table):
        pool = table.pools[t]
        free = pool.free_per_node()
        g = pool.gpus_per_node
        node_row = {nd: n_rows + i for i, nd in enumerate(range(pool.nodes))}
        n_rows += pool.nodes
        row_lower.append(np.full(pool.nodes, -np.inf))
        row_upper.append(np.asarray(free, dtype=np.float64))
        er, ec, ev = [], [], []
        lo, up = [], []
        cu, ci = [], []
        for i in np.flatnonzero((ty == t) & table.packed[rows, cols]).tolist():
            ki = int(k[i])
            mi = -(-ki // g)
            link = n_rows  # sum_n y = x (one node) or sum_n y <= m x
            n_rows += 1
            er.append(link); ec.append(i); ev.append(-1.0 if mi == 1 else -float(mi))
            lo.append(0.0 if mi == 1 else -np.inf); up.append(0.0)
            if mi > 1:
                zsum = n_rows  # sum_n z = k x
                n_rows += 1
                er.append(zsum); ec.append(i); ev.append(-float(ki))
                lo.append(0.0); up.append(0.0)
            for nd in range(pool.nodes):
                if free[nd] == 0 or (mi == 1 and free[nd] < ki):
                    continue
                y = n_cols
                n_cols += 1
                cu.append(1.0); ci.append(True)
                er.append(link); ec.append(y); ev.append(1.0)
                if mi == 1:
                    er.append(node_row[nd]); ec.append(y); ev.append(float(ki))
                    node_cols.append((i, t, nd, y, -1))
                    continue
                z = n_cols
                n_cols += 1
                cap = float(min(ki, free[nd]))
                cu.append(cap); ci.append(True)
                er.append(zsum); ec.append(z); ev.append(1.0)
                er.append(node_row[nd]); ec.append(z); ev.append(1.0)
                zy = n_rows  # z - cap y <= 0
                n_rows += 1
                er.extend([zy, zy]); ec.extend([z, y]); ev.extend([1.0, -cap])
                lo.append(-np.inf); up.append(0.0)
                node_cols.append((i, t, nd, y, z))
        # rows created above in order: their bounds were appended to lo/up in creation order
        row_lower.append(np.asarray(lo, dtype=np.float64))
        row_upper.append(np.asarray(up, dtype=np.float64))
        row_of.append(np.asarray(er, dtype=np.int64))
        col_of.append(np.asarray(ec, dtype=np.int64))
        coef.append(np.asarray(ev, dtype=np.float64))
        cost.append(np.zeros(len(cu)))
        col_upper.append(np.asarray(cu, dtype=np.float64))
        integer.append(np.asarray(ci, dtype=bool))
    return Formulation(
        rows=rows,
        cols=cols,
        n_cols=n_cols,
        n_rows=n_rows,
        cost=np.concatenate(cost),
        col_upper=np.concatenate(col_upper),
        integer=np.concatenate(integer),
        row_lower=np.concatenate(row_lower),
        row_upper=np.concatenate(row_upper),
        row_of=np.concatenate(row_of).astype(np.int64),
        col_of=np.concatenate(col_of).astype(np.int64),
        coef=np.concatenate(coef),
        node_cols=tuple(node_cols),
    )
