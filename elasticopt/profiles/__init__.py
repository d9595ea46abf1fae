"""Throughput profiles of real networks, fitted to public measurements (docs/design.md §6).

- :class:`TabularProfile`: measured points, interpolated, never extrapolated.
- :class:`ParametricProfile`: compute linear in the per-GPU batch, overlapped
  with gradient synchronisation that grows with k and steps across nodes.
- :func:`get_profile` / :func:`profile_names`: the fitted named profiles
  (``"a100/resnet50"``, ``"t4/imagenet"``, ...), shipped in ``data/*.json``.
- :func:`read_throughput_csv` / :func:`register_profile`: your own measured
  throughputs, from a CSV file, usable by name like the shipped ones.
"""

from elasticopt.profiles.parametric import IterationTimeParams, ParametricProfile, iteration_time_s
from elasticopt.profiles.csvtable import read_throughput_csv
from elasticopt.profiles.registry import (
    get_profile,
    hetero_profile_names,
    hetero_profile_sets,
    profile_names,
    profile_sets,
    register_profile,
    unregister_profile,
)
from elasticopt.profiles.tabular import TabularProfile

__all__ = [
    "IterationTimeParams",
    "ParametricProfile",
    "TabularProfile",
    "get_profile",
    "hetero_profile_names",
    "hetero_profile_sets",
    "iteration_time_s",
    "profile_names",
    "profile_sets",
    "read_throughput_csv",
    "register_profile",
    "unregister_profile",
]
