"""Every error elasticopt raises, under one base class.

Each error says *what* was wrong, *where* (file, JSON path, field, job id),
what was expected, what was found and, where it helps, how to fix it.  The CLI
prints ``str(error)`` without a traceback and exits non-zero.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "ElasticoptError",
    "ValidationError",
    "InstanceError",
    "DuplicateNameError",
    "SolverError",
    "SolverOptionError",
    "ModelTooLargeError",
    "UnknownSolverError",
    "SolverUnavailableError",
    "LauncherError",
    "OutputError",
    "format_path",
    "short_repr",
]


#: Longest found value a message prints before cutting it short.
MAX_FOUND_CHARS = 200


def short_repr(value: object, limit: int = MAX_FOUND_CHARS) -> str:
    """``repr(value)``, cut to about ``limit`` characters with the full length noted."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[: limit - 40]}... ({len(text):,} characters in all)"


def format_path(parts: Sequence[str | int]) -> str:
    """Render a JSON / field path as ``jobs[3].batch.max_local``.

    Parameters
    ----------
    parts
        Keys (str) and list indices (int), outermost first.
    """
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(root)"


class ElasticoptError(Exception):
    """Base class of every error raised by elasticopt."""


class ValidationError(ElasticoptError, ValueError):
    """A model object was built with a value that breaks one of its rules.

    Parameters
    ----------
    path
        Field path, e.g. ``jobs[2].batch_min`` or ``job 'bert-b'.gpus_max``.
    expected
        The rule, in words ("an integer >= 1").
    found
        The value that broke it.
    hint
        Optional advice on how to fix it.
    """

    def __init__(self, path: str, expected: str, found: object, hint: str | None = None):
        self.path = path
        self.expected = expected
        self.found = found
        self.hint = hint
        super().__init__(self._render())

    def _render(self) -> str:
        msg = f"{self.path}: expected {self.expected}, found {short_repr(self.found)}"
        if self.hint:
            msg += f" ({self.hint})"
        return msg


class InstanceError(ValidationError):
    """An instance file is not valid: names the file and the JSON path.

    Parameters
    ----------
    file
        The file the instance came from (or ``"<memory>"``).
    path
        JSON path inside the file, e.g. ``jobs[3].batch.max_local``.
    expected, found, hint
        As for :class:`ValidationError`.
    """

    def __init__(self, file: str, path: str, expected: str, found: object, hint: str | None = None):
        self.file = file
        super().__init__(path, expected, found, hint)

    def _render(self) -> str:
        return f"{self.file}: {super()._render()}"


class DuplicateNameError(ValidationError):
    """A registry (solvers, policies, profiles, objectives) was given a name it already has.

    Parameters
    ----------
    registry
        What the registry holds, e.g. ``"solver"``.
    name
        The name asked for.
    taken_by
        What is registered under it now (described in the message).
    """

    def __init__(self, registry: str, name: str, taken_by: object):
        self.registry = registry
        self.name = name
        article = "an" if registry[:1] in "aeiou" else "a"
        super().__init__(f"{registry} name", f"{article} {registry} name not registered yet ({name!r} is taken by "
                         f"{_describe_entry(taken_by)})", name,
                         hint="pass replace=True to replace it, or choose another name")


def _describe_entry(obj: object) -> str:
    mod, qual = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if mod and qual:
        return f"{mod}.{qual}"
    fn = getattr(obj, "values", None)  # an Objective: name its value function
    if callable(fn) and getattr(fn, "__qualname__", None):
        return f"{type(obj).__name__} {getattr(obj, 'name', '')!r} ({fn.__module__}.{fn.__qualname__})"
    return short_repr(obj, 80)


class SolverError(ElasticoptError):
    """A solver backend failed or was asked for something it cannot do."""


class ModelTooLargeError(SolverError):
    """A backend's model of the option table would pass its size limit (memory), so it is not built.

    :meth:`elasticopt.solvers.Backend.solve` answers it as ``Status.LIMIT``
    with this message, as a solver's own memory limit is.
    """


class SolverOptionError(SolverError, ValueError):
    """A backend option with a name the backend does not know, or a value it does not accept.

    Parameters
    ----------
    solver
        The backend's name.
    option
        The option's name.
    expected
        The rule, in words (for an unknown name: the options it accepts).
    found
        The value given.
    unknown
        Whether the name itself is unknown (then ``found`` is not shown).
    """

    def __init__(self, solver: str, option: str, expected: str, found: object, *, unknown: bool = False):
        self.solver = solver
        self.option = option
        self.expected = expected
        self.found = found
        if unknown:
            msg = f"solver {solver!r} got unknown option {option!r}; it accepts: {expected}"
        else:
            msg = f"solver {solver!r} option {option!r}: expected {expected}, found {short_repr(found)}"
        super().__init__(msg)


class UnknownSolverError(SolverError, KeyError):
    """No backend is registered under the requested name."""

    def __init__(self, name: str, registered: Sequence[str], installed: Sequence[str]):
        self.name = name
        self.registered = tuple(registered)
        self.installed = tuple(installed)
        super().__init__(
            f"unknown solver {name!r}: registered solvers are {', '.join(self.registered)}; "
            f"installed here: {', '.join(self.installed) or 'none'}"
        )

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class SolverUnavailableError(SolverError):
    """A registered backend whose library is not installed."""

    def __init__(self, name: str, missing: Sequence[str], extra: str | None):
        self.name = name
        self.missing = tuple(missing)
        self.extra = extra
        fix = f"pip install 'elasticopt[{extra}]'" if extra else "install " + ", ".join(missing)
        super().__init__(
            f"solver {name!r} needs {', '.join(self.missing)}, which is not installed; fix: {fix}"
        )


class LauncherError(ElasticoptError):
    """The launcher cannot do what it was asked (a missing backend library, an impossible placement, a bug)."""


class OutputError(ElasticoptError, OSError):
    """A result could not be written where it was asked for (a folder given as the file, no permission, no space).

    Parameters
    ----------
    path
        The destination asked for.
    reason
        What the system said (``strerror``), or what is there ("a directory").
    hint
        How to fix it.
    """

    def __init__(self, path: str, reason: str, hint: str):
        self.path, self.reason, self.hint = path, reason, hint
        ElasticoptError.__init__(self, f"{path}: cannot write the output there ({reason}); {hint}")
