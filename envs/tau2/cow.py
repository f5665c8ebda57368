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
under tau2's own comparison (``json.dumps(modeldump(), sort_keys=True,
default=str)`` of the DB). An entity is dumped again only after a lookup that
could have changed it; tau2's tools look entities up on every call, so an
entity changes only after such a lookup. Code that keeps an entity across steps
and mutates it later must look it up again (or assign it back).
"""
from __future__ import annotations

import copy
import hashlib
import weakref
from typing import Any

from pydantic import BaseModel

from evosyn.envs.tau2.entities import DIFFERENT, SAME, atom, compare, float_free, shallow_copy
from evosyn.envs.tau2.entities import dump as _dump


def clone(value: Any, mode: Mode | None = None) -> Any:
    """A deep copy of a DB entity, several times faster than ``copy.deepcopy``.

    Entities loaded from JSON share no sub-objects, so no memo is kept; anything
    that is not a pydantic model, dict, list, tuple or immutable scalar goes
    through ``copy.deepcopy``. The copy carries the same fields-set and extras,
    so it dumps exactly like the original. With a ``mode``, a model's field that
    is itself a dict of models (a flight's dates, a user's payment methods) becomes
    a ``CowDict`` over the original's, so its members are copied only when looked
    up for writing.
    """
    kind = type(value)
    if atom(kind):
        return value
    if kind is dict:
        return {k: v if atom(type(v)) else clone(v, mode) for k, v in value.items()}
    if kind is list:
        return [v if atom(type(v)) else clone(v, mode) for v in value]
    if kind is tuple:
        return tuple(clone(v, mode) for v in value)
    if isinstance(value, BaseModel):
        out = shallow_copy(value)
        fields = vars(out)  # the copy's own dict: its values are replaced in place, atoms are kept
        for k, v in fields.items():
            t = type(v)
            if atom(t):
                continue
            if mode is not None and t is dict and v and all(isinstance(x, BaseModel) for x in v.values()):
                fields[k] = CowDict(v, mode)
            else:
                fields[k] = clone(v, mode)
        return out
    return copy.deepcopy(value)


def peek(table: Any, key, default=None):
    """Read an entity without taking a private copy (for checks that never mutate)."""
    if isinstance(table, dict):
        return dict.get(table, key, default)
    return list.__getitem__(table, key)


class Mode:
    """Shared by the tables of one episode DB: ``reading`` while a read-only tool runs."""

    __slots__ = ("__weakref__", "reading", "scalar_dumps")

    def __init__(self) -> None:
        self.reading = False
        self.scalar_dumps: dict[str, tuple[str, str]] = {}  # field -> (its model_dump_json, its dump)


class _Changes:
    """The entity dumps of a table that differ from the base, refreshed for dirty keys only."""

    __slots__ = ("blob", "diff", "dirty", "lines")

    def __init__(self) -> None:
        self.dirty: set = set()
        self.diff: dict[Any, str] = {}  # key -> dump ('' for an entity deleted from the base)
        self.lines: list[tuple[str, str]] | None = []  # sorted diff; None: to be rebuilt
        self.blob: bytes | None = None  # the lines as the digest hashes them

    def refresh(self, key, value: Any, base: Any, in_base: bool, base_dumps: dict) -> None:
        """Re-derive ``key``'s entry from its current ``value`` and its ``base`` one (``in_base``: it has one)."""
        verdict = compare(value, base) if in_base else DIFFERENT
        if verdict == SAME:
            self.diff.pop(key, None)
            return
        dump = _dump(value)
        if verdict != DIFFERENT:  # only a dump can tell
            if key not in base_dumps:
                base_dumps[key] = _dump(base)
            if base_dumps[key] == dump:
                self.diff.pop(key, None)
                return
        self.diff[key] = dump


