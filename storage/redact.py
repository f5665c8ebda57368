"""Secrets redacted before anything is written: cached replies, rows, logs, reports.

A key is registered once, when the client that sends it is built (agents/llm/factory.py); from then on
in this process every place that writes replaces its value with ``***``: the LLM client redacts a reply
before it caches or reads it (a server that echoes the Authorization header), the store redacts the
string columns of every table it writes (a key planted in a tool result or an error body), and a log
record factory redacts every log line, whichever logger or handler writes it. Reports, exports and
MLflow are written from those rows, so they never see a key either.

With no key registered (embedded runs) every function here returns its input unchanged, so runs
without keys write exactly what they wrote before.
"""
from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

MASK = "***"
MIN_SECRET = 8  # shorter values (a local server's "EMPTY", a test's "x") are no key worth matching: they would
# mask ordinary words
_secrets: tuple[str, ...] = ()
_lock = threading.Lock()
_factory_installed = False


def register(*values: str | None) -> None:
    """Redact these values from now on in this process (empty and short ones are ignored)."""
    global _secrets
    new = [v for v in values if v and len(v) >= MIN_SECRET and v not in _secrets]
    if not new:
        return
    with _lock:
        # longest first: a key that contains another is masked whole
        _secrets = tuple(sorted({*_secrets, *new}, key=len, reverse=True))
        _install_log_factory()


def secrets() -> tuple[str, ...]:
    return _secrets


def redact(text: str) -> str:
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def redact_value(value: Any) -> Any:
    """Every string inside ``value`` (dicts, lists, tuples) redacted; other values as they are."""
    if not _secrets:
        return value
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_value(k): redact_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_value(v) for v in value)
    return value


def redact_table(table: "pa.Table") -> "pa.Table":
    """The string (and list-of-string) columns of an Arrow table redacted, vectorized by pyarrow.compute."""
    if not _secrets:
        return table
    import pyarrow as pa
    import pyarrow.compute as pc

    for i, field in enumerate(table.schema):
        col = table.column(i)
        if pa.types.is_string(field.type) or pa.types.is_large_string(field.type):
            fixed = _replace(col, pc)
        elif pa.types.is_list(field.type) and pa.types.is_string(field.type.value_type):
            fixed = pa.chunked_array([_replace_list(chunk, pc) for chunk in col.chunks], type=field.type)
        else:
            continue
        if fixed is not col:
            table = table.set_column(i, field, fixed)
    return table


def _replace(col, pc):
    for secret in _secrets:
        if pc.any(pc.match_substring(col, secret)).as_py():
            col = pc.replace_substring(col, secret, MASK)
    return col


def _replace_list(chunk, pc):
    import pyarrow as pa

    values = _replace(chunk.values, pc)
    if values is chunk.values:
        return chunk
    return pa.ListArray.from_arrays(chunk.offsets, values, mask=chunk.is_null())


def _install_log_factory() -> None:
    """Every log record's message redacted as it is made: whichever logger, handler or library writes it."""
    global _factory_installed
    if _factory_installed:
        return
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is the logging module's to report, not ours
            return record
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, ()
        return record

    logging.setLogRecordFactory(factory)
    _factory_installed = True
