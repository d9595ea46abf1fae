"""Testing helpers for elasticopt and for users testing their own solvers.

- :mod:`elasticopt.testing.strategies`: hypothesis strategies generating problems;
- :mod:`elasticopt.testing.brute`: brute-force optimum of tiny problems.

Both need ``hypothesis`` only when the strategies are used (``pip install 'elasticopt[test]'``).
"""
