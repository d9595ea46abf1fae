"""What a benchmark runs on: instance files and generated families.

An :class:`InstanceSpec` names one problem without holding it: the runner
loads (or generates) each instance only when it reaches it, so a sweep over
many large instances never holds more than one in memory.
"""

from __future__ import annotations

import glob
import itertools
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elasticopt.errors import ValidationError
from elasticopt.models import Problem, load_instance

__all__ = ["InstanceSpec", "family_instances", "file_instances", "size_pairs"]


@dataclass(frozen=True)
class InstanceSpec:
    """One benchmark instance: a file, or a generator family with its arguments.

    Attributes
    ----------
    name
        Unique label used in the results.
    path
        Instance file (``elasticopt-instance/1``); None for a generated one.
    family
        Generator family (see :mod:`elasticopt.generate`); None for a file.
    jobs, gpus, seed
        Generator arguments (None for a file).
    family_options
        Extra generator keywords (e.g. ``options=10`` for the mck families).
    """

    name: str
    path: str | None = None
    family: str | None = None
    jobs: int | None = None
    gpus: int | None = None
    seed: int | None = None
    family_options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def group(self) -> str:
        """Summary group: the family of a generated instance, the file stem of a file."""
        return str(self.family) if self.path is None else Path(self.path).stem

    @property
    def source(self) -> str:
        """``"file"`` or ``"generated"``."""
        return "file" if self.path is not None else "generated"

    def load(self) -> Problem:
        """Read or generate the problem.

        Raises
        ------
        InstanceError, ValidationError
            For a bad file or bad generator arguments.
        """
        if self.path is not None:
            return load_instance(self.path)
        from elasticopt.generate import generate_instance

        return generate_instance(
            str(self.family), int(self.jobs or 0), int(self.gpus or 0), int(self.seed or 0), **dict(self.family_options)
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description (enough to regenerate the instance)."""
        return {
            "name": self.name,
            "source": self.source,
            "group": self.group,
            "path": self.path,
            "family": self.family,
            "jobs": self.jobs,
            "gpus": self.gpus,
            "seed": self.seed,
            "family_options": dict(self.family_options),
        }


def size_pairs(jobs: Sequence[int], gpus: Sequence[int], *, cross: bool = False) -> list[tuple[int, int]]:
    """The (jobs, GPUs) sizes of a sweep.

    Parameters
    ----------
    jobs, gpus
        Job counts and cluster sizes.
    cross
        False (default): the lists are **paired** element by element
        (``--jobs 200 1000 --gpus 256 1024`` is 200 x 256 and 1000 x 1024); a
        list of one value is paired with every value of the other.  True: every
        job count with every cluster size.

    Raises
    ------
    ValidationError
        If paired lists have different lengths (neither of length 1).
    """
    jobs, gpus = list(jobs), list(gpus)
    if not jobs or not gpus:
        raise ValidationError("--jobs/--gpus", "at least one job count and one GPU count", f"{jobs} / {gpus}")
    if cross:
        return list(itertools.product(jobs, gpus))
    if len(jobs) == 1:
        jobs = jobs * len(gpus)
    if len(gpus) == 1:
        gpus = gpus * len(jobs)
    if len(jobs) != len(gpus):
        raise ValidationError(
            "--jobs/--gpus",
            "lists of equal length (paired element by element) or one of length 1",
            f"{len(jobs)} job counts and {len(gpus)} GPU counts",
            "pass --cross to run every job count with every GPU count",
        )
    return list(zip(jobs, gpus))


def _options_label(opts: Mapping[str, Any]) -> str:
    return "".join(f"-{k}{v}" for k, v in sorted(opts.items()))


def family_instances(
    families: Iterable[str],
    jobs: Sequence[int],
    gpus: Sequence[int],
    seeds: Sequence[int] = (0,),
    *,
    cross: bool = False,
    **family_options: Any,
) -> list[InstanceSpec]:
    """Generated instances: families x sizes x seeds.

    Parameters
    ----------
    families
        Generator family names (see :data:`elasticopt.generate.FAMILIES`).
    jobs, gpus
        Sizes, paired or crossed (see :func:`size_pairs`).
    seeds
        One instance per seed and size.
    cross
        Cross ``jobs`` with ``gpus`` instead of pairing them.
    **family_options
        Passed to :func:`elasticopt.generate.generate_instance`.

    Raises
    ------
    ValidationError
        For an unknown family or non-positive sizes.
    """
    from elasticopt.generate import ALL_FAMILIES as FAMILIES

    fams = list(families)
    for f in fams:
        if f not in FAMILIES:
            raise ValidationError("family", "one of " + ", ".join(FAMILIES), f)
    for what, vals in (("jobs", jobs), ("gpus", gpus)):
        for v in vals:
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValidationError(what, "integers >= 1", v)
    sizes = size_pairs(jobs, gpus, cross=cross)
    label = _options_label(family_options)
    return [
        InstanceSpec(
            name=f"{fam}-n{n}-g{g}-s{seed}{label}",
            family=fam,
            jobs=n,
            gpus=g,
            seed=int(seed),
            family_options=dict(family_options),
        )
        for fam in fams
        for n, g in sizes
        for seed in seeds
    ]


def file_instances(patterns: Iterable[str | os.PathLike[str]]) -> list[InstanceSpec]:
    """Instances from files: paths or glob patterns (``**`` recursive), sorted per pattern.

    Raises
    ------
    ValidationError
        If a pattern matches no file.
    """
    specs: list[InstanceSpec] = []
    seen: set[str] = set()
    for pat in patterns:
        pat = str(pat)
        matches = sorted(glob.glob(pat, recursive=True)) if glob.has_magic(pat) else [pat]
        matches = [m for m in matches if Path(m).is_file()]
        if not matches:
            raise ValidationError("--instances", "a file or a glob pattern matching at least one file", pat)
        for m in matches:
            key = os.path.normpath(m)
            if key in seen:
                continue
            seen.add(key)
            specs.append(InstanceSpec(name=key, path=key))
    return specs
