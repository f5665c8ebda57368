"""No project module uses a private or undocumented module of scikit-learn, pyarrow, Prefect, DuckDB, MLflow or the
LLM SDKs, nor a private member of tau2's, pydantic's or MLflow's objects.

Private modules and members change without notice between releases: an upgrade could then break a module silently.
A module path with a component starting with ``_`` (``sklearn.utils._param_validation``, ``pyarrow._compute``,
``prefect._internal``), or one of the undocumented modules below, fails this test; found by walking the AST
of every project module, lazy imports inside functions included. So does an attribute (``kit._func_tools``,
``getattr(user, "_run_speed_test")``, ``model.__pydantic_extra__``) whose name is a private member of tau2,
pydantic or MLflow, as those libraries define them (read from their sources and classes at test time), unless
the project defines that name itself (its own private helpers); any ``__pydantic_…__`` name fails anywhere.
The few private members the project cannot do without are listed in ``SANCTIONED``, each read by one function
that a test checks against the library.
"""
from __future__ import annotations

import ast
import functools
import importlib
import inspect
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agents", "benchmarks", "config", "domains", "envs", "flows", "storage", "tasks", "tests")
LIBRARIES = ("sklearn", "pyarrow", "prefect", "duckdb", "openai", "anthropic", "litellm", "mlflow")
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


# ------------------------------------------------------------------ private attributes of library objects
CODE = tuple(p for p in PACKAGES if p != "tests")  # project code (tests may reach into what they check)
PYDANTIC_DUNDER = re.compile(r"__pydantic_\w+__\Z")
PYDANTIC_PRIVATE = {"__private_attributes__", "__class_vars__", "__fields_set__"}
ATTRIBUTE_DUNDERS = {"__getattribute__", "__getattr__", "__setattr__", "__delattr__"}
# (module, function, name): a private member read on purpose, by that one function only, because the library has
# no public way to it; the test named beside it fails when the library changes it
SANCTIONED = {
    ("envs/tau2/entities.py", "_plain_model", "__pydantic_decorators__"),  # tests/envs/test_cow.py
}
# Not an attribute, so not seen here: storage/mlflow_db.head_revision reads the migration folder MLflow ships
# (MLflow has no public way to name its schema revision); tests/storage/test_mlflow_db.py checks it.


def is_private_member(name: str) -> bool:
    """``_x`` or ``__x`` but not a dunder (``__name__``, ``__dict__``, ``__class__`` are the language's own)."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def defined_private(tree: ast.AST) -> set[str]:
    """The private names a module or class defines: functions, classes, assigned names and attributes, slots,
    ``setattr(x, "_y", ...)``."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            out.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__"
                                                  for t in node.targets):
            out |= {c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant)}
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr"
              and len(node.args) > 1 and isinstance(node.args[1], ast.Constant)):
            out.add(node.args[1].value)
    return {n for n in out if isinstance(n, str) and is_private_member(n)}


def _class_members(cls: type, library: str) -> set[str]:
    """Private members of a library class and its bases in that library: class attributes and what the
    class's source assigns (``self._x = ...`` in ``__init__``)."""
    out = {n for n in dir(cls) if is_private_member(n)}
    for base in cls.__mro__:
        if base.__module__.split(".")[0] == library:
            try:
                out |= defined_private(ast.parse(inspect.getsource(base)))
            except (OSError, TypeError, SyntaxError):  # compiled, or source not shipped: dir() is what there is
                pass
    return out


@functools.lru_cache(maxsize=1)
def code_trees() -> dict[str, ast.AST]:
    """The AST of every project code module, by its path from the repository root."""
    return {p.relative_to(ROOT).as_posix(): ast.parse(p.read_text(), filename=str(p)) for p in project_modules()
            if p.relative_to(ROOT).parts[0] in CODE}


