"""Imports point one way: storage <- envs <- agents <- domains <- tasks <- flows."""
import ast
from pathlib import Path

LAYERS = ["storage", "envs", "agents", "domains", "tasks", "flows"]
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


def test_no_import_points_right():
    wrong = []
    for rank, layer in enumerate(LAYERS):
        forbidden = set(LAYERS[rank + 1:])
        for path in (ROOT / layer).rglob("*.py"):
            bad = imported_packages(path) & forbidden
            if bad:
                wrong.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert not wrong, "\n".join(wrong)


def test_the_check_sees_a_violation(tmp_path):
    bad = tmp_path / "m.py"
    bad.write_text("from flows.cli import main\nimport agents.x\n")
    assert imported_packages(bad) == {"flows", "agents"}
