"""A run's verified training examples as a Hugging Face dataset: Parquet shards plus a README.md card.

The rows are the examples the other exports write (split ``train`` of ``sft_examples``, rounds <= R),
one per verified trajectory, with OpenAI-style messages (tool-call arguments as JSON text, as the
OpenAI API has them) and the slice values the verifier re-derived from the replay. The layout is the
one `datasets.load_dataset(DIR)` reads without a loading script: ``data/train-0000i-of-0000N.parquet``
and a card whose YAML front matter names the files (``configs``) and their features (``dataset_info``).
The card itself is tasks/exports/hf_card.py.
"""
from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from evosyn.agents.learners.exports import trajectory_messages
from evosyn.tasks.exports.hf_card import SLICES, card_text
from evosyn.storage import atomic
from evosyn.storage.records import SFTExample, SynthTask, Verdict
from evosyn.storage.store import Store

SHARD_ROWS = 10_000  # rows per Parquet shard: files of a few tens of MB, what the Hub's viewer reads well

_CALL = pa.struct([("id", pa.string()), ("type", pa.string()),
                   ("function", pa.struct([("name", pa.string()), ("arguments", pa.string())]))])
_MESSAGE = pa.struct([("role", pa.string()), ("content", pa.string()), ("tool_calls", pa.list_(_CALL)),
                      ("tool_call_id", pa.string())])
SCHEMA = pa.schema([
    ("example_id", pa.string()), ("task_id", pa.string()), ("trajectory_id", pa.string()),
    ("run_id", pa.string()), ("round", pa.int64()), ("space_version", pa.int64()), ("domain", pa.string()),
    *((name, pa.string()) for name in SLICES),
    ("observed", pa.string()),  # every observed factor of the replay, as JSON (factor -> values)
    ("messages", pa.list_(_MESSAGE)),
    ("tools", pa.string()),  # the OpenAI tool schemas the agent had, as JSON
])


@dataclass
class Selection:
    """Which of a run's examples an export writes, and why the others are not in it."""

    train: list[SFTExample]
    held_out: int  # diagnostic examples: the run's held-out evaluation set, never training data
    dropped: Counter = field(default_factory=Counter)  # reason -> examples


def select_examples(store: Store, run_id: str, round: int | None = None) -> Selection:
    """The run's training examples of rounds <= ``round`` (all when None), in (round, example id) order."""
    rows = [e for e in store.read_records("sft_examples", run_id=run_id) if round is None or e.round <= round]
    train = sorted((e for e in rows if e.split == "train"), key=lambda e: (e.round, e.example_id))
    return Selection(train=train, held_out=sum(e.split == "diagnostic" for e in rows))


@dataclass
class HFExport:
    rows: int
    held_out: int
    dropped: Counter
    files: list[Path]
    card: Path


def _message(m: dict) -> dict:
    return {"role": m["role"], "content": m.get("content"), "tool_call_id": m.get("tool_call_id"),
            "tool_calls": [{"id": c["id"], "type": c["type"], "function": dict(c["function"])}
                           for c in m.get("tool_calls") or []]}


def hf_rows(examples: list[SFTExample], tasks: dict[str, SynthTask], passed: dict[str, Verdict]
            ) -> tuple[list[dict], Counter]:
    """One row per example whose trajectory has a passing verdict; the reasons the others are dropped."""
    rows, dropped, seen = [], Counter(), set()
    for e in examples:
        verdict = passed.get(e.trajectory_id)
        if e.example_id in seen:
            dropped["duplicate example id"] += 1
            continue
        if verdict is None:
            dropped["no passing verdict for its trajectory"] += 1
            continue
        seen.add(e.example_id)
        task = tasks.get(e.task_id)
        observed = {k: v for k, v in verdict.observed.items()}
        slices = {k: "/".join(observed.get(k) or (task.requested.get(k, []) if task else [])) for k in SLICES}
        rows.append({"example_id": e.example_id, "task_id": e.task_id, "trajectory_id": e.trajectory_id,
                     "run_id": e.run_id, "round": e.round, "space_version": e.space_version,
                     "domain": task.domain if task else "", **slices,
                     "observed": json.dumps(observed, sort_keys=True),
                     "messages": [_message(m) for m in trajectory_messages(e)["messages"]],
                     "tools": json.dumps(e.tools)})
    return rows, dropped


