"""``load_environment`` of an exported RL environment (``evosyn export --format verifiers``): the entry the exported
package calls, in the process of the trainer or evaluator that loads it.

The rows name their domain; it is resolved here, once, through the compile step (the pack must be installed in
that process: a built-in one, or a pack folder named by ``EVOSYN_DOMAINS``), and the environment object goes to
``EvosynEnv``. Bad input is one ``ValueError`` line naming the file or the option and the fix.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evosyn.flows.cli_app import UserError
from evosyn.flows.compile import compile_domain


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """The rl-jsonl rows of ``path`` (``tasks.jsonl``); one line naming the line that is not a row."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file (the export's tasks.jsonl; run `evosyn export --format verifiers` "
                         "again)")
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{path}:{n}: not a JSON line ({exc}); export again") from None
        missing = {"task_id", "domain", "prompt", "tools", "task"} - set(row)
        if missing:
            raise ValueError(f"{path}:{n}: an rl-jsonl row needs {', '.join(sorted(missing))}; export again")
        rows.append(row)
    return rows


def load_environment(path: str | Path, max_turns: int = 40, task_ids: list[str] | None = None, **kwargs: Any):
    """A ``verifiers`` environment over the rows of ``path``: ``task_ids`` keeps only those tasks; other keyword
    arguments go to ``verifiers.MultiTurnEnv``."""
    from evosyn.tasks.exports.verifiers_env import EvosynEnv

    rows = read_rows(path)
    if task_ids is not None:
        unknown = set(task_ids) - {r["task_id"] for r in rows}
        if unknown:
            raise ValueError(f"task_ids: {', '.join(sorted(unknown))} not in {path}")
        rows = [r for r in rows if r["task_id"] in set(task_ids)]
    if not rows:
        raise ValueError(f"{path}: no tasks to load (export a run with verified tasks)")
    domains = sorted({r["domain"] for r in rows})
    if len(domains) != 1:
        raise ValueError(f"{path}: tasks of several domains ({', '.join(domains)}); export one run per file")
    if not isinstance(max_turns, int) or max_turns < 1:
        raise ValueError(f"max_turns: {max_turns!r} is not a positive number of policy turns")
    try:
        env = compile_domain(domains[0], "domain").env
    except UserError as exc:
        raise ValueError(f"{path}: {exc} (install or point EVOSYN_DOMAINS at the pack the tasks came from)") from None
    return EvosynEnv(env, rows, max_turns=max_turns, **kwargs)
