"""Imports point one way: storage <- envs <- agents <- domains <- tasks <- flows <- benchmarks."""
import ast
from pathlib import Path

LAYERS = ["storage", "envs", "agents", "domains", "tasks", "flows", "benchmarks"]
ROOT = Path(__file__).resolve().parents[1]


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


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
    bad.write_text("from flows.cli import main\nimport agents.x\n")
    assert imported_packages(bad) == {"flows", "agents"}


def test_flows_importing_benchmarks_is_a_violation(tmp_path):
    """benchmarks is the top layer: even a lazy import of it from flows (inside a function) is refused."""
    (tmp_path / "flows").mkdir()
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "flows" / "cli.py").write_text("def bench():\n    from benchmarks.common import write_json\n")
    (tmp_path / "benchmarks" / "cli.py").write_text("from flows.cli_app import main\n")  # downward: fine
    assert wrong_way(tmp_path) == ["flows/cli.py imports ['benchmarks']"]
