"""Copy-on-write entity tables, so a fresh episode costs microseconds, not a DB reload.

Most tau2 DBs are pydantic models whose fields are dicts of entities (users,
orders, bookings, ...). An episode's
DB holds a ``CowDict`` per field: a shallow copy of the shared base table that
deep-copies an entity the first time a tool looks it up by key, so tools
mutate private copies and the shared base never changes. Iteration (used by
search tools, which only read) sees the base objects plus the private copies.

The state digest hashes only the entities that differ from the base: two
episodes from the same base have equal digests iff their full DBs are equal,
which is what tau2 checks by hashing the whole 7 MB DB.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel


def _dump(entity: Any) -> str:
    data = entity.model_dump() if isinstance(entity, BaseModel) else entity
    return json.dumps(data, sort_keys=True, default=str)


def peek(table: dict, key, default=None):
    """Read an entity without taking a private copy (for checks that never mutate)."""
    return dict.get(table, key, default)


class CowDict(dict):
    __slots__ = ("_base", "_touched", "_deleted")

    def __init__(self, base: dict):
        super().__init__(base)
        self._base = base
        self._touched: set = set()
        self._deleted: set = set()

    def _own(self, key):
        if key not in self._touched:
            value = dict.__getitem__(self, key)
            if isinstance(value, BaseModel):
                value = value.model_copy(deep=True)
            dict.__setitem__(self, key, value)
            self._touched.add(key)
        return dict.__getitem__(self, key)

    def __getitem__(self, key):
        return self._own(key)

    def get(self, key, default=None):
        return self._own(key) if dict.__contains__(self, key) else default

    def __setitem__(self, key, value):
        self._touched.add(key)
        self._deleted.discard(key)
        dict.__setitem__(self, key, value)

    def __delitem__(self, key):
        dict.__delitem__(self, key)
        self._touched.discard(key)
        self._deleted.add(key)

    def pop(self, key, *default):
        if dict.__contains__(self, key):
            value = self._own(key)
            self.__delitem__(key)
            return value
        if default:
            return default[0]
        raise KeyError(key)

    def changes(self, base_dumps: dict) -> list[tuple[str, str]]:
        """(key, dump) of every entity that differs from the base; deletions dump as ''."""
        out = []
        for key in self._touched:
            dump = _dump(dict.__getitem__(self, key))
            if key in self._base:
                if key not in base_dumps:
                    base_dumps[key] = _dump(self._base[key])
                if base_dumps[key] == dump:
                    continue
            out.append((str(key), dump))
        out.extend((str(key), "") for key in self._deleted if key in self._base)
        return sorted(out)


class CowDB:
    """Builds episode DBs over one shared base DB and digests their changes."""

    def __init__(self, base_db: BaseModel):
        self.base = base_db
        self.model = type(base_db)
        self.tables = [name for name, value in base_db.__dict__.items() if isinstance(value, dict)]
        self.scalars = [name for name in base_db.__dict__ if name not in self.tables]
        self._base_dumps: dict[str, dict] = {name: {} for name in self.tables}

    def fresh(self) -> BaseModel:
        values = {name: CowDict(getattr(self.base, name)) for name in self.tables}
        for name in self.scalars:
            value = getattr(self.base, name)
            values[name] = value.model_copy(deep=True) if isinstance(value, BaseModel) else value
        return self.model.model_construct(**values)

    def digest(self, db: BaseModel) -> str:
        h = hashlib.sha256()
        for name in self.tables:
            table = getattr(db, name)
            if not isinstance(table, CowDict):  # replaced wholesale (e.g. by update_db): full dump
                h.update(f"{name}=*{_dump({k: v for k, v in table.items()})}".encode())
                continue
            for key, dump in table.changes(self._base_dumps[name]):
                h.update(f"{name}[{key}]={dump}\n".encode())
        for name in self.scalars:
            h.update(f"{name}={_dump(getattr(db, name))}\n".encode())
        return h.hexdigest()
