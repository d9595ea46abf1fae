"""Backend options: the one check of names and values, and the ``NAME:key=value`` grammar.

Every backend declares its options and their defaults (``default_options``)
and, where a type is not enough, a rule per option (``option_rules``).
:func:`check_options` is the only place options are checked: a name the
backend does not know and a value that breaks a rule raise the same
:class:`~elasticopt.errors.SolverOptionError` before anything is solved.

The command line writes a solver with options as
``NAME:key=value,key=value`` (``cpsat:num_workers=8``, ``dp:fixing=false``);
:func:`parse_solver_arg` reads it for every subcommand that takes ``--solver``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from elasticopt.errors import SolverOptionError, ValidationError

__all__ = ["OptionRule", "SEED_RULE", "check_options", "parse_option_value", "parse_solver_arg", "threads_rule"]

#: An option's rule: (what is expected, in words; whether a value meets it).
OptionRule = tuple[str, Callable[[Any], bool]]


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_real(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


#: A solver library's random seed (CP-SAT, HiGHS and SCIP hold it in a 32-bit int: 10**12 was an ERROR or an
#: OverflowError from the library).
SEED_RULE: OptionRule = ("an integer in 0..2**31 - 1", lambda v: _is_int(v) and 0 <= v < 2**31)


def threads_rule(lo: int) -> OptionRule:
    """A library's thread count, ``lo`` (0: the library picks, where it may) to 1024."""
    what = f"an integer in {lo}..1024" + (" (0: the library picks)" if lo == 0 else "")
    return what, lambda v: _is_int(v) and lo <= v <= 1024


def _type_rule(default: Any) -> OptionRule | None:
    """The rule implied by a default value's type; None (anything) for a None default."""
    if isinstance(default, bool):
        return "true or false", lambda v: isinstance(v, bool)
    if isinstance(default, int):
        return "an integer", _is_int
    if isinstance(default, float):
        return "a number", _is_real
    if isinstance(default, str):
        return "a string", lambda v: isinstance(v, str)
    return None


def check_options(
    solver: str,
    defaults: Mapping[str, Any],
    options: Mapping[str, Any],
    rules: Mapping[str, OptionRule] | None = None,
) -> dict[str, Any]:
    """The defaults updated with ``options``, every name and value checked.

    Parameters
    ----------
    solver
        The backend's name, for messages.
    defaults
        Every option the backend accepts, with its default.
    options
        The options given.
    rules
        Per option, a rule that replaces the one implied by the default's type.

    Raises
    ------
    SolverOptionError
        For an unknown name, or a value that breaks its rule.
    """
    unknown = sorted(set(options) - set(defaults))
    if unknown:
        raise SolverOptionError(solver, unknown[0], ", ".join(sorted(defaults)) or "none", None, unknown=True)
    rules = rules or {}
    for key, value in options.items():
        rule = rules.get(key) or _type_rule(defaults[key])
        if rule is not None and not rule[1](value):
            raise SolverOptionError(solver, key, rule[0], value)
    merged = dict(defaults)
    merged.update(options)
    return merged


def parse_option_value(text: str) -> Any:
    """A command-line option value: JSON where it parses (numbers, true/false), True/False/None, else the string."""
    words = {"true": True, "false": False, "none": None, "null": None}
    if text.lower() in words:
        return words[text.lower()]
    try:
        return json.loads(text)
    except (json.JSONDecodeError, ValueError, RecursionError):
        return text


def parse_solver_arg(text: str) -> tuple[str, dict[str, Any]]:
    """``"cpsat:num_workers=8,linearization_level=2"`` -> ``("cpsat", {...})``.

    Values are parsed as JSON where they parse (numbers, true/false), else kept as strings.

    Raises
    ------
    ValidationError
        For an option without ``=`` or an empty name.
    """
    name, sep, rest = text.partition(":")
    opts: dict[str, Any] = {}
    if not name.strip() or (sep and not rest):
        raise ValidationError("--solver", "NAME or NAME:key=value,key=value", text)
    if sep:
        for part in rest.split(","):
            key, eq, val = part.partition("=")
            if not eq or not key.strip():
                raise ValidationError("--solver", "NAME or NAME:key=value,key=value", text)
            opts[key.strip()] = parse_option_value(val.strip())
    return name.strip(), opts
