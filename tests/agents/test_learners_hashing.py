"""Rows hashed a distinct group at a time are ``FeatureHasher``'s matrix, bit for bit, and the cheaper feature
building changes no feature."""
import random
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest
from sklearn.feature_extraction import FeatureHasher

from evosyn.agents.learners.features import (
    MAX_NAMED,
    Candidate,
    Scene,
    _observed,
    mentions_record,
    naming,
)
from evosyn.agents.learners.hashing import Columns, hashed_rows
from evosyn.agents.learners.profiles import RANKED, profile_features, profile_parts
from evosyn.agents.learners.replies import labels_of
from evosyn.agents.learners.state import state_tokens
from evosyn.envs.packs import get_domain
from evosyn.tasks.learn import fit_embedded

N = 2 ** 18


@pytest.fixture(scope="module")
def learned(space, synth_pass):
    """A trained learner, the argument rows of its trajectories' calls, their decision states and scenes."""
    trajectories = [c.trajectory for c in synth_pass(space, 60, seed=3).kept]
    learner = fit_embedded(trajectories, get_domain("airline"))
    rows, labels, states, scenes = [], [], [], []
    for traj in trajectories:
        for i, m in enumerate(traj.messages):
            if m.role != "assistant":
                continue
            history = traj.messages[:i]
            scene = Scene.of(history, learner.writes)
            states.append(state_tokens(history, scene, labels_of(history)))
            scenes.append(scene)
            if m.tool_calls:
                learner._arg_samples(m.tool_calls[0], history, scene, rows, labels)
    assert len(rows) > 2000 and len(states) > 200
    return learner, rows, states, scenes


def test_rows_from_groups_are_the_feature_hashers_matrix(learned):
    _, rows, _, _ = learned
    groups = [profile_parts(t, a, p) + (e,) for t, a, p, e in rows]
    groups += [g + g[:1] for g in groups[:300]]  # a group twice in a row: its features count twice
    hasher = FeatureHasher(n_features=N, input_type="string", alternate_sign=False)
    got = hashed_rows(hasher, groups)
    want = hasher.transform(sum(g, ()) for g in groups)
    assert got.max() > 1  # counts above one are there to compare
    for part in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(got, part), getattr(want, part)), part


def test_recurring_rows_by_index_are_the_feature_hashers_matrix(learned):
    _, rows, _, _ = learned
    distinct = [profile_parts(t, a, p) + (e,) for t, a, p, e in dict.fromkeys(rows)]
    rnd = random.Random(1)
    index = [rnd.randrange(len(distinct)) for _ in range(3 * len(distinct))]  # rows recur, in any order
    hasher = FeatureHasher(n_features=N, input_type="string", alternate_sign=False)
    got = hashed_rows(hasher, distinct, index)
    want = hasher.transform(sum(distinct[i], ()) for i in index)
    assert got.shape == want.shape and len(set(index)) < len(index)
    for part in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(got, part), getattr(want, part)), part


class CountingHasher(FeatureHasher):
    """A FeatureHasher that counts the features it is handed."""

    hashed = 0

    def transform(self, raw_X):
        raw_X = [list(x) for x in raw_X]
        CountingHasher.hashed += sum(map(len, raw_X))
        return super().transform(raw_X)


def test_remembered_columns_make_the_feature_hashers_matrix_hashing_each_feature_once(learned):
    _, rows, states, _ = learned
    groups = [profile_parts(t, a, p) + (e,) for t, a, p, e in rows]
    groups += [g + g[:1] for g in groups[:300]]  # a group twice in a row: its features count twice
    groups += [(tuple(s.split()),) for s in states[:50]] + [((), ()), (("é", "日本", ""),)]
    columns = Columns(CountingHasher(n_features=N, input_type="string", alternate_sign=False))
    plain = FeatureHasher(n_features=N, input_type="string", alternate_sign=False)
    counts = []
    for batch in (groups[:500], groups[300:], groups):
        before = CountingHasher.hashed
        got = columns.rows(batch)
        want = plain.transform(sum(g, ()) for g in batch)
        for part in ("indptr", "indices", "data"):
            assert np.array_equal(getattr(got, part), getattr(want, part)), part
        counts.append(CountingHasher.hashed - before)
    # each distinct feature hashed once: the first batch's, then only the second's new ones, then none
    assert counts[0] == len({f for r in groups[:500] for g in r for f in g})
    assert counts[0] + counts[1] == len(columns) == len({f for r in groups for g in r for f in g})
    assert counts[2] == 0


