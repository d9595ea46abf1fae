"""The dynamic program and the exact reductions in front of it (docs/design.md §3).

- :mod:`~elasticopt.solvers.dp.lagrangian_bound`: the Lagrangian bound of the
  option table (float multipliers, with a proven rounding margin);
- :mod:`~elasticopt.solvers.dp.integer_bound`: the same bound in exact integer
  arithmetic at a rational multiplier, and the slack fill of the incumbent;
- :mod:`~elasticopt.solvers.dp.reduced_costs`: reduced-cost fixing (options
  that cannot be in a strictly better allocation are removed) and the quick
  proof of optimality;
- :mod:`~elasticopt.solvers.dp.windowed`: the DP over only the states that can
  still beat the incumbent;
- :mod:`~elasticopt.solvers.dp.kernels`: the compiled loops of the bounds;
- :mod:`~elasticopt.solvers.dp.value_type` and :mod:`~elasticopt.solvers.dp.packed`:
  the jax DP's value type (packed int32 or int64, proven per table) and its
  per-job step and backtrack;
- :mod:`~elasticopt.solvers.dp.jax_kernels`: the jax DP's compiled scans and
  the chunks jobs are scanned in;
- :mod:`~elasticopt.solvers.dp.jax_backend` (``dp``) and
  :mod:`~elasticopt.solvers.dp.numpy_backend` (``numpy-dp``): the registered
  backends.

The model (``elasticopt.models``) never imports from here: these are solver
algorithms, not parts of the problem's definition.
"""
