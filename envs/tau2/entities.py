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

_atoms: dict[type, bool] = {}


def atom(kind: type) -> bool:
    """Immutable leaf types (str, numbers, dates, enums), decided once per type."""
    atom = _atoms.get(kind)
    if atom is None:
        atom = _atoms[kind] = issubclass(kind, _IMMUTABLE) or issubclass(kind, Enum)
    return atom


def shallow_copy(model: BaseModel) -> BaseModel:
    """pydantic's own shallow copy (``model_copy``: the same fields-set and private state) with its extras
    deep-copied. A caller that then replaces the field values in ``vars(copy)`` with copies of its own
    gets a model that dumps and compares like ``model``. (tau2's DB models keep no private state: a
    test says so, since pydantic's copy shares its values.)"""
    out = model.model_copy()
    extra = out.model_extra  # the copy's own dict, its values still the original's
    if extra:
        extra.update(copy.deepcopy(extra))
    return out


SAME, DIFFERENT, UNSURE = 0, 1, 2


def compare(a: Any, b: Any) -> int:
    """SAME if ``a`` and ``b`` certainly dump alike (tau2's comparison), DIFFERENT if they certainly
    do not, UNSURE otherwise (e.g. an enum against its value): then callers compare dumps.
    Sub-objects ``a`` shares with ``b`` are not walked."""
    if a is b:
        return SAME
    ta = type(a)
    if ta is not type(b):
        if isinstance(a, dict) and isinstance(b, dict):  # a CowDict against the plain dict it overlays
            return _compare_dicts(a, b)
        if isinstance(a, list) and isinstance(b, list):
            return _compare_lists(a, b)
        return UNSURE
    if ta is str or ta is int or ta is bool:
        return SAME if a == b else DIFFERENT
    if ta is float:
        if a != a or b != b:  # NaN
            return UNSURE
        return SAME if repr(a) == repr(b) else DIFFERENT  # 0.0 and -0.0 dump differently
    if a is None:
        return SAME
    if isinstance(a, BaseModel):
        if a.model_extra != b.model_extra:
            return UNSURE
        verdict = _compare_dicts(a.__dict__, b.__dict__)
        return UNSURE if verdict == DIFFERENT and not _plain_model(ta) else verdict
    if isinstance(a, dict):
        return _compare_dicts(a, b)
    if isinstance(a, list):
        return _compare_lists(a, b)
    if isinstance(a, Enum):  # members of one enum: equal members are one object
        return DIFFERENT if isinstance(a, (str, int)) and a.value != b.value else UNSURE
    return UNSURE


_plain_models: dict[type, bool] = {}


def _plain_model(kind: type) -> bool:
    """Every field dumps as its value: none excluded, no custom serializer (so a differing field
    value means a differing dump)."""
    plain = _plain_models.get(kind)
    if plain is None:
        # pydantic has no public way to list a model's serializers: its private ``__pydantic_decorators__``
        # is read here and nowhere else (tests/envs/test_cow.py fails if pydantic changes it)
        decorators = kind.__pydantic_decorators__
        plain = _plain_models[kind] = (not decorators.field_serializers and not decorators.model_serializers
                                      and not any(f.exclude for f in kind.model_fields.values()))
    return plain


def _compare_lists(a: list, b: list) -> int:
    if list.__len__(a) != list.__len__(b):
        return DIFFERENT
    verdict = SAME
    for x, y in zip(list.__iter__(a), list.__iter__(b)):
        v = compare(x, y)
        if v == DIFFERENT:
            return DIFFERENT
        verdict = max(verdict, v)
    return verdict


def _compare_dicts(a: dict, b: dict) -> int:
    verdict = SAME
    if dict.__len__(a) != dict.__len__(b):
        verdict = UNSURE  # key sets differ, unless keys of other types dump alike (1 and "1")
    for k, v in dict.items(a):
        if not dict.__contains__(b, k):
            verdict = UNSURE
            continue
        c = compare(v, dict.__getitem__(b, k))
        if c == DIFFERENT and type(k) is str:
            return DIFFERENT
        verdict = max(verdict, UNSURE if c == DIFFERENT else c)
    if verdict == UNSURE and all(type(k) is str for k in dict.keys(a)) and all(type(k) is str for k in dict.keys(b)):
        if set(dict.keys(a)) != set(dict.keys(b)):
            return DIFFERENT  # string keys: differing key sets dump differently
    return verdict


def same(a: Any, b: Any) -> bool:
    """True only if ``a`` and ``b`` certainly dump alike."""
    return compare(a, b) == SAME


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
