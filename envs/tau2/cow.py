"""Copy-on-write entity tables, so a fresh episode costs microseconds, not a DB reload.

Most tau2 DBs are pydantic models whose fields are dicts (or lists) of entities
(users, orders, bookings, lines, ...). An episode's DB holds a ``CowDict`` or
``CowList`` per such field over the shared base table. An entity is copied the
first time it is looked up while the episode may write (a write tool, an
environment function, any code outside a read-only tool), so writers mutate
private copies and the shared base never changes; inside a read-only tool
(``Mode.reading``) a lookup returns the base entity itself and copies nothing.
Dict iteration (``values()``, ``items()``) sees the base objects plus the
private copies: only read tools iterate dict tables.

The state digest hashes only the entities that differ from the base: two
episodes from the same base have equal digests iff their full DBs are equal
under tau2's own comparison (``json.dumps(model_dump(), sort_keys=True,
default=str)`` of the DB). An entity is dumped again only after a lookup that
could have changed it; tau2's tools look entities up on every call, so an
entity changes only after such a lookup. Code that keeps an entity across steps
and mutates it later must look it up again (or assign it back).
"""
from __future__ import annotations

import copy
import hashlib
import json
from datetime import date, datetime, time, timedelta
from enum import Enum
from typing import Any

from pydantic import BaseModel

_IMMUTABLE = (str, int, float, bool, type(None), bytes, date, datetime, time, timedelta)
_object_setattr = object.__setattr__


def clone(value: Any) -> Any:
    """A deep copy of a DB entity, several times faster than ``copy.deepcopy``.

    Entities loaded from JSON share no sub-objects, so no memo is kept; anything
    that is not a pydantic model, dict, list, tuple or immutable scalar goes
    through ``copy.deepcopy``. The copy carries the same fields-set and extras,
    so it dumps exactly like the original.
    """
    if isinstance(value, _IMMUTABLE) or isinstance(value, Enum):
        return value
    kind = type(value)
    if kind is dict:
        return {k: clone(v) for k, v in value.items()}
    if kind is list:
        return [clone(v) for v in value]
    if kind is tuple:
        return tuple(clone(v) for v in value)
    if isinstance(value, BaseModel):
        out = kind.__new__(kind)
        _object_setattr(out, "__dict__", {k: clone(v) for k, v in value.__dict__.items()})
        extra = value.__pydantic_extra__
        _object_setattr(out, "__pydantic_extra__", None if extra is None else clone(extra))
        _object_setattr(out, "__pydantic_fields_set__", set(value.__pydantic_fields_set__))
        private = getattr(value, "__pydantic_private__", None)
        _object_setattr(out, "__pydantic_private__", None if private is None else copy.deepcopy(private))
        return out
    return copy.deepcopy(value)


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in dict.items(value)}
    if isinstance(value, list):
        return [_plain(v) for v in list.__iter__(value)]
    return value


def _dump(entity: Any) -> str:
    """tau2's comparison form of an entity or table (``get_dict_hash`` hashes this of the whole DB)."""
    return json.dumps(_plain(entity), sort_keys=True, default=str)


def peek(table: Any, key, default=None):
    """Read an entity without taking a private copy (for checks that never mutate)."""
    if isinstance(table, dict):
        return dict.get(table, key, default)
    return list.__getitem__(table, key)


class Mode:
    """Shared by the tables of one episode DB: ``reading`` while a read-only tool runs."""

    __slots__ = ("reading",)

    def __init__(self) -> None:
        self.reading = False


class _Changes:
    """The entity dumps of a table that differ from the base, refreshed for dirty keys only."""

    __slots__ = ("dirty", "diff")

    def __init__(self) -> None:
        self.dirty: set = set()
        self.diff: dict[Any, str] = {}  # key -> dump ('' for an entity deleted from the base)


class CowDict(dict):
    __slots__ = ("_base", "_mode", "_owned", "_changes")

    def __init__(self, base: dict, mode: Mode | None = None):
        super().__init__(base)
        self._base = base
        self._mode = mode or Mode()
        self._owned: set = set()
        self._changes = _Changes()

    def _own(self, key):
        value = dict.__getitem__(self, key)
        if self._mode.reading:
            return value
        self._changes.dirty.add(key)
        if key not in self._owned:
            value = clone(value)
            dict.__setitem__(self, key, value)
            self._owned.add(key)
        return value

    def __getitem__(self, key):
        return self._own(key)

    def get(self, key, default=None):
        return self._own(key) if dict.__contains__(self, key) else default

    def __setitem__(self, key, value):
        self._owned.add(key)
        self._changes.dirty.add(key)
        dict.__setitem__(self, key, value)

    def __delitem__(self, key):
        dict.__delitem__(self, key)
        self._owned.discard(key)
        self._changes.dirty.add(key)

    def pop(self, key, *default):
        if dict.__contains__(self, key):
            value = self._own(key)
            self.__delitem__(key)
            return value
        if default:
            return default[0]
        raise KeyError(key)

    def setdefault(self, key, default=None):
        if not dict.__contains__(self, key):
            self[key] = default
        return self._own(key)

    def update(self, *args, **kwargs):
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def changes(self, base_dumps: dict) -> list[tuple[str, str]]:
        """(key, dump) of every entity that differs from the base; deletions dump as ''."""
        ch = self._changes
        for key in ch.dirty:
            if dict.__contains__(self, key):
                dump = _dump(dict.__getitem__(self, key))
                if key in self._base:
                    if key not in base_dumps:
                        base_dumps[key] = _dump(self._base[key])
                    if base_dumps[key] == dump:
                        ch.diff.pop(key, None)
                        continue
                ch.diff[key] = dump
            elif key in self._base:
                ch.diff[key] = ""
            else:
                ch.diff.pop(key, None)
        ch.dirty.clear()
        return sorted((str(k), v) for k, v in ch.diff.items())


