"""One name per concept (issue 21): no two classes of the package share a name.

Read from the source with ``ast``; nothing is imported.  The drop-ins in
``elasticopt/integrations/`` are excepted: each is a stand-alone file copied
into a host's checkout and carries its own small types on purpose.  Private
classes (``_Model`` of each solver file) are each file's own and excepted too.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import importlib.util

_spec = importlib.util.spec_from_file_location("_import_graph", Path(__file__).with_name("test_import_graph.py"))
_graph = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_graph)
modules = _graph.modules  # the package's modules, from pyproject (the same reading as the import-graph test)

STAND_ALONE = "elasticopt.integrations."


def _classes() -> dict[str, list[str]]:
    where: dict[str, list[str]] = defaultdict(list)
    for name, path in modules().items():
        if name.startswith(STAND_ALONE):
            continue
        for node in ast.parse(Path(path).read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                where[node.name].append(name)
    return where


def test_the_scan_sees_the_package():
    where = _classes()
    assert where["Solution"] == ["elasticopt.solvers.solution"]
    assert "OptionTable" in where and "NodeAssignment" in where and "LaunchState" in where


def test_no_class_name_is_defined_twice():
    twice = {c: m for c, m in _classes().items() if len(m) > 1}
    assert not twice, "one name per concept; classes defined more than once:\n" + "\n".join(
        f"  {c}: {', '.join(m)}" for c, m in sorted(twice.items())
    )
