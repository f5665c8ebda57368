"""Candidate profiles: what a candidate's features read of it, so that features and scores are made once.

The argument and report models score candidates by hashed features (``tool=...|arg=...|key=...``). A
feature never holds the value itself, only what it looks like and where it sits (its source, key, kind,
shape, age, relation to the request ...), so the candidates of many decisions share a *profile*: the
tuple of everything the features read. ``profile_parts`` builds a profile's features once (cached), in
parts that many profiles share, and the learner hashes each distinct part once per batch of rows
(``hashing.hashed_rows``); ``candidate_features`` is the two composed. Nothing here names a domain.
"""
from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from evosyn.agents.learners.dialogue import shape
from evosyn.agents.learners.features import Candidate, Scene, is_int, norm


def candidate_features(tool: str, arg: str, c: Candidate, used: set[str], scene: Scene) -> list[str]:
    return list(profile_features(tool, arg, candidate_profile(c, used, scene)))


@lru_cache(maxsize=1 << 16, typed=True)
def _scalar_facts(value: Any) -> tuple[str, str, str, str]:
    return _value_facts(value)


def _value_facts(value: Any) -> tuple[str, str, str, str]:
    """What a candidate's features read of its value: its kind, shape, JSON text and normalized text."""
    return "int" if is_int(value) else type(value).__name__, shape(value), json.dumps(value, sort_keys=True), \
        norm(value)


def value_facts(value: Any) -> tuple[str, str, str, str]:
    # cached for hashable scalars (typed: 1, 1.0 and True stay apart); -0.0 equals 0.0 but dumps differently
    if isinstance(value, (str, int, bool)) or value is None or (isinstance(value, float) and value != 0):
        return _scalar_facts(value)
    return _value_facts(value)


@lru_cache(maxsize=4096)
def _normed(text: str) -> str:
    return norm(text)


def candidate_profile(c: Candidate, used: set[str], scene: Scene) -> tuple:
    """Everything ``profile_features`` reads of a candidate in a scene, reduced to the values it uses.

    Many candidates of many decisions share a profile (the value itself is no feature, only what it
    looks like and where it sits), so a profile's features are built once and looked up after
    (``profile_parts`` is cached, and so are its parts; the learner remembers its models' score of each part).
    Only ``used`` differs between the arguments of one decision: the rest is kept with the candidate.
    """
    known = c.__dict__.get("_profile")
    if known is None or known[0] != scene.serial:
        known = c.__dict__["_profile"] = (scene.serial, *_in_scene(c, scene))
    return known[1] + (known[2] in used,)


def candidate_json(c: Candidate, scene: Scene) -> str:
    """``json.dumps(c.value, sort_keys=True)``, as the candidate's profile in ``scene`` read it (made once)."""
    known = c.__dict__.get("_profile")
    if known is None or known[0] != scene.serial:
        candidate_profile(c, set(), scene)
        known = c.__dict__["_profile"]
    return known[2]


def _in_scene(c: Candidate, scene: Scene) -> tuple[tuple, str]:
    d = c.__dict__  # read once each: this runs for every candidate of every decision
    value, source, key, msg, tool, rank, age = d["value"], d["source"], d["key"], d["msg"], d["tool"], d["rank"], \
        d["age"]
    kind, shp, dumped, normed = value_facts(value)
    text, dlg = scene.text, scene.dlg
    rel = ro = here = in_text = share = key_in_text = None
    if source in ("user", "identity", "name"):
        rel, ro = dlg.relation(d["clause"]), dlg.relation(d["clause"], scene.open)
    if msg >= 0 and tool:
        of_msg = dlg.clause_of_msg
        here = msg < len(of_msg) and of_msg[msg] == dlg.pointer
    is_str = isinstance(value, str)
    if text:
        if is_str or (isinstance(value, int) and not isinstance(value, bool)):
            in_text = normed in text
        if source == "schema" and is_str:
            said = normed.split()  # how much of a quoted phrase the request says
            share = round(3 * (sum(f" {w} " in text for w in said) / len(said)))
        if key and source in ("obs", "composite"):
            key_in_text = _normed(key.split("*")[0].split("+")[0].split("-")[0]) in text
    same = scene.fact_keys(value)[:3] if is_str and scene.facts else ()
    ranked = source in RANKED
    words_t, facts_t = scene.tuples()
    words = words_t if same or ranked or source == "obs" else ()
    if not words and source == "schema" and key.startswith("learned:"):
        words = scene.said  # an object the data gives an argument: which one, the user's words tell
    return (source, key, kind, min(age, 12), shp, d["path"], tool, d["kind"], d["in_last_user"],
            None if rank is None else min(rank, 4), d["first_unused"], d["first_unwritten"], d["focus"],
            rel, ro, here, in_text, share, key_in_text, same, words,
            facts_t if ranked else (), d["match"], tuple(d["extra"])), dumped


def profile_features(tool: str, arg: str, profile: tuple) -> tuple[str, ...]:
    """The hashed features of a candidate (by its ``candidate_profile``) for ``tool``'s argument ``arg``."""
    return sum(profile_parts(tool, arg, profile), ())


