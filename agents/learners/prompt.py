"""What the embedded learner reads of its system prompt: the values it states (``NAME = {...}``), at acting time
(``EmbeddedLearner.reset``) and in training (a trajectory that opens with its agent's system prompt). Nothing here
names a domain."""
from __future__ import annotations

import json
import re
from functools import lru_cache

STATED = re.compile(r"\b([A-Za-z][A-Za-z0-9_]*)\s*=\s*(?=\{)")


@lru_cache(maxsize=256)
def stated_values(system: str) -> str:
    """The JSON objects a system prompt states as ``NAME = {...}`` (the context an agent is given with its
    policy, such as where it is and what time it is), as one JSON object by lower-cased name; "" when it states
    none. The learner reads them as an observation made before the conversation (tool ``system``)."""
    decoder, found = json.JSONDecoder(), {}
    for m in STATED.finditer(system or ""):
        try:
            found[m.group(1).lower()] = decoder.raw_decode(system, m.end())[0]
        except ValueError:
            continue
    return json.dumps(found, sort_keys=True) if found else ""


def system_split(trajectories: list) -> tuple[list[str], list]:
    """Training trajectories whose first message is the system prompt (``evosyn.tasks.datasets.as_trajectories``):
    the values each one's prompt states, and the trajectories without that message (what the learner reads
    as the conversation; an agent is given its prompt apart from it, ``EmbeddedLearner.reset``)."""
    stated, rest = [], []
    for t in trajectories:
        first = t.messages[0] if t.messages else None
        if first is not None and first.role == "system":
            stated.append(stated_values(first.content or ""))
            t = t.model_copy(update={"messages": t.messages[1:]})
        else:
            stated.append("")
        rest.append(t)
    return stated, rest
