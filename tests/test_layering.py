"""Imports point one way: storage <- config <- envs <- agents <- domains <- tasks <- flows <- benchmarks."""
import ast
from pathlib import Path

LAYERS = ["storage", "config", "envs", "agents", "domains", "tasks", "flows", "benchmarks"]
ROOT = Path(__file__).resolve().parents[1]


def imported_modules(path: Path) -> list[str]:
    """Every absolute import of a module, a lazy one inside a function too."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def imported_packages(path: Path) -> set[str]:
    """The layers a module imports, through the installed namespace (``evosyn.flows``) or bare (``flows``)."""
    return {name.removeprefix("evosyn.").split(".")[0] for name in imported_modules(path)}


def bare_layer_imports(root: Path) -> list[str]:
    """Imports of a layer by its folder's name (``from storage import ...``): the installed package has no such
    module (everything is ``evosyn.<layer>``), so one would work only from a checkout's root."""
    out = []
    for path in sorted(root.rglob("*.py")):
        if ".git" in path.parts or "site-packages" in path.parts:
            continue
        bad = sorted({n for n in imported_modules(path) if n.split(".")[0] in LAYERS})
        if bad:
            out.append(f"{path.relative_to(root)} imports {', '.join(bad)}")
    return out


def wrong_way(root: Path) -> list[str]:
    wrong = []
    for rank, layer in enumerate(LAYERS):
        forbidden = set(LAYERS[rank + 1:])
        for path in sorted((root / layer).rglob("*.py")):
            bad = imported_packages(path) & forbidden
            if bad:
                wrong.append(f"{path.relative_to(root)} imports {sorted(bad)}")
    return wrong


def test_no_import_points_right():
    wrong = wrong_way(ROOT)
    assert not wrong, "\n".join(wrong)


def test_the_check_sees_a_violation(tmp_path):
    bad = tmp_path / "m.py"
    bad.write_text("from evosyn.flows.cli import main\nimport agents.x\n")
    assert imported_packages(bad) == {"flows", "agents"}


def test_every_import_goes_through_the_evosyn_namespace():
    """Code, tests, docs examples and the pack template import ``evosyn.<layer>``, never a bare layer name."""
    found = bare_layer_imports(ROOT)
    assert not found, "\n".join(found)


def test_the_namespace_check_sees_a_bare_import(tmp_path):
    (tmp_path / "m.py").write_text("def f():\n    from tasks.loop import run\nimport evosyn.tasks.loop\n")
    assert bare_layer_imports(tmp_path) == ["m.py imports tasks.loop"]


def test_flows_importing_benchmarks_is_a_violation(tmp_path):
    """benchmarks is the top layer: even a lazy import of it from flows (inside a function) is refused."""
    (tmp_path / "flows").mkdir()
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "flows" / "cli.py").write_text("def bench():\n    from evosyn.benchmarks.common import write_json\n")
    (tmp_path / "benchmarks" / "cli.py").write_text("from evosyn.flows.cli_app import main\n")  # downward: fine
    assert wrong_way(tmp_path) == ["flows/cli.py imports ['benchmarks']"]


# ------------------------------------------------------------------ tasks beyond tau2
# tau2's task fields and its episode hook: only the tau2 family (envs/tau2/) and the tau2 packs read them; the
# core reads a task through envs.base.EnvTask. ``tau2_task`` is the tasks table's column (storage/records.py),
# read everywhere else as ``SynthTask.definition``.
TAU2_FIELDS = frozenset({"evaluation_criteria", "user_scenario", "initialization_actions", "initialization_data",
                         "env_assertions", "check_assertion", "tau2_task", "message_history"})
FAMILY_CODE = ("storage", "config", "envs", "agents", "domains", "tasks", "flows", "benchmarks", "deployments")
# names kept where they are only words, not tau2's objects: the column's declaration, and the repair prompt's
# section of the task, which keeps its name so the prompt (and every cached repair reply) stays as it was
KEPT = {("storage/records.py", "reads .tau2_task"), ("agents/repair.py", "names 'user_scenario'")}


def tau2_reads(path: Path) -> list[str]:
    """Each import of tau2 (or of our tau2 family) and each read of a tau2-only task field in one module."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        modules = []
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [node.module]
        out += [f"imports {m}" for m in modules if m.split(".")[0] == "tau2" or m.startswith("evosyn.envs.tau2")]
        if isinstance(node, ast.Attribute) and node.attr in TAU2_FIELDS:
            out.append(f"reads .{node.attr}")
        elif isinstance(node, ast.Constant) and node.value in TAU2_FIELDS:
            out.append(f"names {node.value!r}")
    return out


def tau2_family_paths(root: Path) -> list[Path]:
    """The tau2 family and the folders of the packs whose environment it is (the registry says which)."""
    from evosyn.envs.packs import get_pack, known
    from evosyn.envs.tau2.pack import Tau2Pack

    packs = [n for n in known() if isinstance(get_pack(n), Tau2Pack)]
    # the pack `evosyn new-domain` copies into domains/: its tasks are in tau2's task model
    return [root / "envs" / "tau2", *(root / "domains" / n for n in packs), root / "flows" / "domain_template"]


def test_only_the_tau2_family_imports_tau2_or_reads_its_task_fields():
    allowed = tau2_family_paths(ROOT)
    assert len(allowed) >= 2  # the family and at least one pack: the registry was read
    hits = []
    for top in FAMILY_CODE:
        for path in sorted((ROOT / top).rglob("*.py")):
            if any(a == path or a in path.parents for a in allowed):
                continue
            rel = str(path.relative_to(ROOT))
            hits += [f"{rel} {f}" for f in tau2_reads(path) if (rel, f) not in KEPT]
    assert not hits, "\n".join(hits)


def test_the_tau2_check_sees_imports_and_field_reads(tmp_path):
    bad = tmp_path / "m.py"
    bad.write_text("def f(task, row):\n    from tau2.data_model.tasks import Task\n    import evosyn.envs.tau2.convert\n"
                   "    return task.evaluation_criteria, row['user_scenario'], row.tau2_task\n")
    assert sorted(tau2_reads(bad)) == ["imports evosyn.envs.tau2.convert", "imports tau2.data_model.tasks",
                                       "names 'user_scenario'", "reads .evaluation_criteria", "reads .tau2_task"]
    fine = tmp_path / "ok.py"
    fine.write_text("def f(task):\n    return task.gold_actions, task.scenario.reason_for_call\n")
    assert tau2_reads(fine) == []
