"""How the embedded learner fills a call's arguments: its training rows, and its choice while acting.

Each argument is a choice among candidates from the context (``features.py``: the user's values, observed values
by path; ``candidates.py``: composites, schema enums, lists of objects), scored by one binary model (the
learner's ``argument`` model). A list of objects is read whole from the context or assembled field by field; a
list of scalars is chosen element by element (``elements.py``), so it can hold as many items as the request
names. Nothing here names a domain.
"""
from __future__ import annotations

import json
from typing import Any

import numpy as np

from evosyn.agents.learners.candidates import (
    arg_schema,
    item_keys,
    item_schema,
    list_candidates,
    resolve,
    scalar_pool,
    scalars,
    used_by_arg,
)
from evosyn.agents.learners.elements import (
    element_schema,
    elements,
    extended,
    picked,
    used_elements,
)
from evosyn.agents.learners.features import Candidate, Scene
from evosyn.agents.learners.profiles import candidate_json, candidate_profile
from evosyn.storage.records import Message, ToolCall

MAX_TRAIN_ITEMS = 3  # list items whose fields train the assembler


class Arguments:
    """The argument part of ``EmbeddedLearner``: ``tools`` (name -> function schema), ``constants`` and ``values``
    (read from the data), the fitted ``argument`` model and ``Scoring._positive`` come from the learner."""

    tools: dict[str, dict[str, Any]]
    constants: list[int]
    argument: Any

    def _learned(self, tool: str, arg: str) -> tuple[list[str], list[str]]:
        """The text values and the JSON objects the data gives ``tool``'s ``arg`` most often."""
        key = f"{tool}.{arg}"
        return getattr(self, "values", {}).get(key, []), getattr(self, "objects", {}).get(key, [])

    def _resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        return resolve(self.tools, schema)

    def _scalars(self, scene: Scene, pool: list[Candidate], schema: dict[str, Any],
                 learned: tuple[list[str], list[str]] = ((), ())):
        """``scalars`` once per decision's pool and schema: its arguments of one type share the candidates
        (the same objects, so their profiles too); ``learned``: ``_learned``'s texts and objects."""
        memo = scene.__dict__.get("_scalars")
        if memo is None or memo[0] is not pool:
            memo = scene.__dict__["_scalars"] = (pool, {})
        key = (json.dumps(schema, sort_keys=True), tuple(learned[0]), tuple(learned[1]))
        if key not in memo[1]:
            memo[1][key] = scalars(self.tools, schema, pool, *learned)
        return memo[1][key]

    # ------------------------------------------------------------ training rows
    def _arg_samples(self, call: ToolCall, history, scene: Scene, feats, labels) -> None:
        pool = scalar_pool(scene, self.constants)
        used = used_by_arg(history)
        for arg, gold in call.arguments.items():
            schema = arg_schema(self.tools, call.name, arg)
            keys = item_keys(schema, self._resolve)
            if keys and isinstance(gold, list):
                self._object_list_samples(call.name, arg, gold, keys, schema, scene, pool, used, feats, labels)
                continue
            elem = element_schema(self.tools, schema)
            if elem is not None and isinstance(gold, list):  # each candidate element: in the data's list or not
                golds = {json.dumps(v, sort_keys=True) for v in gold}
                had = used_elements(history).get(arg, set())
                for c in elements(scene, self._scalars(scene, pool, elem)):
                    feats.append((call.name, arg, candidate_profile(c, had, scene), ()))
                    labels.append(int(candidate_json(c, scene) in golds))
                continue
            target = json.dumps(gold, sort_keys=True)
            for c in self._scalars(scene, pool, schema, self._learned(call.name, arg)):
                feats.append((call.name, arg, candidate_profile(c, used.get(arg, set()), scene), ()))
                labels.append(int(candidate_json(c, scene) == target))

    def _object_list_samples(self, tool: str, arg: str, gold: list, keys: list[str], schema: dict[str, Any],
                             scene: Scene, pool: list[Candidate], used: dict[str, set[str]], feats, labels) -> None:
        """A list of objects: its items' fields (for assembling one) and the lists the context offers whole."""
        fields_ok = True
        for j, item in enumerate(gold[:MAX_TRAIN_ITEMS]):
            for k in keys:
                target = json.dumps(item.get(k) if isinstance(item, dict) else None, sort_keys=True)
                hit = False
                for c in self._scalars(scene, pool, item_schema(self.tools, schema, k)):
                    ok = candidate_json(c, scene) == target
                    hit |= ok
                    feats.append((tool, f"{arg}.{k}", candidate_profile(c, set(), scene), (f"item={j}",)))
                    labels.append(int(ok))
                fields_ok &= hit or j > 0
        cands = list_candidates(scene, keys)
        target = json.dumps(gold, sort_keys=True)
        found = any(candidate_json(c, scene) == target for c in cands)
        cands.append(Candidate(None, "assembled", "assembled", extra=["len=1"]))
        for c in cands:  # assembling is right only where no list in the context is
            ok = (len(gold) == 1 and fields_ok and not found) if c.source == "assembled" else \
                candidate_json(c, scene) == target
            feats.append((tool, arg, candidate_profile(c, used.get(arg, set()), scene), ()))
            labels.append(int(ok))

    # ------------------------------------------------------------ acting
    def _best(self, tool: str, arg: str, cands: list[Candidate], scene: Scene, used: set[str],
              extra: tuple[str, ...] = ()) -> Candidate | None:
        if not cands:
            return None
        scores = self._positive("argument", [(tool, arg, candidate_profile(c, used, scene), extra) for c in cands])
        return cands[int(np.argmax(scores))]

    def _choose_args(self, tool: str, history: list[Message], scene: Scene) -> dict[str, Any]:
        schema = self.tools.get(tool, {}).get("parameters", {})
        required = schema.get("required", list(schema.get("properties", {})))
        if self.argument is None:
            return {}
        pool = scalar_pool(scene, self.constants)
        used = used_by_arg(history)
        schemas = {arg: arg_schema(self.tools, tool, arg) for arg in required}
        keys_of = {arg: item_keys(s, self._resolve) for arg, s in schemas.items()}
        elem_of = {arg: element_schema(self.tools, s) for arg, s in schemas.items() if not keys_of[arg]}
        plain = {arg: self._scalars(scene, pool, s, self._learned(tool, arg)) for arg, s in schemas.items()
                 if not keys_of[arg] and elem_of[arg] is None}
        # the candidates of every plain argument scored in one predict_proba (their scores are independent),
        # each argument's best read from its slice
        rows = [(tool, arg, candidate_profile(c, used.get(arg, set()), scene), ())
                for arg, cands in plain.items() for c in cands]
        scores, start, best_plain = self._positive("argument", rows) if rows else None, 0, {}
        for arg, cands in plain.items():
            if cands:
                best_plain[arg] = cands[int(np.argmax(scores[start:start + len(cands)]))]
            start += len(cands)
        args = {}
        for arg, s in schemas.items():
            keys = keys_of[arg]
            if keys:
                item = {}
                for k in keys:
                    best = self._best(tool, f"{arg}.{k}", self._scalars(scene, pool, item_schema(self.tools, s, k)),
                                      scene, set(), ("item=0",))
                    item[k] = best.value if best else None
                cands = list_candidates(scene, keys) + [Candidate([item], "assembled", "assembled", extra=["len=1"])]
                best = self._best(tool, arg, cands, scene, used.get(arg, set()))
            elif elem_of[arg] is not None:
                continue  # below, with the lists of the same length
            else:
                best = best_plain.get(arg)
            if best is not None:
                args[arg] = best.value
        args.update(self._element_lists(tool, {a: e for a, e in elem_of.items() if e is not None}, history, scene,
                                        pool))
        return args

    def _element_lists(self, tool: str, elems: dict[str, dict[str, Any]], history: list[Message], scene: Scene,
                       pool: list[Candidate]) -> dict[str, list[Any]]:
        """The lists of scalars, element by element (``elements``); the lists the data always gives one length
        (``equal_lengths``) get the longest of their lengths."""
        scored = {}
        for arg, elem in elems.items():
            cands = elements(scene, self._scalars(scene, pool, elem))
            if cands:
                had = used_elements(history).get(arg, set())
                scores = self._positive("argument", [(tool, arg, candidate_profile(c, had, scene), ())
                                                     for c in cands])
                scored[arg] = (cands, scores, picked(cands, scores))
        tied = [a for a in getattr(self, "equal", {}).get(tool, []) if a in scored]
        k = max((len(scored[a][2]) for a in tied), default=0)
        return {arg: [cands[i].value for i in (extended(cands, scores, chosen, k) if arg in tied else chosen)]
                for arg, (cands, scores, chosen) in scored.items()}
