"""The user simulator of a benchmark's official tasks: scripted (offline, deterministic) or an LLM role.

An official task gives its user only its benchmark's natural-language instructions (why
they call, what they know, how to behave), not the structured scenario of a
synthesized task. The scripted ``OfficialUser`` reads them as a customer would
in first person: it opens with its reason for calling and what it knows, and
otherwise behaves as the embedded ``ReactiveUser`` (answers a request for its
id, confirms a described change only when it names every id of one of the
changes it wants, accepts a refusal, ends the call after a closing message).
What it wants changed is the task's state-changing gold actions: the user's
side of the task, never shown to the agent.

The LLM user is ``evosyn.agents.user.LLMUser`` reading the same instructions
(``user_scenario_text``, our own prompt in ``agents/prompts/user.md``), with the
domain's user tools as tool calls where it has them (a phone the user holds); each
trial asks its model afresh (``TrialClient``), so k trials are k samples and a
rerun of the same trial replays the response cache.
"""
from __future__ import annotations

import re
from typing import Any

from evosyn.envs.base import Domain, EnvTask
from evosyn.storage.records import Message

# second person -> first person, longest forms first; deterministic, and good enough for a customer's lines
_OBJECT = (r"\b(to|for|with|thank|thanks|give|gives|send|sends|tell|tells|help|ask|asks|let|offer|offers|contact|"
           r"call) you\b")
_PERSON = [(r"\byou are\b", "I am"), (r"\byou're\b", "I'm"), (r"\byou've\b", "I've"), (r"\byou'd\b", "I'd"),
           (r"\byou'll\b", "I'll"), (r"\byou were\b", "I was"), (r"\byourself\b", "myself"),
           (r"\byours\b", "mine"), (r"\byour\b", "my"), (r"\byou\b", "I")]


def _cased(found: re.Match, repl: str) -> str:
    return repl if repl.startswith("I") or not found.group(0)[0].isupper() else repl.capitalize()


def first_person(text: str) -> str:
    """tau2's instructions ("You want to cancel your trip") as the customer says them ("I want to cancel my trip")."""
    out = re.sub(_OBJECT, lambda m: f"{m.group(1)} me", " ".join((text or "").split()), flags=re.IGNORECASE)
    for pattern, repl in _PERSON:
        out = re.sub(pattern, lambda m, r=repl: _cased(m, r), out, flags=re.IGNORECASE)
    return out


def official_scenario(domain: Domain, task: EnvTask) -> dict[str, Any]:
    """The ``ReactiveUser`` scenario of an official task: its identity line and the changes it wants."""
    ins = task.scenario.parts()
    actions = task.gold_actions
    wants = [{"say": a.name.replace("_", " "), "tool": a.name, "arguments": dict(a.arguments)}
             for a in actions if a.requestor == "assistant" and domain.tool_kind(a.name) == "write"]
    user_id = next((str(a.arguments["user_id"]) for a in actions if "user_id" in a.arguments), "")
    known = first_person(ins.get("known_info", ""))
    return {"user_id": user_id, "challenges": [], "intents": wants, "identity": known or None,
            "opening": first_person(ins.get("reason_for_call", ""))}


def scripted_user(domain: Domain, task: EnvTask):
    """An ``OfficialUser`` for ``task`` in ``domain`` (its pack's phrasing, its device tools)."""
    from evosyn.agents.user import ReactiveUser

    class OfficialUser(ReactiveUser):
        def opening(self) -> Message:
            parts = [self.s["opening"]] + ([self.s["identity"]] if self.s.get("identity") else [])
            return Message(role="user", content=" ".join(p for p in parts if p) or "Hello.", requestor="user")

    return OfficialUser(official_scenario(domain, task), domain.pack.phrasing,
                        device_tools=[t.name for t in domain.tools("user")])


class TrialClient:
    """A user client whose requests in trial ``trial`` are their own cache entries.

    The client's cache keys a request by its messages and its ``attempt``; trial t
    asks with ``attempt + t * stride`` (``stride``: more than the user's re-asks), so
    trial 2 is not a replay of trial 1, and trial 2 run again replays trial 2.
    """

    def __init__(self, client: Any, trial: int, stride: int):
        self.client, self.trial, self.stride = client, trial, stride

    @property
    def endpoint(self) -> str:
        return self.client.endpoint

    def chat_sync(self, messages: list[dict], attempt: int = 0, **kw: Any):
        return self.client.chat_sync(messages, attempt=attempt + self.trial * self.stride, **kw)


def llm_user(client: Any, task: EnvTask, trial: int = 0, retries: int = 2, domain: Domain | None = None):
    """An ``LLMUser`` playing ``task``'s instructions through ``client`` (trial ``trial``), with ``domain``'s
    user tools (its device, in a dual-control domain) when given."""
    from evosyn.agents.user import LLMUser, user_scenario_text

    tools = [t.openai_schema() for t in domain.tools("user")] if domain is not None else []
    return LLMUser(TrialClient(client, trial, retries + 1), user_scenario_text(task.scenario), retries, tools=tools)
