"""Named profiles: the fitted parameters shipped in ``profiles/data/*.json``.

Each JSON file holds one measurement set (``a100``, ``t4``) with its source,
licence and, per network, the fitted :class:`ParametricProfile`.  The files are
written by ``validation/fit_profiles.py`` from the public data; the data
itself is not part of the project.

Your own profiles join them with :func:`register_profile` (for example a
:class:`~elasticopt.profiles.TabularProfile` read from a CSV file by
:func:`~elasticopt.profiles.read_throughput_csv`): instance files, workloads
and :func:`get_profile` then find them by name.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any
from importlib import resources

from elasticopt.errors import DuplicateNameError, ValidationError
from elasticopt.profiles.throughput import ThroughputModel
from elasticopt.profiles.parametric import ParametricProfile

__all__ = [
    "PROFILE_FORMAT", "get_profile", "hetero_profile_names", "hetero_profile_sets", "profile_names", "profile_sets", "register_profile",
    "registry_changes", "unregister_profile",
]

#: Profiles registered at run time, by name.
_REGISTERED: dict[str, ThroughputModel] = {}
#: How many times the registered profiles changed (what a cache of jobs built from profile names keys on).
_CHANGES = [0]

PROFILE_FORMAT = "elasticopt-profiles/1"


def _factor(name: str, d: dict):
    from elasticopt.profiles.hetero_factor import FactorProfile

    return FactorProfile.from_dict(name, d)


#: Profile kind (``"kind"`` of a profile entry) -> its reader.
_KINDS = {"parametric": ParametricProfile.from_dict, "factor": _factor}


def _read_sets(folder, where: str, profiles: dict[str, ParametricProfile]) -> dict[str, dict]:
    sets: dict[str, dict] = {}
    if not folder.is_dir():
        return sets
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".json") or entry.name.startswith("efficiency_"):
            continue  # efficiency_*.json: statistical efficiency (elasticopt.profiles.efficiency)
        doc = json.loads(entry.read_text(encoding="utf-8"))
        if doc.get("format") != PROFILE_FORMAT:
            raise ValidationError(f"{where}/{entry.name}.format", repr(PROFILE_FORMAT), doc.get("format"))
        sets[doc["set"]] = {k: v for k, v in doc.items() if k != "profiles"}
        for name, d in doc["profiles"].items():
            profiles[name] = _KINDS[d.get("kind", "parametric")](name, d)
    return sets


@lru_cache(maxsize=1)
def _load() -> tuple[dict[str, ParametricProfile], dict[str, dict], dict[str, dict], dict[str, Any]]:
    profiles: dict[str, ParametricProfile] = {}
    hetero_profiles: dict[str, Any] = {}
    data = resources.files("elasticopt.profiles") / "data"
    sets = _read_sets(data, "profiles/data", profiles)
    hetero = _read_sets(data / "hetero", "profiles/data/hetero", hetero_profiles)
    return profiles, sets, hetero, hetero_profiles


def hetero_profile_names() -> list[str]:
    """Names of the profiles of the heterogeneous-GPU sets (Gavel's ``k80/...``, ``p100/...``, ``v100/...``).

    Kept apart from :func:`profile_names` (the single-type A100 and T4 sets the
    paper workloads draw from); :func:`get_profile` and instance files resolve both.
    """
    return sorted(_load()[3])


def register_profile(profile: ThroughputModel, *, replace: bool = False) -> ThroughputModel:
    """Make ``profile`` known under its ``name`` (``"hardware/network"`` by convention).

    Instance files (``"profile": NAME``), workloads and :func:`get_profile`
    find it from then on, in this process.

    Parameters
    ----------
    profile
        Any :class:`~elasticopt.models.ThroughputModel` (a ``TabularProfile``,
        a ``ParametricProfile``, your own class).
    replace
        Allow replacing a profile registered earlier under the same name.
        A shipped profile is never replaced.

    Returns
    -------
    ThroughputModel
        ``profile``, so the call can wrap its construction.

    Raises
    ------
    ValidationError
        If ``profile`` is not a throughput model, its name is empty or has
        whitespace, or is a shipped profile's.
    DuplicateNameError
        If another profile is registered under the name and ``replace`` is False.
    """
    if not isinstance(profile, ThroughputModel):
        raise ValidationError("profile", "a ThroughputModel (name, samples_per_s, candidates)",
                              type(profile).__name__)
    name = profile.name
    if not isinstance(name, str) or not name or any(c.isspace() for c in name):
        raise ValidationError("profile.name", "a non-empty name without spaces, e.g. 'mylab/resnet50'", name)
    if name in _load()[0] or name in _load()[3]:
        raise ValidationError("profile.name", "a name no shipped profile has", name,
                              hint="pick another name, e.g. with your lab or hardware as prefix")
    if name in _REGISTERED and not replace and _REGISTERED[name] is not profile:
        raise DuplicateNameError("profile", name, _REGISTERED[name])
    _REGISTERED[name] = profile
    _CHANGES[0] += 1
    return profile


def unregister_profile(name: str) -> None:
    """Forget a profile registered with :func:`register_profile` (no error if unknown)."""
    if _REGISTERED.pop(name, None) is not None:
        _CHANGES[0] += 1


def registry_changes() -> int:
    """How many times :func:`register_profile` / :func:`unregister_profile` changed the registered profiles in
    this process (a job translated from a profile name is valid while it stays the same)."""
    return _CHANGES[0]


def profile_names() -> list[str]:
    """Names of every shipped and registered profile, sorted (e.g. ``"a100/resnet50"``)."""
    return sorted(set(_load()[0]) | set(_REGISTERED))


def profile_sets() -> dict[str, dict]:
    """Per measurement set of the single-type profiles (A100, T4): source, licence, hardware, how the fit was made."""
    return {k: dict(v) for k, v in _load()[1].items()}


def hetero_profile_sets() -> dict[str, dict]:
    """Per measurement set of several GPU types with packed and spread rows (Gavel's K80, P100, V100)."""
    return {k: dict(v) for k, v in _load()[2].items()}


def get_profile(name: str) -> ThroughputModel:
    """The named profile: a shipped fitted one or one given to :func:`register_profile`.

    Raises
    ------
    ValidationError
        If no profile has that name; the message lists the known names.
    """
    profiles = _load()[0]
    try:
        if name in _REGISTERED:
            return _REGISTERED[name]
        return profiles[name] if name in profiles else _load()[3][name]
    except (KeyError, TypeError):
        raise ValidationError(
            "profile", "one of " + ", ".join(profile_names() + hetero_profile_names()), name,
            hint="profile names are '<hardware>/<network>'",
        ) from None
