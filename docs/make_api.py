"""Write docs/api.md, the API reference of ``elasticopt``, from the docstrings.

Usage::

    python docs/make_api.py            # rewrite docs/api.md
    python docs/make_api.py --check    # exit 1 if docs/api.md is not what it would write

Every name of ``elasticopt.__all__`` gets a section (grouped by the package it
comes from) with its signature and its numpydoc docstring; a class also lists
its public methods and properties with their first docstring line.
"""

from __future__ import annotations

import argparse
import enum
import inspect
import re
import sys
from pathlib import Path

import elasticopt

OUT = Path(__file__).resolve().parent / "api.md"

#: Module prefix -> section title, in the order they appear.
GROUPS = (
    ("elasticopt.models", "Problems and instance files"),
    ("elasticopt.solvers", "Solving, and your own solver"),
    ("elasticopt.profiles", "Throughput profiles, and your own data"),
    ("elasticopt.scheduling", "Simulation and policies"),
    ("elasticopt.errors", "Errors"),
)

_SECTION = re.compile(r"^(\w[\w ]*)\n-{3,}\n", re.M)


def _markdown(doc: str) -> str:
    """numpydoc text -> markdown: section titles in bold, parameters as a list."""
    out: list[str] = []
    lines = doc.splitlines()
    in_section = False
    i = 0
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if line.strip() and set(nxt.strip()) == {"-"} and len(nxt.strip()) >= 3:
            out += ["", f"**{line.strip()}**", ""]
            in_section = line.strip() not in ("Examples", "Notes")
            i += 2
            continue
        if in_section and line and not line.startswith(" "):
            out.append(f"- `{line.strip()}`")
        elif in_section and line.startswith(" "):
            out.append("  " + line.strip())
        else:
            out.append(line)
        i += 1
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out).strip())


def _signature(name: str, obj: object) -> str:
    """``name(params) -> result``, types without their module path; a bare name for enums and protocols."""
    if inspect.isclass(obj) and (issubclass(obj, enum.Enum) or getattr(obj, "_is_protocol", False)):
        return name
    try:
        try:
            sig = inspect.signature(obj, eval_str=True)  # type: ignore[arg-type]
        except NameError:  # an annotation names a type imported for type checking only
            sig = inspect.signature(obj)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return name
    text = re.sub(r"\b(?:[a-z_]\w*\.)+([A-Z]\w*)", r"\1", f"{name}{sig}")
    return text.removesuffix(" -> None") if inspect.isclass(obj) else text


def _members(cls: type) -> list[str]:
    rows = []
    for name, member in sorted(vars(cls).items()):
        if name.startswith("_"):
            continue
        target = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
        if not callable(target) or not inspect.getdoc(target):
            continue
        first = inspect.getdoc(target).splitlines()[0]
        what = "property" if isinstance(member, property) else _signature(name, target).replace("(self, ", "(").replace("(self)", "()")
        rows.append(f"- `{name if what == 'property' else what}`{' (property)' if what == 'property' else ''}: {first}")
    return rows


def render() -> str:
    """The text of docs/api.md."""
    names = sorted(elasticopt.__all__, key=str.lower)
    grouped: dict[str, list[str]] = {title: [] for _, title in GROUPS}
    other: list[str] = []
    for name in names:
        module = getattr(getattr(elasticopt, name), "__module__", "") or ""
        title = next((t for prefix, t in GROUPS if module.startswith(prefix)), None)
        (grouped[title] if title else other).append(name)
    if other:
        grouped["Other"] = other
    parts = [
        "# API reference",
        "",
        "The public surface of `elasticopt`: every name of `elasticopt.__all__`, importable as",
        "`from elasticopt import NAME`. Generated from the docstrings by `python docs/make_api.py`;",
        "the guides in [guides/](guides/) show the registries in use, [design.md](design.md) the why.",
        "",
    ]
    for title, members in grouped.items():
        if members:
            parts.append(f"- [{title}](#{re.sub(r'[^a-z0-9 -]', '', title.lower()).replace(' ', '-')})")
    for title, members in grouped.items():
        if not members:
            continue
        parts += ["", f"## {title}", ""]
        for name in members:
            obj = getattr(elasticopt, name)
            kind = "class" if inspect.isclass(obj) else "function" if callable(obj) else "constant"
            parts += [f"### `{name}`", "", f"{kind} `{_signature(name, obj) if kind != 'constant' else name}`"]
            doc = inspect.getdoc(obj) if kind != "constant" else None
            if doc:
                parts += ["", _markdown(doc)]
            if inspect.isclass(obj):
                rows = _members(obj)
                if rows:
                    parts += ["", "**Methods and properties**", "", *rows]
            parts.append("")
    return "\n".join(parts).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true", help="only compare with docs/api.md")
    args = p.parse_args(argv)
    text = render()
    if args.check:
        same = OUT.exists() and OUT.read_text() == text
        print("docs/api.md is up to date" if same else "docs/api.md is stale: run python docs/make_api.py")
        return 0 if same else 1
    OUT.write_text(text)
    print(f"wrote {OUT.name}: {len(elasticopt.__all__)} names")
    return 0


if __name__ == "__main__":
    sys.exit(main())