class CowList(list):
    """A list table (entities found by scanning, e.g. ``for line in db.lines``), copied per element.

    Element positions are the keys. ``append`` adds a private element; any other
    change to the list's shape copies every element and digests the whole table.
    """

    __slots__ = ("_base", "_mode", "_owned", "_changes", "_whole")

    def __init__(self, base: list, mode: Mode | None = None):
        super().__init__(base)
        self._base = base
        self._mode = mode or Mode()
        self._owned: set[int] = set()
        self._changes = _Changes()
        self._whole = False

    def _own(self, i: int):
        value = list.__getitem__(self, i)
        if self._mode.reading:
            return value
        self._changes.dirty.add(i)
        if i not in self._owned:
            value = clone(value)
            list.__setitem__(self, i, value)
            self._owned.add(i)
        return value

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._own(j) for j in range(*i.indices(list.__len__(self)))]
        n = list.__len__(self)
        if not -n <= i < n:
            raise IndexError("list index out of range")
        return self._own(i % n)

    def __iter__(self):
        i = 0
        while i < list.__len__(self):
            yield self._own(i)
            i += 1

    def append(self, value) -> None:
        list.append(self, value)
        i = list.__len__(self) - 1
        self._owned.add(i)
        self._changes.dirty.add(i)

    def _reshape(self, op: str, *args, **kwargs):
        if not self._whole:
            was, self._mode.reading = self._mode.reading, False
            try:
                for i in range(list.__len__(self)):
                    self._own(i)
            finally:
                self._mode.reading = was
            self._whole = True
        return getattr(list, op)(self, *args, **kwargs)

    def __setitem__(self, i, value):
        self._reshape("__setitem__", i, value)

    def __delitem__(self, i):
        self._reshape("__delitem__", i)

    def __iadd__(self, other):
        self._reshape("extend", other)
        return self

    def extend(self, other) -> None:
        self._reshape("extend", other)

    def insert(self, i, value) -> None:
        self._reshape("insert", i, value)

    def remove(self, value) -> None:
        self._reshape("remove", value)

    def pop(self, i: int = -1):
        return self._reshape("pop", i)

    def clear(self) -> None:
        self._reshape("clear")

    def sort(self, *args, **kwargs) -> None:
        self._reshape("sort", *args, **kwargs)

    def reverse(self) -> None:
        self._reshape("reverse")

    def changes(self, base_dumps: dict) -> list[tuple[str, str]]:
        if self._whole:
            dump = _dump(self)
            if "*" not in base_dumps:
                base_dumps["*"] = _dump(self._base)
            return [] if dump == base_dumps["*"] else [("*", dump)]
        ch = self._changes
        for i in ch.dirty:
            dump = _dump(list.__getitem__(self, i))
            if i < len(self._base):
                if i not in base_dumps:
                    base_dumps[i] = _dump(self._base[i])
                if base_dumps[i] == dump:
                    ch.diff.pop(i, None)
                    continue
            ch.diff[i] = dump
        ch.dirty.clear()
        return sorted((f"{k:08d}", v) for k, v in ch.diff.items())


def _is_table(value: Any) -> bool:
    if isinstance(value, dict):
        return True
    return isinstance(value, list) and bool(value) and all(isinstance(v, BaseModel) for v in value)


class CowDB:
    """Builds episode DBs over one shared base DB and digests their changes.

    Fields that are tables get a ``CowDict`` / ``CowList``; any other field
    (e.g. a device model) is cloned per episode and dumped whole at a digest.
    """

    def __init__(self, base_db: BaseModel):
        self.base = base_db
        self.model = type(base_db)
        self.tables = [name for name, value in base_db.__dict__.items() if _is_table(value)]
        self.scalars = [name for name in base_db.__dict__ if name not in self.tables]
        self._base_dumps: dict[str, dict] = {name: {} for name in self.tables}

    def fresh(self) -> tuple[BaseModel, Mode]:
        mode = Mode()
        values: dict[str, Any] = {}
        for name in self.tables:
            table = getattr(self.base, name)
            values[name] = CowDict(table, mode) if isinstance(table, dict) else CowList(table, mode)
        for name in self.scalars:
            values[name] = clone(getattr(self.base, name))
        db = self.model.model_construct(_fields_set=set(self.base.model_fields_set), **values)
        return db, mode

    def digest(self, db: BaseModel) -> str:
        h = hashlib.sha256()
        for name in self.tables:
            table = getattr(db, name)
            if not isinstance(table, (CowDict, CowList)):  # replaced wholesale (e.g. by update_db): full dump
                h.update(f"{name}=*{_dump(table)}".encode())
                continue
            for key, dump in table.changes(self._base_dumps[name]):
                h.update(f"{name}[{key}]={dump}\n".encode())
        for name in self.scalars:
            h.update(f"{name}={_dump(getattr(db, name))}\n".encode())
        return h.hexdigest()