def test_full_columns_start_afresh(learned, monkeypatch):
    from evosyn.agents.learners import hashing

    _, rows, _, _ = learned
    monkeypatch.setattr(hashing, "MAX_COLUMNS", 50)
    groups = [profile_parts(t, a, p) + (e,) for t, a, p, e in rows[:400]]
    columns, plain = Columns(FeatureHasher(n_features=N, input_type="string", alternate_sign=False)), \
        FeatureHasher(n_features=N, input_type="string", alternate_sign=False)
    for start in range(0, 400, 20):
        got, want = columns.rows(groups[start:start + 20]), plain.transform(sum(g, ()) for g in groups[start:start + 20])
        assert np.array_equal(got.indices, want.indices) and np.array_equal(got.data, want.data)
    assert len(columns) <= max(50, len({f for r in groups[380:] for g in r for f in g}))


def test_rows_without_features_and_no_rows_at_all():
    hasher = FeatureHasher(n_features=N, input_type="string", alternate_sign=False)
    a, b = ("x", "y"), ("x",)
    got = hashed_rows(hasher, [((), a), ((),), (b, (), a)])
    want = hasher.transform([["x", "y"], [], ["x", "x", "y"]])
    for part in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(got, part), getattr(want, part)), part
    assert hashed_rows(hasher, []).shape == (0, N) and hashed_rows(hasher, [((),)]).nnz == 0


def words_before_the_split(tool, arg, source, key, path, focus, same, words, facts, match, extra):
    """The request-words features of a candidate as one function, as they were before ``profile_parts`` split
    them into shared sub-parts."""
    feats = []
    if same:
        feats += [f"arg={arg}|fact={k}" for k in same] + [f"arg={arg}|src={source}|fact={k}|cw_{w}"
                                                          for k in same[:1] for w in words]
    if source == "obs":
        feats += [f"arg={arg}|obs|focus={focus}|cw_{w}" for w in words]
        if match:
            feats += [f"arg={arg}|match={match}", f"arg={arg}|path={path}|match={match}",
                      f"tool={tool}|arg={arg}|match={match}"]
    if source in RANKED:
        feats += [f"arg={arg}|key={key}|cw_{w}" for w in words] + [f"arg={arg}|key={key}|{f}" for f in facts]
    return feats + [f"arg={arg}|{x}" for x in extra] + [f"arg={arg}|key={key}|{x}" for x in extra]


def test_the_split_profile_has_the_features_it_had(learned):
    _, rows, _, _ = learned
    sources = Counter()
    for tool, arg, p, _ in rows:
        source, key, path, focus = p[0], p[1], p[5], p[12]
        same, words, facts, match, extra = p[19:24]
        parts = profile_parts(tool, arg, p)
        assert list(sum(parts[2:], ())) == words_before_the_split(tool, arg, source, key, path, focus, same, words,
                                                                   facts, match, extra)
        assert profile_features(tool, arg, p) == sum(parts, ())
        sources[source] += bool(parts[2:] != ((),) * 5)
    assert sources["obs"] and sources["composite"] and sources["schema"]  # every kind of sub-part was built


def test_candidate_copies_are_what_dataclasses_make():
    c = Candidate(5, "obs", "k", age=3, path="a.b", tool="t", msg=2, extra=["x"], within=(1,), match="best")
    c.__dict__["_profile"] = ("what it read of a scene",)
    d = c.but("5", "as_text")
    want = replace(c, value="5", extra=["x", "as_text"])
    assert d == want and d.__dict__ == want.__dict__ and c.extra == ["x"]
    made = _observed([{"a": 1}], "list", "items", "res.items", "get_x", 4, (0, 2))
    want = Candidate([{"a": 1}], "list", "items", path="res.items", tool="get_x", msg=4, within=(0, 2))
    assert made == want and made.__dict__ == want.__dict__
    assert made.extra is not _observed(1, "obs", "", "", "", 0, ()).extra  # a list of its own, as default_factory


def test_values_that_name_records_are_counted_as_before(learned):
    *_, scenes = learned
    checked = 0
    for scene in scenes:
        cur = scene.dlg.current
        if cur is None or not scene.records:
            continue

        def most_in_one(values, names, records=scene.records):
            return max(Counter(r.msg for r in records if mentions_record(r, values, names)).values(), default=0)

        want = ({v for v in (str(m.value) for m in cur.mentions) if most_in_one({v}, []) <= MAX_NAMED},
                [nm for nm in cur.names() if most_in_one(set(), [nm]) <= MAX_NAMED])
        assert naming(scene.records, cur) == want
        checked += bool(want[0])
    assert checked > 50