class CowDict(dict):
    __slots__ = ("_base", "_changes", "_mode", "_owned")

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
            value = clone(value, self._mode)
            dict.__setitem__(self, key, value)
            self._owned.add(key)
        return value

    def _own_all(self) -> None:
        if not self._mode.reading:
            for key in list(dict.keys(self)):
                self._own(key)

    def __getitem__(self, key):
        return self._own(key)

    # iterating members for writing takes private copies of all of them (tau2's write tools never do)
    def values(self):
        self._own_all()
        return dict.values(self)

    def items(self):
        self._own_all()
        return dict.items(self)

    def copy(self):
        self._own_all()
        return dict(dict.items(self))

    def popitem(self):
        if not dict.__len__(self):
            raise KeyError("popitem(): dictionary is empty")
        key = next(reversed(dict.keys(self)))
        return key, self.pop(key)

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
        if not ch.dirty and ch.lines is not None:
            return ch.lines
        for key in ch.dirty:
            if dict.__contains__(self, key):
                in_base = key in self._base
                ch.refresh(key, dict.__getitem__(self, key), self._base[key] if in_base else None, in_base, base_dumps)
            elif key in self._base:
                ch.diff[key] = ""
            else:
                ch.diff.pop(key, None)
        ch.dirty.clear()
        ch.lines, ch.blob = sorted((str(k), v) for k, v in ch.diff.items()), None
        return ch.lines


class CowList(list):
    """A list table (entities found by scanning, e.g. ``for line in db.lines``), copied per element.

    Element positions are the keys. ``append`` adds a private element; any other
    change to the list's shape copies every element and digests the whole table.
    """

    __slots__ = ("_base", "_changes", "_mode", "_owned", "_whole")

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
            value = clone(value, self._mode)
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
        if self._mode.reading:
            return list.__iter__(self)
        return self._owning_iter()

    def _owning_iter(self):
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
        if not ch.dirty and ch.lines is not None:
            return ch.lines
        for i in ch.dirty:
            in_base = i < len(self._base)
            ch.refresh(i, list.__getitem__(self, i), self._base[i] if in_base else None, in_base, base_dumps)
        ch.dirty.clear()
        ch.lines, ch.blob = sorted((f"{k:08d}", v) for k, v in ch.diff.items()), None
        return ch.lines


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
        # the Mode of each episode DB without tables (its scalars' dump cache), by id while the DB lives
        self._modes: weakref.WeakValueDictionary[int, Mode] = weakref.WeakValueDictionary()

    def forget_base_dumps(self) -> None:
        """Empty the cache of base-entity dumps (benchmarks that time a cold start)."""
        for dumps in self._base_dumps.values():
            dumps.clear()

    def fresh(self) -> tuple[BaseModel, Mode]:
        mode = Mode()
        values: dict[str, Any] = {}
        for name in self.tables:
            table = getattr(self.base, name)
            values[name] = CowDict(table, mode) if isinstance(table, dict) else CowList(table, mode)
        for name in self.scalars:
            values[name] = clone(getattr(self.base, name))
        db = shallow_copy(self.base)
        vars(db).update(values)  # every field: a table over the base's, or a clone
        if not self.tables:
            self._modes[id(db)] = mode
        return db, mode

    def digest(self, db: BaseModel) -> str:
        h = hashlib.sha256()
        for name in self.tables:
            table = getattr(db, name)
            if not isinstance(table, (CowDict, CowList)):  # replaced wholesale (e.g. by update_db): full dump
                h.update(f"{name}=*{_dump(table)}".encode())
                continue
            lines = table.changes(self._base_dumps[name])
            ch = table._changes
            if ch.blob is None or lines is not ch.lines:
                blob = "".join(f"{name}[{key}]={dump}\n" for key, dump in lines).encode()
                if lines is ch.lines:
                    ch.blob = blob
            else:
                blob = ch.blob
            h.update(blob)
        mode = next((t._mode for t in (getattr(db, n) for n in self.tables) if isinstance(t, (CowDict, CowList))),
                    None) if self.tables else self._modes.get(id(db))
        for name in self.scalars:
            h.update(f"{name}={self._scalardump(db, name, mode)}\n".encode())
        return h.hexdigest()

    def _scalardump(self, db: BaseModel, name: str, mode: Mode | None) -> str:
        """The dump of a non-table field, reused while its ``model_dump_json()`` stays the same.

        Only for models whose fields hold no floats anywhere (``_float_free``): there pydantic's JSON
        is as exact as tau2's dump (same values, same types; key order may differ, which only costs a
        fresh dump). Anything else is dumped at every digest."""
        value = getattr(db, name)
        if mode is None or not isinstance(value, BaseModel) or not float_free(type(value)):
            return _dump(value)
        key = value.model_dump_json()
        cached = mode.scalar_dumps.get(name)
        if cached is not None and cached[0] == key:
            return cached[1]
        dump = _dump(value)
        mode.scalar_dumps[name] = (key, dump)
        return dump
