"""What the user reported and what the calls they made at the agent's request have addressed (dual control).

A user can report several problems in one message ("fix my phone: A; B; C"), each repaired by calls the user
makes on their own device as the agent asks (a check, then a fix). The agent's moves alone do not show which
problems are left: every request for a user call is the same move. From the training data the learner reads
which user calls go with which reported part (``Links``: a part is its words less the ones most conversations
share; a call is linked to it when the data makes it in at least ``MIN_SHARE`` of the conversations that report
the part, at least ``MIN_LIFT`` times as often as overall); while deciding, a reported part is addressed once
one of its linked calls was made, and the state names the first part still open, or that none is. Nothing here
names a domain, a tool or a word: the links are the data's.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from evosyn.agents.learners.dialogue import SPLIT
from evosyn.agents.learners.features import WORD
from evosyn.storage.records import Message, Trajectory

MIN_TRAJECTORIES = 5  # a reported part's conversations before its links count
MIN_SHARE = 0.5
MIN_LIFT = 2.0
COMMON = 0.5  # a word in this share of the conversations (how requests open) says nothing about which problem
MAX_OPEN_WORDS = 12
MAX_OBS_WORDS = 16  # words of the last user call's result


@dataclass
class Links:
    """Reported part (its uncommon words, sorted, space-joined) -> the user calls the data makes with it."""

    common: frozenset[str] = frozenset()
    calls: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def key(self, part: tuple[str, ...]) -> str:
        return " ".join(sorted(set(part) - self.common))


def _parts(history: list[Message]) -> list[tuple[str, ...]]:
    """The parts of the user's messages (split as the dialogue tracker splits requests), as their words."""
    out = []
    for m in history:
        if m.role == "user" and m.content:
            for part in SPLIT.split(m.content.lower()):
                words = tuple(dict.fromkeys(w for w in WORD.findall(part) if len(w) >= 4 and w.isalpha()))
                if words:
                    out.append(words)
    return out


def _user_calls(history: list[Message]) -> list[str]:
    return [c.name for m in history if m.role == "user" for c in m.tool_calls]


def learn_links(trajectories: list[Trajectory]) -> Links:
    """The user calls the data makes where the user reported each part (none where the user makes no call)."""
    seen = [(set(_user_calls(t.messages)), _parts(t.messages)) for t in trajectories]
    if not any(made for made, _ in seen):
        return Links()
    df = Counter(w for _, parts in seen for w in {w for part in parts for w in part})
    links = Links(frozenset(w for w, k in df.items() if k >= COMMON * len(seen)))
    keys, calls, both = Counter(), Counter(), Counter()
    for made, parts in seen:
        said = {links.key(p) for p in parts} - {""}
        keys.update(said)
        calls.update(made)
        both.update((k, c) for k in said for c in made)
    found: dict[str, list[str]] = {}
    for (k, c), n in both.items():
        if keys[k] >= MIN_TRAJECTORIES and n >= MIN_SHARE * keys[k] and n * len(seen) >= MIN_LIFT * keys[k] * calls[c]:
            found.setdefault(k, []).append(c)
    links.calls = {k: tuple(sorted(cs)) for k, cs in found.items()}
    return links


def open_tokens(history: list[Message], links: Links) -> list[str]:
    """State tokens of dual control: the reported parts still open, and the user's calls so far.

    The words of the first reported part no linked call has addressed yet and how many parts are open, or
    ``open_none`` once every part with links is addressed; then the calls the user made, the last one and the
    words of its result (a check that shows a fault), the last two read with whether a part is still open: a
    fix that leaves another problem open is followed by that problem's check, one that leaves none by the test.
    Nothing where the user made no call and no part has links, so a conversation without dual control keeps
    its state.
    """
    made = _user_calls(history)
    toks, status = [], "untracked"
    if links.calls:
        tracked = open_parts = 0
        first: tuple[str, ...] = ()
        for part in _parts(history):
            linked = set(links.calls.get(links.key(part), ()))
            if linked:
                tracked += 1
                if not linked & set(made):
                    open_parts += 1
                    first = first or part
        if tracked:
            status = "open" if open_parts else "none"
            toks += [f"open_{min(open_parts, 3)}"] + [f"open_w_{w}" for w in first[:MAX_OPEN_WORDS]] if open_parts \
                else ["open_none"]
    if not made:
        return toks
    i = max(j for j, m in enumerate(history) if m.role == "user" and m.tool_calls)
    last = made[-1]
    result = next((m for m in history[i + 1:] if m.role == "tool"), None)
    words = list(dict.fromkeys(WORD.findall((result.content or "").lower())))[:MAX_OBS_WORDS] if result else []
    toks += [t for name in dict.fromkeys(made) for t in (f"ucall_{name}", f"ucall_{name}|{status}")]
    toks += [f"ucalls_{min(len(made), 8)}", f"ulast_{last}|{history[-1].role}"]
    toks += [f"{t}|{status}" for t in [f"ulast_{last}"] + [f"uobs_{w}" for w in words]
             + [f"uobs_{w}|ulast_{last}" for w in words]]
    return toks