@functools.lru_cache(maxsize=1)
def library_private() -> frozenset[str]:
    """Private member names of tau2 (every module: its objects reach us through environments and toolkits),
    of pydantic's ``BaseModel`` and of the MLflow objects project code imports."""
    import tau2
    from pydantic import BaseModel

    names = set()
    for path in Path(tau2.__file__).parent.rglob("*.py"):
        names |= defined_private(ast.parse(path.read_bytes(), filename=str(path)))
    names |= _class_members(BaseModel, "pydantic")
    for tree in code_trees().values():
        for _, module in imported_modules(tree):
            if module.split(".")[0] != "mlflow":
                continue
            parent, _, attr = module.rpartition(".")
            try:
                obj = importlib.import_module(module)
            except ImportError:  # ``from mlflow.x import Name``: ``mlflow.x.Name`` is not a module
                obj = getattr(importlib.import_module(parent), attr)
            names |= _class_members(obj, "mlflow") if isinstance(obj, type) else \
                {n for n in dir(obj) if is_private_member(n)}
    return frozenset(names)


@functools.lru_cache(maxsize=1)
def own_private() -> frozenset[str]:
    """The private names project code defines itself (its helpers, slots, attributes)."""
    return frozenset().union(*(defined_private(tree) for tree in code_trees().values()))


def private_uses(tree: ast.AST, library: frozenset[str], own: frozenset[str]) -> list[tuple[int, str, str]]:
    """(line, enclosing function, name) of each private library member the module reaches."""
    found = set()

    def check(node: ast.AST, name: str, function: str) -> None:
        if PYDANTIC_DUNDER.match(name) or name in PYDANTIC_PRIVATE or (
                is_private_member(name) and name in library and name not in own):
            found.add((node.lineno, function, name))

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        if isinstance(node, ast.Attribute):
            check(node, node.attr, function)
        elif isinstance(node, ast.Call) and (
                isinstance(node.func, ast.Name) and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
                or isinstance(node.func, ast.Attribute) and node.func.attr in ATTRIBUTE_DUNDERS):
            for arg in node.args[:2]:  # getattr(x, "_y"), object.__setattr__(x, "_y", v)
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    check(arg, arg.value, function)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and PYDANTIC_DUNDER.match(node.value):
            check(node, node.value, function)  # through any alias: _setattr = object.__setattr__
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, "")
    return sorted(found)


PLANTED = """
_set = object.__setattr__
def uses(kit, model, client, user, self):
    kit._func_tools
    model.__pydantic_fields_set__
    object.__setattr__(model, "__pydantic_extra__", None)
    client._tracking_client.list_artifacts()
    getattr(user, "_get_mobile_data_working")()
    _set(model, "__pydantic_private__", None)
    self._planted_helper(), f"{kit}_func_tools"
    kit.tools, model.__dict__, type(model).__name__, model.model_fields_set, model.model_extra
def _planted_helper():
    pass
"""


def test_the_attribute_rule_catches_private_members_of_tau2_pydantic_and_mlflow():
    library = library_private()
    assert {"_func_tools", "_get_mobile_data_working", "_run_speed_test", "_tracking_client",
            "_copy_and_set_values"} <= library
    tree = ast.parse(PLANTED)
    found = private_uses(tree, library, own_private() | defined_private(tree))
    assert [(line, name) for line, _, name in found] == [
        (4, "_func_tools"), (5, "__pydantic_fields_set__"), (6, "__pydantic_extra__"), (7, "_tracking_client"),
        (8, "_get_mobile_data_working"), (9, "__pydantic_private__")]
    assert {function for _, function, _ in found} == {"uses"}


def test_no_private_member_of_a_library_object_is_used():
    library, own = library_private(), own_private()
    bad = []
    for rel, tree in code_trees().items():
        for line, function, name in private_uses(tree, library, own):
            if (rel, function, name) not in SANCTIONED:
                bad.append(f"{rel}:{line} in {function or 'the module'}: {name}")
    assert not bad, "private members of tau2, pydantic or MLflow objects used:\n" + "\n".join(bad)


def test_each_sanctioned_use_is_still_there():
    """An entry whose use was removed goes from ``SANCTIONED`` too, so the list names only what is used."""
    library, own = library_private(), own_private()
    used = {(module, function, name) for module, _, _ in SANCTIONED
            for _, function, name in private_uses(code_trees()[module], library, own)}
    assert SANCTIONED <= used
