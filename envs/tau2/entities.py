"""Copying, comparing and dumping DB entities (pydantic models, dicts, lists, scalars) for ``cow.py``.

``dump`` is tau2's own comparison form (``get_dict_hash`` of a DB hashes it);
``same`` and the float-free test decide cheaply when two values certainly dump
alike, so a dump is only taken when something may have changed.
"""
from __future__ import annotations

import copy
import json
import typing
from datetime import date, datetime, time, timedelta
from enum import Enum
from typing import Any

from pydantic import BaseModel

_IMMUTABLE = (str, int, float, bool, type(None), bytes, date, datetime, time, timedelta)
_object_setattr = object.__setattr__

_atoms: dict[type, bool] = {}


def atom(kind: type) -> bool:
    """Immutable leaf types (str, numbers, dates, enums), decided once per type."""
    atom = _atoms.get(kind)
    if atom is None:
        atom = _atoms[kind] = issubclass(kind, _IMMUTABLE) or issubclass(kind, Enum)
    return atom


def new_model(kind: type, fields: dict, like: BaseModel) -> BaseModel:
    """A model with these field values and ``like``'s fields-set (pydantic's own copy does the same)."""
    out = kind.__new__(kind)
    _object_setattr(out, "__dict__", fields)
    extra = like.__pydantic_extra__
    _object_setattr(out, "__pydantic_extra__", None if extra is None else copy.deepcopy(extra))
    _object_setattr(out, "__pydantic_fields_set__", set(like.__pydantic_fields_set__))
    private = getattr(like, "__pydantic_private__", None)
    _object_setattr(out, "__pydantic_private__", None if private is None else copy.deepcopy(private))
    return out


def same(a: Any, b: Any) -> bool:
    """True only if ``a`` and ``b`` dump alike (tau2's comparison): shared sub-objects are not walked.

    False may still dump alike (e.g. an enum and its value): callers compare dumps then."""
    if a is b:
        return True
    ta = type(a)
    if isinstance(a, BaseModel):
        if ta is not type(b) or a.__pydantic_extra__ != b.__pydantic_extra__:
            return False
        return same_dict(a.__dict__, b.__dict__)
    if isinstance(a, dict):
        return isinstance(b, dict) and same_dict(a, b)
    if isinstance(a, list):
        if not isinstance(b, list) or list.__len__(a) != list.__len__(b):
            return False
        return all(same(x, y) for x, y in zip(list.__iter__(a), list.__iter__(b)))
    if ta is not type(b):
        return False
    if ta is str or ta is int or ta is bool or a is None:
        return a == b
    if ta is float:
        return a == b and repr(a) == repr(b)  # 0.0 and -0.0 dump differently; NaN never equals
    return False


def same_dict(a: dict, b: dict) -> bool:
    if dict.__len__(a) != dict.__len__(b):
        return False
    for k, v in dict.items(a):
        if not dict.__contains__(b, k) or not same(v, dict.__getitem__(b, k)):
            return False
    return True


def plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump()
    if isinstance(value, dict):
        return {k: plain(v) for k, v in dict.items(value)}
    if isinstance(value, list):
        return [plain(v) for v in list.__iter__(value)]
    return value


def dump(entity: Any) -> str:
    """tau2's comparison form of an entity or table (``get_dict_hash`` hashes this of the whole DB)."""
    return json.dumps(plain(entity), sort_keys=True, default=str)


_float_free_cache: dict[Any, bool] = {}


def float_free(annotation: Any) -> bool:
    """No float (nor Any, object or an unknown type) can sit anywhere under this annotation."""
    known = _float_free_cache.get(annotation)
    if known is not None:
        return known
    _float_free_cache[annotation] = True  # a recursive model refers to itself: decided by its other fields
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        free = all(float_free(f.annotation) for f in annotation.model_fields.values())
    elif origin is typing.Literal:
        free = all(not isinstance(a, float) for a in args)
    elif origin is not None:
        free = all(float_free(a) for a in args if a is not Ellipsis)
    elif annotation is type(None) or annotation is None:
        free = True
    elif isinstance(annotation, type):
        free = (issubclass(annotation, (str, bool, int, date, datetime, time, timedelta, bytes, Enum))
                and not issubclass(annotation, float))
    else:
        free = False
    _float_free_cache[annotation] = free
    return free
