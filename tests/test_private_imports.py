"""No project module imports a private or undocumented module of scikit-learn, pyarrow, Prefect or DuckDB.

Private modules change without notice between releases: an upgrade could then break a module silently.
A module path with a component starting with ``_`` (``sklearn.utils._param_validation``, ``pyarrow._compute``,
``prefect._internal``), or one of the undocumented modules below, fails this test; found by walking the AST
of every project module, lazy imports inside functions included.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agents", "benchmarks", "domains", "envs", "flows", "storage", "tasks", "tests")
LIBRARIES = ("sklearn", "pyarrow", "prefect", "duckdb")
# modules without a leading underscore that are not API: scikit-learn's Cython helpers, pyarrow's compiled core
# (its names are re-exported by ``pyarrow``), Prefect's server implementation (run as `prefect server start`,
# reached by HTTP and ``prefect.client``)
UNDOCUMENTED = ("sklearn.utils.sparsefuncs_fast", "pyarrow.lib", "prefect.server")


def imported_modules(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, dotted module path) of every import; ``from a import b`` gives ``a.b`` too, since b may be a module."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
            out += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names if alias.name != "*"]
    return out


def is_private(module: str) -> bool:
    parts = module.split(".")
    if parts[0] not in LIBRARIES:
        return False
    return any(p.startswith("_") for p in parts) or any(module == u or module.startswith(u + ".")
                                                        for u in UNDOCUMENTED)


def project_modules() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def test_the_rule_catches_private_and_undocumented_paths():
    tree = ast.parse("import sklearn.utils._param_validation\nfrom pyarrow.lib import Table\n"
                     "def f():\n    from sklearn.utils import sparsefuncs_fast\n    from prefect import _internal\n"
                     "import sklearn.metrics\nfrom prefect import flow\nfrom duckdb import DuckDBPyConnection\n"
                     "from prefect.server.api.server import SubprocessASGIServer\nimport os._x\n")
    found = sorted({m for _, m in imported_modules(tree) if is_private(m)})
    assert found == ["prefect._internal", "prefect.server.api.server", "prefect.server.api.server.SubprocessASGIServer",
                     "pyarrow.lib", "pyarrow.lib.Table", "sklearn.utils._param_validation",
                     "sklearn.utils.sparsefuncs_fast"]


def test_every_project_module_is_walked():
    names = {p.relative_to(ROOT).as_posix() for p in project_modules()}
    assert {"storage/schemas.py", "flows/prefect_api.py", "tests/test_private_imports.py"} <= names


def test_no_private_library_module_is_imported():
    bad = []
    for path in project_modules():
        tree = ast.parse(path.read_text(), filename=str(path))
        found: dict[int, str] = {}
        for line, module in imported_modules(tree):  # per import, its shortest private path
            if is_private(module) and (line not in found or len(module) < len(found[line])):
                found[line] = module
        bad += [f"{path.relative_to(ROOT)}:{line}: {module}" for line, module in sorted(found.items())]
    assert not bad, "private or undocumented library modules imported:\n" + "\n".join(bad)
