"""A content hash per table, for "is this resumed run the same as an uninterrupted one?".

Two runs are the same when every table holds the same rows: the same field
values, dict key order included (it is part of the value: tool-call arguments
render into dialogue text), the same number of times. Row order is not part of
it (chunk files are read in name order, which says nothing about the data).
Wall-clock facts (``created_at``, ``latency_s``) differ between any two runs and
are left out, and each compared run id is replaced by ``<run>`` wherever it
appears in a string, so two runs of one config in two stores, or under two
names, compare equal. (Ids hashed from a run id would still differ; EvoSyn's
ids are hashed from content, not from the run id.)
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from storage.records import TABLES
from storage.store import Store

# created_at: when a row was written; latency_s: how long an LLM call took. Neither is content.
TIME_COLUMNS = frozenset({"created_at", "latency_s"})
RUN_PLACEHOLDER = "<run>"


def _replace(value: Any, run_ids: list[str]) -> Any:
    if isinstance(value, str):
        for rid in run_ids:
            value = value.replace(rid, RUN_PLACEHOLDER)
        return value
    if isinstance(value, list):
        return [_replace(v, run_ids) for v in value]
    if isinstance(value, dict):
        return {_replace(k, run_ids): _replace(v, run_ids) for k, v in value.items()}
    return value


def normalized_rows(store: Store, table: str, run_ids: Iterable[str] | str,
                    ignore: Iterable[str] = TIME_COLUMNS) -> list[str]:
    """The rows of ``table`` for ``run_ids`` as canonical JSON lines, sorted (what ``table_digests`` hashes)."""
    ids = [run_ids] if isinstance(run_ids, str) else list(run_ids)
    # longest first, so an id that contains another is replaced whole
    ordered = sorted(ids, key=len, reverse=True)
    model = TABLES[table]
    drop = set(ignore) & set(model.model_fields)
    rows = []
    for rid in ids:
        for rec in store.read_records(table, run_id=rid):
            data = _replace(rec.model_dump(mode="json", exclude=drop), ordered)
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
