"""What a test score can be trusted for: which test set scored the round, and how much of the training data copies it.

A run is scored on two fixed test sets (tasks/testset.py): the official-matched one (``test``), and the uniform one
(``test_uniform``). A domain with no official tasks has no official-matched set; its test score is the uniform
set's, shown as ``test (uniform)``, never a blank. ``success_test_scored`` names that score in every table and in
MLflow (``test_set_scored`` says which set it is).

Overlap: the dedup stage (tasks/dedup.py) flags each verified task of a round that nearly copies a task of a test set
(flag ``test_set``, with the set its closest copy is in). ``overlap_<task set>`` is the share of the tasks the learner
trained on (train split, rounds <= r; less those ``dedup.drop`` left out) flagged against that set;
``overlap_test_sets`` against either (a task that copies tasks of both sets counts once, under its closest copy).
``duplicates_<task set>`` is the share of a set's own tasks that copy an earlier task of the same set. Above
``OVERLAP_WARN`` a warning goes beside the scores: the learner may have been trained on (near copies of) its test
questions, or the set asks the same question many times; a small database gives few distinct tasks
(docs/guides/dedup.md, "How large a database").
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

from evosyn.storage.store import Store
from evosyn.tasks.testset import DEFAULT_SIZE, TASK_SETS, is_built, test_set_run_id

if TYPE_CHECKING:
    from evosyn.envs.base import Domain

OVERLAP_WARN = 0.10  # a share of copies above this gets a warning beside the scores (docs/guides/dedup.md)
SET_LABEL = {"test": "test", "test_uniform": "test (uniform)"}  # the scored set as a reader sees it
SET_KIND = {"test": "official-matched", "test_uniform": "uniform"}
OVERLAP_KEYS = ("overlap_test", "overlap_test_uniform", "overlap_test_sets")
DUPLICATE_KEYS = ("duplicates_test", "duplicates_test_uniform")


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not math.isnan(v)


def scored_set(m: Mapping) -> str:
    """The task set that scored a round: ``test`` when the official-matched set was evaluated, else ``test_uniform``."""
    return "test" if _finite(m.get("success_test")) else "test_uniform"


def test_score(m: Mapping) -> tuple[str, float]:
    """(label, value) of a round's test score: ``test`` (official-matched) or ``test (uniform)`` when the domain has
    no official-matched set; NaN when neither set was evaluated."""
    task_set = scored_set(m)
    value = m.get(f"success_{task_set}")
    return SET_LABEL[task_set], float(value) if _finite(value) else float("nan")


def scored_metrics(m: Mapping) -> dict:
    """``success_test_scored`` (a number) and ``test_set_scored`` (the set's kind) of a round's metrics."""
    task_set = scored_set(m)
    return {"success_test_scored": test_score(m)[1], "test_set_scored": SET_KIND[task_set]}


def _set_ids(store: Store, env: Domain, test_size: int) -> dict[str, str]:
    """task set (``test``, ``test_uniform``) -> the run id of the domain's set of ``test_size`` tasks, for the sets
    built in ``store`` (a domain with no official tasks has no official-matched one)."""
    return {ts: test_set_run_id(env, n=test_size, kind=kind) for ts, kind in TASK_SETS.items()
            if is_built(store, env, test_size, kind)}


ROW_FIELDS = ["task_id", "round", "split", "flags", "flagged", "test_set"]  # of the dedup table


def trained_rows(rows: list[dict], drop: bool, round: int | None = None) -> dict[str, dict]:
    """task id -> its dedup row, for the tasks of ``rows`` the learner trained on by ``round`` (None: the last): the
    train split, less the flagged tasks when the run drops them (``dedup.drop``)."""
    return {r["task_id"]: r for r in rows
            if r["split"] == "train" and (round is None or r["round"] <= round) and not (drop and r["flagged"])}


def overlap_test_sets(rows: list[dict], drop: bool, round: int | None = None) -> float | None:
    """``overlap_test_sets`` of a run's dedup ``rows`` (None: no training task), without resolving its domain."""
    trained = trained_rows(rows, drop, round)
    return sum("test_set" in r["flags"] for r in trained.values()) / len(trained) if trained else None


def _settings(store: Store, run_id: str) -> tuple[bool, int]:
    """(``dedup.drop``, ``test_size``) of the run's stored config, read as stored (the defaults for a synthesis pass,
    which has no run row, or a config of older code)."""
    runs = store.read_records("runs", run_id=run_id, round=0)
    raw = json.loads(runs[0].config_json or "{}") if runs else {}
    return bool((raw.get("dedup") or {}).get("drop")), int(raw.get("test_size") or DEFAULT_SIZE)


def overlap(store: Store, env: Domain, run_id: str, round: int | None = None) -> dict[str, float]:
    """The overlap and duplicate shares of the module doc for ``run_id``'s training data of rounds <= ``round`` (None:
    every round), with the counts behind them (``overlap_trained``, ``overlap_flagged``). A share with nothing to
    divide (no training task, a set not built) is NaN. ``env``: the run's domain, resolved by the caller."""
    drop, size = _settings(store, run_id)
    ids = _set_ids(store, env, size)
    trained = trained_rows(store.read_fields("dedup", ROW_FIELDS, run_id=run_id), drop, round)
    copies = {ts: sum("test_set" in r["flags"] and r["test_set"] == rid for r in trained.values())
              for ts, rid in ids.items()}
    n = len(trained)
    share = lambda k: k / n if n else float("nan")  # noqa: E731
    out = {f"overlap_{ts}": share(copies[ts]) if ts in copies else float("nan") for ts in TASK_SETS}
    out["overlap_test_sets"] = share(sum(copies.values()))
    out.update(overlap_trained=float(n), overlap_flagged=float(sum(copies.values())))
    for ts in TASK_SETS:
        own = store.read_fields("dedup", ["flags"], run_id=ids[ts]) if ts in ids else []
        out[f"duplicates_{ts}"] = (sum("duplicate" in r["flags"] for r in own) / len(own)) if own else float("nan")
    return out


def overlap_note(m: Mapping, task_set: str) -> str:
    """``overlap 14%`` beside a set's score ("" when nothing was measured)."""
    v = m.get(f"overlap_{task_set}")
    return f"overlap {v:.0%}" if _finite(v) else ""


def score_line(m: Mapping) -> str:
    """A round's test scores for one line, each with its overlap: ``test 0.460 (overlap 2%), test uniform 0.500
    (overlap 1%)``, or ``test (uniform) 0.900 (overlap 10%)`` for a domain with no official-matched set."""
    def one(label: str, task_set: str) -> str:
        note = overlap_note(m, task_set)
        value = m.get(f"success_{task_set}")
        return f"{label} {value if _finite(value) else float('nan'):.3f}" + (f" ({note})" if note else "")

    if scored_set(m) == "test":
        return f"{one('test', 'test')}, {one('test uniform', 'test_uniform')}"
    return one(SET_LABEL["test_uniform"], "test_uniform")


def overlap_warnings(m: Mapping, where: str = "") -> list[str]:
    """One ``warning:`` line per share above ``OVERLAP_WARN`` in a round's metrics (``where``: e.g. ``round 2: ``)."""
    out = []
    share, n, k = m.get("overlap_test_sets"), m.get("overlap_trained"), m.get("overlap_flagged")
    if _finite(share) and share > OVERLAP_WARN:
        per = ", ".join(f"{SET_KIND[ts]} {m[f'overlap_{ts}']:.0%}" for ts in SET_KIND
                        if _finite(m.get(f"overlap_{ts}")) and m[f"overlap_{ts}"] > 0)
        out.append(f"warning: {where}{share:.0%} of the training tasks ({k:.0f} of {n:.0f}) are near copies of test-set "
                   f"tasks ({per}; threshold {OVERLAP_WARN:.0%}): the test scores overstate what the learner "
                   "generalizes; `dedup.drop: true` trains without them, a larger database gives more distinct tasks "
                   "(docs/guides/dedup.md)")
    for ts in SET_KIND:
        d = m.get(f"duplicates_{ts}")
        if _finite(d) and d > OVERLAP_WARN:
            out.append(f"warning: {where}{d:.0%} of the {SET_KIND[ts]} test set's tasks are near copies of its other "
                       f"tasks (threshold {OVERLAP_WARN:.0%}): its score counts the same questions more than once; a "
                       "larger database gives more distinct tasks (docs/guides/dedup.md)")
    return out
