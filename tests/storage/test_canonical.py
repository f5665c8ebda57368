"""One canonical form at the record boundary: a record written and read back is the same record, field for field.

"The same" is ``model_dump_json`` equality: ``==`` on dicts ignores key order,
and key order is part of the value (tool-call arguments render into the
confirmation text a learner is trained on).
"""
from __future__ import annotations

import itertools
import json
import types
import typing
from datetime import datetime, timedelta, timezone

import annotated_types
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from evosyn.envs.gold import confirmation_request
from evosyn.storage.arrow import loads_json as _loads
from evosyn.storage.records import TABLES, Message, ToolCall
from tests.storage.samples import samples

_chunks = itertools.count()
ZONES = [None, timezone.utc, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8))]
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner)
    | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12)


def _constrained(info, base: st.SearchStrategy) -> st.SearchStrategy:
    for m in info.metadata:
        if isinstance(m, annotated_types.Ge):
            return st.integers(min_value=m.ge, max_value=2**53)
        if isinstance(m, annotated_types.MinLen):
            return base.filter(lambda v, n=m.min_length: len(v) >= n)
        if getattr(m, "pattern", None):
            return st.from_regex(m.pattern, fullmatch=True).filter(lambda s: len(s) < 20)
    return base


def strategy(ann) -> st.SearchStrategy:
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is typing.Annotated:
        return strategy(args[0])
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*[strategy(a) for a in args])
    if ann is type(None):
        return st.none()
    if origin is typing.Literal:
        return st.sampled_from(args)
    if origin is list:
        return st.lists(strategy(args[0]), max_size=3)
    if origin is dict:
        return st.dictionaries(st.text(max_size=6), strategy(args[1]), max_size=4)
    if ann is typing.Any:
        return JSON
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        fields = {n: _constrained(i, strategy(i.annotation)) for n, i in ann.model_fields.items()}
        return st.fixed_dictionaries(fields).map(ann.model_validate)
    return {str: st.text(max_size=10), int: st.integers(0, 2**53), float: st.floats(), bool: st.booleans(),
            datetime: st.datetimes(datetime(1971, 1, 1), datetime(2100, 1, 1), timezones=st.sampled_from(ZONES))
            }[ann]


def records(table: str) -> st.SearchStrategy:
    model, base = TABLES[table], samples()[table]
    lineage = {"run_id": base.run_id, "round": base.round}  # the partition: kept
    fields = {n: _constrained(i, strategy(i.annotation)) for n, i in model.model_fields.items() if n not in lineage}
    return st.fixed_dictionaries(fields).map(lambda d: model.model_validate({**d, **lineage}))


def same(a, b) -> bool:
    """Equal as JSON (what the brief of the store is) and as Python values, order, NaN and types included."""
    return a.model_dump_json() == b.model_dump_json() and repr(a.model_dump()) == repr(b.model_dump())


@pytest.mark.parametrize("table", sorted(TABLES))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(data=st.data())
def test_every_record_reads_back_as_itself(store, table, data):
    recs = data.draw(st.lists(records(table), min_size=1, max_size=3))
    chunk = f"c{next(_chunks)}"
    store.write(recs, chunk)
    back = store.read_chunk(table, recs[0].run_id, recs[0].round, chunk)
    assert len(back) == len(recs) and all(same(a, b) for a, b in zip(back, recs))


def test_argument_order_survives_the_store_and_so_does_the_confirmation_text(store):
    args = {"reservation_id": "ZFA04Y", "cabin": "economy", "flight_ids": ["HAT1"], "amount": 12.5,
            "payment_id": "credit_card_7", "nested": {"z": 1, "a": 2}}
    traj = samples()["trajectories"].model_copy(update={"messages": [
        Message(role="assistant", tool_calls=[ToolCall(id="c1", name="update_reservation_flights", arguments=args)])]})
    store.write([traj], "c0")
    back = store.read_records("trajectories")[0].messages[0].tool_calls[0].arguments
    assert list(back) == list(args) and list(back["nested"]) == ["z", "a"]
    assert confirmation_request("update_reservation_flights", back) == \
        confirmation_request("update_reservation_flights", args)


def test_values_json_cannot_hold_are_canonical_from_construction_on(store):
    """A tuple, a set, a datetime inside a free-form dict: the record holds what a read-back gives."""
    task = samples()["tasks"].model_copy()
    task = type(task).model_validate({**task.model_dump(), "tau2_task": {
        "b": (1, 2), "a": {3}, "when": datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=timezone.utc)}})
    assert task.tau2_task == {"b": [1, 2], "a": [3], "when": "2026-01-02T03:04:05.678901Z"}
    store.write([task], "c0")
    assert same(store.read_records("tasks")[0], task)


def test_timestamps_are_utc_with_microseconds(store):
    run = samples()["runs"]
    local = datetime(2026, 3, 1, 9, 30, 15, 123456, tzinfo=timezone(timedelta(hours=2)))
    for when in (local, local.replace(tzinfo=None)):
        rec = type(run).model_validate({**run.model_dump(), "created_at": when})
        assert rec.created_at.tzinfo is timezone.utc and rec.created_at.microsecond == 123456
        store.write([rec], "c0")
        assert same(store.read_records("runs")[0], rec)


def test_rows_parse_as_json_loads_parses_them(store):
    """Rows are parsed by pydantic-core's JSON parser (faster than json.loads): extreme floats and big
    integers in free-form JSON read back unchanged, and text it refuses (a lone surrogate escape, which
    json.dumps writes) falls back to json.loads."""
    task = samples()["tasks"]
    task = type(task).model_validate({**task.model_dump(), "tau2_task": {
        "tiny": 5e-324, "huge": 1.7976931348623157e308, "tenth": 0.1, "big": 2**70,
        "nested": [{"k": "\u00e9\U0001F600"}]}})
    store.write([task], "c0")
    back = store.read_records("tasks")[0]
    assert same(back, task) and back.tau2_task["big"] == 2**70
    text = json.dumps({"lone": "\ud800 half a pair", "floats": [0.1, 1e-320, 2.5e300]})
    assert _loads(text) == json.loads(text)
