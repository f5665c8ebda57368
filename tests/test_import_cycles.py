"""No import circle among our modules: the module graph of our packages is acyclic.

Every import that runs counts, also one inside a function: a lazy import only
postpones a circle to the first call, it does not remove it. Imports under
``if TYPE_CHECKING:`` never run (they name a type for an annotation) and are
left out.
"""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGES = ("storage", "config", "envs", "agents", "domains", "tasks", "flows", "benchmarks")
ROOT = Path(__file__).resolve().parents[1]


def module_name(path: Path, root: Path) -> str:
    """The installed name: each layer folder is ``evosyn.<folder>`` (pyproject.toml's package-dir)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(["evosyn", *(parts[:-1] if parts[-1] == "__init__" else parts)])


def modules(root: Path, packages=PACKAGES) -> dict[str, Path]:
    return {module_name(p, root): p for pkg in packages for p in sorted((root / pkg).rglob("*.py"))}


def _type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _runtime_nodes(tree: ast.AST):
    """Every node, except the bodies of ``if TYPE_CHECKING:`` (their ``else`` still runs)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if _type_checking(node):
            todo.extend(node.orelse)
        else:
            todo.extend(ast.iter_child_nodes(node))


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The known modules ``name`` imports: ``from a import b`` is ``a.b`` when that is a module, else ``a``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against this module's package
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        out.update(t for t in targets if t in known and t != name)
    return out


def import_graph(root: Path = ROOT, packages=PACKAGES) -> dict[str, set[str]]:
    mods = modules(root, packages)
    known = set(mods)
    return {name: imports_of(name, path, known) for name, path in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:  # the graph is a few hundred modules: recursion depth is no concern
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
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

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_our_modules_import_no_circle():
    found = cycles(import_graph())
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_check_sees_a_circle(tmp_path):
    pkg = tmp_path / "flows"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "cli.py").write_text("def run():\n    from evosyn.flows import cli_x  # noqa\n")
    (pkg / "cli_x.py").write_text("from evosyn.flows.cli import run\n")
    (pkg / "cli_y.py").write_text("from . import cli_x\nfrom .cli import run\n")
    (pkg / "types.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from evosyn.flows.cli_y import x\n")
    (pkg / "cli_z.py").write_text("from evosyn.flows.types import T\n")
    graph = import_graph(tmp_path, ("flows",))
    assert graph["evosyn.flows.cli_y"] == {"evosyn.flows.cli_x", "evosyn.flows.cli"}  # relative imports are resolved
    assert graph["evosyn.flows.types"] == set()  # a type-only import never runs
    assert cycles(graph) == [["evosyn.flows.cli", "evosyn.flows.cli_x"]]
