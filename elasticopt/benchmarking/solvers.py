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

from elasticopt.errors import ValidationError
from elasticopt.solvers import Backend, available_solvers, get_backend
from elasticopt.solvers.options import parse_option_value, parse_solver_arg

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
        solver.check_options(options)


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
    SolverOptionError
        For options a backend does not accept (unknown names or bad values).
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