def shard_names(n_rows: int, shard_rows: int = SHARD_ROWS) -> list[str]:
    n = max(1, math.ceil(n_rows / shard_rows))
    return [f"data/train-{i:05d}-of-{n:05d}.parquet" for i in range(n)]


def write_hf(store: Store, run_id: str, selection: Selection, out: Path, round: int | None = None,
             shard_rows: int = SHARD_ROWS) -> HFExport:
    """Write the shards and the card under ``out``; shards of an earlier export there are replaced."""
    tasks = {t.task_id: t for t in store.read_records("tasks", run_id=run_id)}
    verdicts = [v for v in store.read_records("verdicts", run_id=run_id) if round is None or v.round <= round]
    passed = {v.trajectory_id: v for v in verdicts if v.passed}
    rows, dropped = hf_rows(selection.train, tasks, passed)
    dropped.update(selection.dropped)
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    names = shard_names(len(rows), shard_rows)
    files = []
    for i, name in enumerate(names):
        path = out / name
        with atomic.atomic_path(path) as tmp:
            pq.write_table(table.slice(i * shard_rows, shard_rows), tmp, compression="zstd")
        files.append(path)
    for old in (out / "data").glob("train-*-of-*.parquet"):  # another export's shards would be read beside these
        if old not in files:
            old.unlink()
    card = out / "README.md"
    atomic.write_text(card, card_text(store, run_id, round, table, selection.held_out, dropped, verdicts,
                                      sum(f.stat().st_size for f in files)))
    return HFExport(rows=len(rows), held_out=selection.held_out, dropped=dropped, files=files, card=card)


# ---------------------------------------------------------------- push
class PushError(RuntimeError):
    """Why a push cannot happen (no token, no network, offline mode): one line, never the token."""


def hub_token() -> str | None:
    """HF_TOKEN (the environment, or `.env`, loaded by the CLI), else a token `hf auth login` saved."""
    import os

    token = os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
    if token:
        return token
    from huggingface_hub import get_token  # imported only to push: the export itself needs no hub client

    return get_token()


def _reachable(url: str, timeout: float = 5.0) -> str | None:
    """None when the hub's host accepts a connection, else why not."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname, port), timeout=timeout).close()
    except OSError as exc:
        return f"{parts.hostname}:{port}: {exc.strerror or type(exc).__name__}"
    return None


def push_to_hub(folder: Path, repo: str, private: bool = False) -> str:
    """Upload the export folder as dataset repo ``repo``; returns its URL. PushError when it cannot."""
    import os

    from evosyn.storage.offline import APPLIED

    token = hub_token()
    if not token:
        raise PushError("no Hugging Face token: set HF_TOKEN (in the environment or .env), or run `hf auth login`")
    from huggingface_hub import HfApi, constants

    if "HF_HUB_OFFLINE" in APPLIED:
        # our own offline default (storage/offline.py) keeps training from downloading; a push asks for the network.
        # The hub client reads its offline flag from `constants` at each request.
        os.environ.pop("HF_HUB_OFFLINE", None)
        constants.HF_HUB_OFFLINE = False
    elif constants.HF_HUB_OFFLINE:
        raise PushError("offline mode: HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) is set; unset it to push")
    why = _reachable(constants.ENDPOINT)
    if why:
        raise PushError(f"no network: cannot reach {constants.ENDPOINT} ({why})")
    api = HfApi(token=token)
    try:
        api.create_repo(repo, repo_type="dataset", private=private, exist_ok=True)
        api.upload_folder(folder_path=str(folder), repo_id=repo, repo_type="dataset",
                          allow_patterns=["README.md", "data/*.parquet"],
                          commit_message="EvoSyn export")
    except Exception as exc:  # an HTTP error names the status and the repo, never the token
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise PushError(f"the hub refused the push: {first.replace(token, '***')}") from None
    return f"{constants.ENDPOINT}/datasets/{repo}"
