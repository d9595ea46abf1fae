"""Which solvers a benchmark runs: registered backends or any solver object.

A solver is anything with a ``name`` and ``solve(table, *, time_limit_s=None,
**options) -> Solution`` -- a registered backend, an unregistered
:class:`~elasticopt.solvers.Backend` subclass instance, or a user's own object.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from elasticopt.errors import SolverError, ValidationError
from elasticopt.solvers import Backend, available_solvers, get_backend

__all__ = ["SolverSpec", "resolve_solvers", "parse_solver_arg", "parse_option_value"]


@dataclass(frozen=True)
class SolverSpec:
    """One solver configuration of a benchmark.

    Attributes
    ----------
    label
        Unique name in the results (``"cpsat"``, ``"cpsat[num_workers=8]"``).
    solver
        The object whose ``solve`` is called.
    options
        Keyword options passed to every ``solve`` call.
    """

    label: str
    solver: Any
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The solver's own name (the label without options)."""
        return str(getattr(self.solver, "name", self.label))

    @property
    def options_text(self) -> str:
        """``key=value,...`` (values as JSON), "" without options."""
        return ",".join(f"{k}={json.dumps(v, default=str)}" for k, v in sorted(self.options.items()))


def _label(name: str, options: Mapping[str, Any]) -> str:
    if not options:
        return name
    return name + "[" + ",".join(f"{k}={v}" for k, v in sorted(options.items())) + "]"


def _check_options(solver: Any, options: Mapping[str, Any]) -> None:
    if isinstance(solver, Backend) and options:
        unknown = sorted(set(options) - set(solver.default_options))
        if unknown:
            known = ", ".join(sorted(solver.default_options)) or "none"
            raise SolverError(
                f"solver {solver.name!r} got unknown option(s) {', '.join(unknown)}; it accepts: {known}"
            )


def _one(item: Any) -> SolverSpec:
    if isinstance(item, SolverSpec):
        _check_options(item.solver, item.options)
        return item
    options: Mapping[str, Any] = {}
    if isinstance(item, tuple):
        if len(item) != 2 or not isinstance(item[1], Mapping):
            raise ValidationError("solvers[*]", "a name, a solver object, or (name or object, options dict)", item)
        item, options = item
    if isinstance(item, str):
        name, parsed = parse_solver_arg(item)
        options = {**parsed, **options}
        solver = get_backend(name)
    else:
        solver = item
        name = getattr(solver, "name", None)
        if not isinstance(name, str) or not name or not callable(getattr(solver, "solve", None)):
            raise ValidationError(
                "solvers[*]",
                "a registered solver name or an object with a 'name' and a 'solve(table, *, time_limit_s=None)' method",
                type(item).__name__,
            )
    _check_options(solver, options)
    return SolverSpec(_label(name, options), solver, dict(options))


def resolve_solvers(solvers: Iterable[Any] | str | None = None) -> list[SolverSpec]:
    """Turn names, objects and ``(name or object, options)`` pairs into :class:`SolverSpec` s.

    Parameters
    ----------
    solvers
        None or ``"all"``: every installed registered backend.  Otherwise an
        iterable of: a registered name (``"cpsat"``; ``"cpsat:num_workers=8"``
        sets options, values parsed as JSON when they parse), a solver object, a
        ``(name or object, options)`` pair, or a :class:`SolverSpec`.  ``"all"``
        inside the list expands to every installed backend.

    Raises
    ------
    UnknownSolverError, SolverUnavailableError
        For a name that is not registered or not installed.
    SolverError
        For options a backend does not accept.
    ValidationError
        For an object without ``name``/``solve``, or two solvers with one label.
    """
    if solvers is None or solvers == "all":
        items: list[Any] = list(available_solvers())
    elif isinstance(solvers, str):
        items = [solvers]
    else:
        items = []
        for s in solvers:
            items.extend(available_solvers() if s == "all" else [s])
    specs = [_one(s) for s in items]
    labels = [s.label for s in specs]
    dup = sorted({lab for lab in labels if labels.count(lab) > 1})
    if dup:
        raise ValidationError("solvers", "distinct solver labels", ", ".join(dup), "give objects distinct 'name's")
    if not specs:
        raise ValidationError("solvers", "at least one solver", "none (no backend installed?)")
    return specs


def parse_option_value(text: str) -> Any:
    """A command-line option value: JSON where it parses (numbers, true/false), True/False/None, else the string."""
    words = {"true": True, "false": False, "none": None, "null": None}
    if text.lower() in words:
        return words[text.lower()]
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_solver_arg(text: str) -> tuple[str, dict[str, Any]]:
    """``"cpsat:num_workers=8,linearization_level=2"`` -> ``("cpsat", {...})``.

    Values are parsed as JSON where they parse (numbers, true/false), else kept as strings.

    Raises
    ------
    ValidationError
        For an option without ``=``.
    """
    name, sep, rest = text.partition(":")
    opts: dict[str, Any] = {}
    if sep and rest:
        for part in rest.split(","):
            key, eq, val = part.partition("=")
            if not eq or not key.strip():
                raise ValidationError("--solver", "NAME or NAME:key=value,key=value", text)
            opts[key.strip()] = parse_option_value(val.strip())
    return name.strip(), opts