@lru_cache(maxsize=1 << 16)
def profile_parts(tool: str, arg: str, profile: tuple) -> tuple[tuple[str, ...], ...]:
    """``profile_features`` in parts, each cached on its own and reading only what it needs, so that the
    candidates of a decision (and of decisions alike) share most of them: the candidate's shape, its place in
    the conversation, and its ties to the request's words (the fact it is, the words beside an observed
    value, how its record matches, the words and facts beside a built value, how it was built)."""
    (source, key, kind, age, shp, path, obs_tool, ukind, in_last_user, rank, first_unused, first_unwritten, focus,
     rel, ro, here, in_text, share, key_in_text, same, words, facts, match, extra, used_before) = profile
    obs = source == "obs"
    return (_shape(tool, arg, source, key, kind, age, shp),
            _place(tool, arg, source, key, path, obs_tool, ukind, in_last_user, rank, first_unused, first_unwritten,
                   focus, used_before, rel, ro, here, in_text, share, key_in_text),
            _same(arg, source, same, words) if same else (),
            _observed_words(arg, focus, words) if obs and words else (),
            _match(tool, arg, path, match) if obs and match else (),
            _ranked(arg, key, words, facts) if source in RANKED and (words or facts) else (),
            _extra(arg, key, extra) if extra else ())


RANKED = ("composite", "schema", "assembled", "list")


@lru_cache(maxsize=1 << 15)
def _shape(tool, arg, source, key, kind, age, shp) -> tuple[str, ...]:
    base = [f"src={source}", f"key={key}", f"kind={kind}", f"age={age}", f"shape={shp}"]
    feats = base + [f"arg={arg}|{b}" for b in base] + [f"tool={tool}|arg={arg}|key={key}",
                                                       f"tool={tool}|arg={arg}|src={source}"]
    leaf = arg.rsplit(".", 1)[-1]
    if key and (key == leaf or leaf.endswith(key) or key.endswith(leaf)):
        feats += ["key_matches_arg", f"arg={arg}|key_matches_arg"]
    return tuple(feats)


@lru_cache(maxsize=1 << 16)
def _place(tool, arg, source, key, path, obs_tool, ukind, in_last_user, rank, first_unused, first_unwritten, focus,
           used_before, rel, ro, here, in_text, share, key_in_text) -> tuple[str, ...]:
    feats = []
    if path:
        feats += [f"arg={arg}|path={path}", f"arg={arg}|obs_tool={obs_tool}|path={path}"]
    if ukind:
        feats += [f"arg={arg}|ukind={ukind}", f"tool={tool}|arg={arg}|ukind={ukind}"]
    if in_last_user:
        feats += ["in_last_user", f"arg={arg}|in_last_user"]
    if rank is not None:
        feats += [f"rank={rank}", f"arg={arg}|rank={rank}", f"tool={tool}|arg={arg}|rank={rank}"]
    for flag, on in (("first_unused", first_unused), ("first_unwritten", first_unwritten), ("focus", focus)):
        if on:
            feats += [flag, f"arg={arg}|{flag}", f"tool={tool}|arg={arg}|{flag}"]
    if used_before:
        feats += ["used_before", f"arg={arg}|used_before"]
    if rel is not None:
        feats += [f"rel={rel}", f"arg={arg}|rel={rel}", f"tool={tool}|arg={arg}|ukind={ukind}|rel={rel}",
                  f"arg={arg}|key={key}|rel={rel}", f"arg={arg}|ropen={ro}", f"arg={arg}|rel={rel}|ropen={ro}",
                  f"tool={tool}|arg={arg}|ukind={ukind}|ropen={ro}"]
    if here is not None:
        feats += [f"arg={arg}|obs_cur={here}", f"tool={tool}|arg={arg}|obs_tool={obs_tool}|obs_cur={here}"]
    if in_text is not None:
        feats += [f"arg={arg}|in_cur_text={in_text}", f"tool={tool}|arg={arg}|src={source}|in_cur_text={in_text}"]
    if share is not None:
        feats += [f"arg={arg}|words_in_text={share}", f"words_in_text={share}"]
    if key_in_text is not None:
        feats.append(f"arg={arg}|key_in_text={key_in_text}")
    return tuple(feats)


@lru_cache(maxsize=1 << 16)
def _same(arg, source, same, words) -> tuple[str, ...]:
    """The value a record in focus holds, and under which key."""
    return tuple([f"arg={arg}|fact={k}" for k in same] + [f"arg={arg}|src={source}|fact={k}|cw_{w}"
                                                           for k in same[:1] for w in words])


@lru_cache(maxsize=1 << 14)
def _observed_words(arg, focus, words) -> tuple[str, ...]:
    return tuple(f"arg={arg}|obs|focus={focus}|cw_{w}" for w in words)


@lru_cache(maxsize=1 << 14)
def _match(tool, arg, path, match) -> tuple[str, ...]:
    return f"arg={arg}|match={match}", f"arg={arg}|path={path}|match={match}", f"tool={tool}|arg={arg}|match={match}"


@lru_cache(maxsize=1 << 15)
def _ranked(arg, key, words, facts) -> tuple[str, ...]:
    return tuple([f"arg={arg}|key={key}|cw_{w}" for w in words] + [f"arg={arg}|key={key}|{f}" for f in facts])


@lru_cache(maxsize=1 << 14)
def _extra(arg, key, extra) -> tuple[str, ...]:
    return tuple([f"arg={arg}|{x}" for x in extra] + [f"arg={arg}|key={key}|{x}" for x in extra])
