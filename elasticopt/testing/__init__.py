"""Testing helpers for elasticopt and for users testing their own solvers.

- :mod:`elasticopt.testing.strategies`: hypothesis strategies generating problems;
- :mod:`elasticopt.testing.brute`: brute-force optimum of tiny problems.
- :mod:`elasticopt.testing.fuzz`: mutated instance files and in-process
  ``elasticopt solve`` runs, sorted into outcome classes (``validation/fuzz_cli.py``);
- :mod:`elasticopt.testing.toy`: small analytic throughput models and jobs (fixtures).

Both need ``hypothesis`` only when the strategies are used (``pip install 'elasticopt[test]'``).
"""
