"""No import cycle in the elasticopt package (issue 16), none between its packages (issue 21), and no
solver backend importing another.

The graph is read from the source with ``ast``, nothing is imported.  A node is
a module (``elasticopt.scheduling.autoscaler``; a package is its
``__init__``); an edge is any import of another elasticopt module, of one of
three kinds:

- ``module``: runs when the module is imported (top level, also inside
  ``if``/``try``/``class`` at top level);
- ``typing``: under ``if TYPE_CHECKING:`` (a dependency of the design, though
  not of the running program);
- ``function``: inside a function body (runs when the function is called).

Every kind counts: a cycle hidden behind ``TYPE_CHECKING`` or a function-level
import is still two modules that cannot be understood, tested or moved one
without the other.  Importing a module also runs its parent packages'
``__init__`` files; those implicit edges are not counted (every package that
re-exports its modules would otherwise be a cycle), but an explicit
``from elasticopt.models import X`` is an edge to ``elasticopt.models``.
``from pkg import name`` is an edge to ``pkg.name`` when that is a module,
else to ``pkg``.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

def package_dirs() -> dict[str, Path]:
    """Package name -> its folder, from pyproject's ``packages`` and ``package-dir``."""
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapping: dict[str, str] = cfg.get("package-dir", {})
    out = {}
    for pkg in cfg["packages"]:
        base = max((p for p in mapping if pkg == p or pkg.startswith(p + ".")), key=len, default=None)
        rel = mapping[base] + pkg[len(base):].replace(".", "/") if base else pkg.replace(".", "/")
        out[pkg] = ROOT / rel
    return out


def modules() -> dict[str, Path]:
    """Every module of the distribution: dotted name -> file."""
    out = {}
    for pkg, folder in package_dirs().items():
        for f in sorted(folder.glob("*.py")):
            out[pkg if f.name == "__init__.py" else f"{pkg}.{f.stem}"] = f
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    """Every import node with its kind (module / typing / function)."""
    stack: list[tuple[ast.AST, str]] = [(tree, "module")]
    while stack:
        node, kind = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, kind
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            kind = "function"
        if isinstance(node, ast.If) and _is_type_checking(node.test) and kind == "module":
            stack.extend((n, "typing") for n in node.body)
            stack.extend((n, kind) for n in node.orelse)
            continue
        stack.extend((n, kind) for n in ast.iter_child_nodes(node))


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".") if is_package else module.split(".")[:-1]
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph() -> dict[str, dict[str, str]]:
    """module -> {imported module: kind} over the distribution's own modules."""
    mods = modules()
    graph: dict[str, dict[str, str]] = {m: {} for m in mods}
    rank = {"module": 0, "typing": 1, "function": 2}
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        for node, kind in _imports(ast.parse(path.read_text(), str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = _resolve(mod, is_pkg, node)
                for a in node.names:
                    targets.append(f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base)
            for t in targets:
                if t in mods and t != mod:
                    old = graph[mod].get(t)
                    graph[mod][t] = kind if old is None or rank[kind] < rank[old] else old
    return graph


def cycles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def _describe(graph: dict[str, dict[str, str]], comp: list[str]) -> str:
    edges = [f"  {a} -> {b} ({graph[a][b]} import)" for a in comp for b in sorted(graph[a]) if b in comp]
    return " <-> ".join(comp) + ":\n" + "\n".join(edges)


def test_graph_sees_the_whole_package():
    mods = modules()
    assert {"elasticopt", "elasticopt.cli.solve", "elasticopt.models.instance", "elasticopt.solvers.milp",
            "elasticopt.scheduling.autoscaler", "elasticopt.launcher"} <= set(mods)
    g = import_graph()
    assert g["elasticopt.solvers.milp"]["elasticopt.solvers.common"] == "module"
    assert g["elasticopt.cli.solve"]["elasticopt.models"] == "module"  # from elasticopt.models import ...


def test_cycle_finder_finds_cycles_of_every_kind():
    g = {"a": {"b": "module"}, "b": {"c": "typing"}, "c": {"a": "function"}, "d": {"a": "module"}, "e": {}}
    assert cycles(g) == [["a", "b", "c"]]
    assert cycles({"a": {"b": "module"}, "b": {}}) == []


def test_relative_imports_and_type_checking_blocks_are_read(tmp_path):
    tree = ast.parse(
        "from typing import TYPE_CHECKING\nfrom . import x\nif TYPE_CHECKING:\n    from ..y import z\n"
        "def f():\n    import q.r\n"
    )
    found = [(type(n).__name__, getattr(n, "module", None), getattr(n, "level", 0), kind) for n, kind in _imports(tree)]
    assert ("ImportFrom", None, 1, "module") in found
    assert ("ImportFrom", "y", 2, "typing") in found
    assert ("Import", None, 0, "function") in found
    node = ast.parse("from ..y import z").body[0]
    assert _resolve("elasticopt.scheduling.policies.base", False, node) == "elasticopt.scheduling.y"
    assert _resolve("elasticopt.scheduling.policies", True, node) == "elasticopt.scheduling.y"


def test_no_import_cycle():
    graph = import_graph()
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(_describe(graph, c) for c in found)


def package_graph(graph: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """The import graph between packages: every module of ``elasticopt.X`` (subpackages included) is one
    node ``elasticopt.X`` where X is a package; the top-level modules (``elasticopt.errors``) stay themselves."""
    mods = modules()
    packages = {m for m, path in mods.items() if path.name == "__init__.py"}

    def node(m: str) -> str:
        head = ".".join(m.split(".")[:2])
        return head if head in packages and head != m.split(".")[0] else m

    out: dict[str, dict[str, str]] = {node(m): {} for m in graph}
    rank = {"module": 0, "typing": 1, "function": 2}
    for a, edges in graph.items():
        for b, kind in edges.items():
            na, nb = node(a), node(b)
            if na != nb:
                old = out[na].get(nb)
                out[na][nb] = kind if old is None or rank[kind] < rank[old] else old
    return out


def test_package_graph_collapses_subpackages():
    g = package_graph(import_graph())
    assert "elasticopt.models" in g and "elasticopt.models.instance" not in g
    assert "elasticopt.scheduling" in g and "elasticopt.scheduling.policies" not in g
    assert "elasticopt.errors" in g  # a top-level module is its own node
    assert "elasticopt.models" in g["elasticopt.solvers"]


def test_no_import_cycle_between_packages():
    """``elasticopt.models`` and ``elasticopt.profiles`` (and every other pair) are layered, not tangled."""
    graph = package_graph(import_graph())
    found = cycles(graph)
    assert not found, "package import cycles:\n" + "\n".join(_describe(graph, c) for c in found)


def test_no_solver_backend_imports_another():
    graph = import_graph()
    backends = {"elasticopt.solvers." + m for m in ("cpsat", "milp", "scip", "pyomo_model", "dp.jax_backend", "dp.numpy_backend", "greedy")}
    for b in sorted(backends):
        others = sorted(set(graph[b]) & (backends - {b}))
        assert not others, f"{b} imports the backend(s) {others}: move what they share to elasticopt.solvers.common"
