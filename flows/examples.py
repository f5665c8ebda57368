"""One id to pass to `evosyn show`, printed after a command that wrote records: a user who has just made a run
should not have to write SQL to find a conversation to look at."""
from __future__ import annotations

from evosyn.storage.store import Store


def stored_show_line(store: Store, run_id: str, home: str = "") -> str | None:
    """``show_line`` of the verdicts ``run_id`` stored."""
    return show_line(store.read_fields("verdicts", ["round", "trajectory_id", "passed"], run_id=run_id), run_id, home)


def show_line(rows: list[dict], run_id: str, home: str = "") -> str | None:
    """``evosyn show`` of one verified conversation among verdict ``rows`` (round, trajectory_id, passed) of
    ``run_id`` (its last round's, for a run), else of one rejected one, and the query listing the others; None
    when there is no verdict. ``home``: the ``--home DIR `` prefix the other printed commands carry."""
    if not rows:
        return None
    last = max(r["round"] for r in rows)
    rows = [r for r in rows if r["round"] == last]
    kept = [r for r in rows if r["passed"]]
    pick, what = (kept[0], "a verified conversation") if kept else (rows[0], "a rejected conversation and its checks")
    return (f"  evosyn {home}show {pick['trajectory_id']}   # {what}; more ids: evosyn {home}query \"select "
            f"trajectory_id, task_id, passed from verdicts where run_id = '{run_id}' limit 20\"")
