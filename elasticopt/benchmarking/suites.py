"""Named benchmark suites: fixed instances, solvers, limit and shift, so a published table can be regenerated.

``reference`` (``elasticopt bench --suite reference``): every generator family
(:data:`elasticopt.generate.ALL_FAMILIES`) at n in {1000, 10000} jobs crossed
with G in {1024, 10^5, 10^6} GPUs, seeds 0, 1, 2 (162 instances); the exact
backends ``dp``, ``milp``, ``cpsat``, ``scip`` (those installed); one timed
solve after one warm-up per solver and instance; time limit 60 s; shifted
geometric means with a 10 ms shift.  ``numpy-dp`` (the same recurrence as
``dp``, the readable reference, limited to 4e8 table cells) and ``pyomo``
(HiGHS behind a modelling layer, which ``milp`` already measures) are left
out; add them with ``--solver``.  A subset (``--seeds 0``, ``--family``,
``--jobs``, ``--gpus`` naming members of the suite) keeps its definition.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from elasticopt.benchmarking.instances import InstanceSpec, family_instances
from elasticopt.errors import ValidationError

__all__ = ["Suite", "SUITES", "get_suite"]


@dataclass(frozen=True)
class Suite:
    """A named benchmark: instances (families x jobs x GPUs x seeds, crossed) and how they are run."""

    name: str
    description: str
    families: tuple[str, ...]
    jobs: tuple[int, ...]
    gpus: tuple[int, ...]
    seeds: tuple[int, ...]
    solvers: tuple[str, ...]
    time_limit_s: float
    repeats: int = 1
    shift_s: float = 0.01

    def installed_solvers(self) -> list[str]:
        """The suite's solvers that are installed (the others are named by :meth:`missing_solvers`)."""
        from elasticopt.solvers import available_solvers

        have = set(available_solvers())
        return [s for s in self.solvers if s in have]

    def missing_solvers(self) -> list[str]:
        """The suite's solvers that are not installed."""
        return [s for s in self.solvers if s not in self.installed_solvers()]

    def instances(self, *, families: Sequence[str] | None = None, jobs: Sequence[int] | None = None,
                  gpus: Sequence[int] | None = None, seeds: Sequence[int] | None = None) -> list[InstanceSpec]:
        """The suite's instances, or the subset with the given families / sizes / seeds.

        Raises
        ------
        ValidationError
            For a family or size that is not in the suite (seeds may be any).
        """
        for what, given, allowed in (("--family", families, self.families), ("--jobs", jobs, self.jobs),
                                     ("--gpus", gpus, self.gpus)):
            bad = [v for v in (given or ()) if v not in allowed]
            if bad:
                raise ValidationError(what, f"members of suite {self.name!r}: {', '.join(map(str, allowed))}",
                                      ", ".join(map(str, bad)), "leave it out to run the whole suite")
        return family_instances(list(families or self.families), list(jobs or self.jobs), list(gpus or self.gpus),
                                list(self.seeds if seeds is None else seeds), cross=True)

    def to_dict(self) -> dict:
        """JSON-ready definition."""
        return {"name": self.name, "families": list(self.families), "jobs": list(self.jobs), "gpus": list(self.gpus),
                "seeds": list(self.seeds), "solvers": list(self.solvers), "time_limit_s": self.time_limit_s,
                "repeats": self.repeats, "shift_s": self.shift_s}


def _reference() -> Suite:
    from elasticopt.generate import ALL_FAMILIES

    return Suite(
        name="reference",
        description="every generator family, n in {1000, 10000} x G in {1024, 1e5, 1e6}, seeds 0-2, exact backends",
        families=tuple(ALL_FAMILIES),
        jobs=(1000, 10000),
        gpus=(1024, 100_000, 1_000_000),
        seeds=(0, 1, 2),
        solvers=("dp", "milp", "cpsat", "scip"),
        time_limit_s=60.0,
    )


#: Suite name -> how to build it (built on first use: the generator's family list is read then).
SUITES = {"reference": _reference}


def get_suite(name: str) -> Suite:
    """The suite called ``name``.

    Raises
    ------
    ValidationError
        For an unknown name, listing the known ones.
    """
    make = SUITES.get(name)
    if make is None:
        raise ValidationError("--suite", "one of " + ", ".join(SUITES), name)
    return make()
