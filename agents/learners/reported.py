"""What the user reported and what the calls they made at the agent's request have addressed (dual control).

A user can report several problems in one message ("fix my phone: A; B; C"), each repaired by calls the user
makes on their own device as the agent asks (a check, then a fix). The agent's moves alone do not show which
problems are left: every request for a user call is the same move. From the training data the learner reads
which user calls go with which words of a report (``links``: a call the data makes in at least ``MIN_SHARE`` of
the conversations whose user wrote the word, at least ``MIN_LIFT`` times as often as overall); while deciding, a
reported part is addressed once one of its linked calls was made, and the state names the first part still
open, or that none is. Nothing here names a domain, a tool or a word: the links are the data's.
"""
from __future__ import annotations

from collections import Counter

from agents.learners.dialogue import SPLIT
from agents.learners.features import WORD
from storage.records import Message, Trajectory

MIN_TRAJECTORIES = 5  # a word's conversations before its links count
MIN_SHARE = 0.8
MIN_LIFT = 2.0
MAX_OPEN_WORDS = 12
MAX_OBS_WORDS = 16  # words of the last user call's result


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


def learn_links(trajectories: list[Trajectory]) -> dict[str, tuple[str, ...]]:
    """Word of a report -> the user calls the data makes where the user wrote it (none where no user calls)."""
    words, calls, both = Counter(), Counter(), Counter()
    n = 0
    for traj in trajectories:
        made = set(_user_calls(traj.messages))
        said = {w for part in _parts(traj.messages) for w in part}
        n += 1
        words.update(said)
        calls.update(made)
        both.update((w, c) for w in said for c in made)
    if not calls:
        return {}
    links: dict[str, list[str]] = {}
    for (w, c), k in both.items():
        if words[w] >= MIN_TRAJECTORIES and k >= MIN_SHARE * words[w] and k * n >= MIN_LIFT * words[w] * calls[c]:
            links.setdefault(w, []).append(c)
    return {w: tuple(sorted(cs)) for w, cs in links.items()}


def open_tokens(history: list[Message], links: dict[str, tuple[str, ...]]) -> list[str]:
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
    if links:
        tracked = open_parts = 0
        first: tuple[str, ...] = ()
        for part in _parts(history):
            linked = {c for w in part for c in links.get(w, ())}
            if linked:
                tracked += 1
                if not linked & set(made):
                    open_parts += 1
                    first = first or part
        if tracked:
            status = "open" if open_parts else "none"
            toks += [f"open_{min(open_parts, 3)}"] + [f"open_w_{w}" for w in first[:MAX_OPEN_WORDS]]
    if not made:
        return toks
    i = max(j for j, m in enumerate(history) if m.role == "user" and m.tool_calls)
    last = made[-1]
    result = next((m for m in history[i + 1:] if m.role == "tool"), None)
    words = list(dict.fromkeys(WORD.findall((result.content or "").lower())))[:MAX_OBS_WORDS] if result else []
    toks += [f"ucall_{name}" for name in dict.fromkeys(made)]
    toks += [f"ucalls_{min(len(made), 8)}", f"ulast_{last}|{history[-1].role}"]
    toks += [f"{t}|{status}" for t in [f"ulast_{last}"] + [f"uobs_{w}" for w in words]
             + [f"uobs_{w}|ulast_{last}" for w in words]]
    return toks
