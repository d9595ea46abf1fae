"""Named profiles: the fitted parameters shipped in ``profiles/data/*.json``.

Each JSON file holds one measurement set (``a100``, ``t4``) with its source,
licence and, per network, the fitted :class:`ParametricProfile`.  The files are
written by ``validation/fit_profiles.py`` from the public data; the data
itself is not part of the project.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from elasticopt.errors import ValidationError
from elasticopt.profiles.parametric import ParametricProfile

__all__ = ["PROFILE_FORMAT", "get_profile", "profile_names", "profile_sets"]

PROFILE_FORMAT = "elasticopt-profiles/1"


@lru_cache(maxsize=1)
def _load() -> tuple[dict[str, ParametricProfile], dict[str, dict]]:
    profiles: dict[str, ParametricProfile] = {}
    sets: dict[str, dict] = {}
    folder = resources.files("elasticopt.profiles") / "data"
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".json"):
            continue
        doc = json.loads(entry.read_text(encoding="utf-8"))
        if doc.get("format") != PROFILE_FORMAT:
            raise ValidationError(f"profiles/data/{entry.name}.format", repr(PROFILE_FORMAT),
                                  doc.get("format"))
        sets[doc["set"]] = {k: v for k, v in doc.items() if k != "profiles"}
        for name, d in doc["profiles"].items():
            profiles[name] = ParametricProfile.from_dict(name, d)
    return profiles, sets


def profile_names() -> list[str]:
    """Names of every shipped profile, sorted (e.g. ``"a100/resnet50"``)."""
    return sorted(_load()[0])


def profile_sets() -> dict[str, dict]:
    """Per measurement set: source, licence, hardware, how the fit was made."""
    return {k: dict(v) for k, v in _load()[1].items()}


def get_profile(name: str) -> ParametricProfile:
    """The named fitted profile.

    Raises
    ------
    ValidationError
        If no profile has that name; the message lists the known names.
    """
    profiles = _load()[0]
    try:
        return profiles[name]
    except (KeyError, TypeError):
        raise ValidationError(
            "profile", "one of " + ", ".join(sorted(profiles)), name,
            hint="profile names are '<hardware>/<network>'",
        ) from None
