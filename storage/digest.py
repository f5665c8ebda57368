"""A content hash per table, for "is this resumed run the same as an uninterrupted one?".

Two runs are the same when every table holds the same rows: the same field
values, dict key order included (it is part of the value: tool-call arguments
render into dialogue text), the same number of times. Row order is not part of
it (chunk files are read in name order, which says nothing about the data).
Wall-clock facts (``created_at``, ``latency_s``) differ between any two runs and
are left out, and each compared run id is replaced by ``<run>`` and the store's
own path by ``<root>`` wherever they appear in a string (a run's stored config
names its store), so two runs of one config in two stores, or under two names,
compare equal. (Ids hashed from a run id would still differ; EvoSyn's
ids are hashed from content, not from the run id.)
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from evosyn.storage.records import TABLES
from evosyn.storage.store import Store

# created_at: when a row was written; latency_s: how long an LLM call took. Neither is content.
TIME_COLUMNS = frozenset({"created_at", "latency_s"})
RUN_PLACEHOLDER, ROOT_PLACEHOLDER = "<run>", "<root>"


def _replace(value: Any, subs: list[tuple[str, str]]) -> Any:
    if isinstance(value, str):
        for old, new in subs:
            value = value.replace(old, new)
        return value
    if isinstance(value, list):
        return [_replace(v, subs) for v in value]
    if isinstance(value, dict):
        return {_replace(k, subs): _replace(v, subs) for k, v in value.items()}
    return value


def _substitutions(store: Store, run_ids: list[str]) -> list[tuple[str, str]]:
    subs = {rid: RUN_PLACEHOLDER for rid in run_ids}
    subs.update({str(store.root): ROOT_PLACEHOLDER, str(store.root.resolve()): ROOT_PLACEHOLDER,
                 store.location: ROOT_PLACEHOLDER})  # an s3:// store's own name
    return sorted(subs.items(), key=lambda kv: len(kv[0]), reverse=True)  # longest first: no partial replacement


def normalized_rows(store: Store, table: str, run_ids: Iterable[str] | str,
                    ignore: Iterable[str] = TIME_COLUMNS) -> list[str]:
    """The rows of ``table`` for ``run_ids`` as canonical JSON lines, sorted (what ``table_digests`` hashes)."""
    ids = [run_ids] if isinstance(run_ids, str) else list(run_ids)
    subs = _substitutions(store, ids)
    model = TABLES[table]
    drop = set(ignore) & set(model.model_fields)
    rows = []
    for rid in ids:
        for rec in store.read_records(table, run_id=rid):
            data = _replace(rec.model_dump(mode="json", exclude=drop), subs)
            rows.append(json.dumps(data, separators=(",", ":"), ensure_ascii=False))
    return sorted(rows)


def table_digests(store: Store, run_ids: Iterable[str] | str,
                  ignore: Iterable[str] = TIME_COLUMNS) -> dict[str, str]:
    """``{table: sha256 hex}`` over every table of ``TABLES``, for the rows of ``run_ids``.

    An empty table has the digest of no rows (so "both empty" compares equal).
    ``ignore`` names columns left out of every table that has them.
    """
    ids = [run_ids] if isinstance(run_ids, str) else list(run_ids)
    ignore = frozenset(ignore)
    out = {}
    for table in sorted(TABLES):
        h = hashlib.sha256()
        for row in normalized_rows(store, table, ids, ignore):
            h.update(row.encode())
            h.update(b"\n")
        out[table] = h.hexdigest()
    return out
