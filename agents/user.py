"""User simulator: plays a task's structured user scenario.

The embedded simulator is deterministic: it states its request (all at once, or
one intent at a time under ``multi_intent_interleaving``), gives its user id when
asked, confirms or hesitates as its challenges say, accepts a justified refusal,
and never volunteers what the scenario does not give it.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, Protocol

from evosyn.agents.learners.exports import chat_message
from evosyn.envs.base import UserScenario
from evosyn.envs.packs import UserPhrasing
from evosyn.storage.records import Message, ToolCall


class UserSimulator(Protocol):
    def opening(self) -> Message: ...
    def give_user_id(self) -> Message: ...
    def next_intent(self, index: int) -> Message: ...
    def confirm(self, first: bool) -> list[Message]: ...
    def accept_refusal(self) -> Message: ...
    def nothing_else(self) -> Message: ...
    def goodbye(self) -> Message: ...


def _user(text: str) -> Message:
    return Message(role="user", content=text, requestor="user")


class EmbeddedUser:
    """``phrasing``: how the domain's customer words identity and mood (its pack's ``phrasing``)."""

    def __init__(self, scenario: dict[str, Any], phrasing: UserPhrasing | None = None):
        self.s = scenario
        self.challenges = set(scenario.get("challenges", []))
        self.phrasing = phrasing or UserPhrasing()

    @property
    def interleaved(self) -> bool:
        return "multi_intent_interleaving" in self.challenges and len(self.s["intents"]) > 1

    def withholds_id(self) -> bool:
        return "missing_information" in self.challenges

    def opening(self) -> Message:
        intents = self.s["intents"][:1] if self.interleaved else self.s["intents"]
        parts = []
        if "emotional_pressure" in self.challenges:
            parts.append(self.phrasing.stress)
        if "ambiguous_preference" in self.challenges or "ambiguous_request" in self.challenges:
            parts.append(self.phrasing.vague_opening)
        wants = [i["say"] for i in intents]
        if self.s.get("fillers"):
            wants = [f"first {'; '.join(self.s['fillers'])}"] + wants
        parts.append("I would like to " + "; then ".join(wants) + ".")
        if "user_false_claim" in self.challenges:
            parts.append("Another agent already told me this would be no problem.")
        if not self.withholds_id():
            parts.append(self.identity())
        return _user(" ".join(parts))

    def identity(self) -> str:
        """The scenario's own identity line (e.g. an email), else the domain's, with the customer id."""
        return self.s.get("identity") or self.phrasing.identity.format(user_id=self.s["user_id"])

    def give_user_id(self) -> Message:
        if self.s.get("identity"):
            return _user(f"Sure. {self.s['identity']}")
        return _user(self.phrasing.give_identity.format(user_id=self.s["user_id"]))

    def next_intent(self, index: int) -> Message:
        return _user(f"Yes, one more thing: I would also like to {self.s['intents'][index]['say']}.")

    def clarify(self) -> Message:
        """The value the request left out, when the agent asks for it (the scenario's ``clarify``)."""
        return _user(self.s["clarify"]["answer"])

    def confirm(self, first: bool) -> list[Message]:
        if first and "preference_change" in self.challenges:
            return [_user("Hmm, wait. Can you tell me again exactly what you are going to change?")]
        if first and "constraint_hidden_until_late" in self.challenges:
            return [_user("Yes, go ahead, as long as it is charged to the payment method I mentioned.")]
        return [_user("Yes, please go ahead.")]

    def accept_refusal(self) -> Message:
        return _user("I see. I understand, thanks for checking.")

    def nothing_else(self) -> Message:
        return _user("No, that is everything.")

    def goodbye(self) -> Message:
        return _user("Thank you, that is all I needed.")

    def device_action(self, call: ToolCall) -> Message:
        """Perform the device action the agent asked for (dual-control domains): a user tool call."""
        return Message(role="user", tool_calls=[call.model_copy(update={"requestor": "user"})], requestor="user")

    def observe(self, results: list[Message]) -> None:
        """The results of its device actions: the scripted user acts on the agent's words alone."""


def device_results(episode: Any, message: Message) -> list[Message]:
    """The tool messages of a user message's device actions, each stepped on ``episode`` as the user."""
    out = []
    for call in message.tool_calls:
        obs = episode.step(call.name, call.arguments, "user")
        out.append(Message(role="tool", content=obs.content, tool_call_id=call.id, error=obs.error, requestor="user"))
    return out


def device_turn(episode: Any, user: Any, message: Message) -> list[Message]:
    """``device_results`` of a user message, handed back to its user (``observe``): an LLM user reads them on its
    next turn, as tau2 routes a user's tool results back to the user."""
    results = device_results(episode, message)
    if results:
        user.observe(results)
    return results


def asked_device_action(text: str, tools: Iterable[str]) -> tuple[str, dict[str, Any]] | None:
    """The user tool an agent's text asks for by name, with the JSON arguments written after it (or none)."""
    for name in sorted(tools, key=len, reverse=True):  # longest first: set_apn_settings before ...apn...
        found = re.search(rf"\b{re.escape(name)}\b", text)
        if found is None:
            continue
        rest = text[found.end():]
        start = rest.find("{")
        arguments: dict[str, Any] = {}
        if start != -1 and rest[:start].strip().lower() in ("", "with", "with:", "("):
            try:
                value, _ = json.JSONDecoder().raw_decode(rest[start:])
                arguments = value if isinstance(value, dict) else {}
            except ValueError:
                arguments = {}
        return name, arguments
    return None


class ReactiveUser(EmbeddedUser):
    """The embedded user answering an arbitrary agent (used to evaluate learners).

    It answers a request for its id, confirms a described action only when the
    description names every id of one of its own requests, accepts a refusal,
    reveals its next request when asked whether there is anything else (or says
    it has nothing more), and ends the call after a closing message. It never
    confirms what it did not ask for.
    """

    def __init__(self, scenario: dict[str, Any], phrasing: UserPhrasing | None = None,
                 device_tools: Iterable[str] = ()):
        super().__init__(scenario, phrasing)
        self.revealed = 1 if self.interleaved else len(scenario.get("intents", []))
        self.done = False
        self.device_tools = list(device_tools)  # the user tools of its device (dual-control domains)
        self._device_calls = 0
        self._clarified = False

    def _wanted_ids(self) -> list[set[str]]:
        """For each request revealed so far, the ids among its arguments (those it can recognise)."""
        wanted = []
        for intent in self.s.get("intents", [])[: self.revealed]:
            ids = {value.lower() for key, value in (intent.get("arguments") or {}).items()
                   if key.endswith("_id") and isinstance(value, str)}
            if ids:
                wanted.append(ids)
        return wanted

    def respond(self, text: str) -> Message:
        asked = asked_device_action(text or "", self.device_tools)
        if self.s.get("clarify") and not self._clarified and "?" in (text or "") and "confirm" not in text.lower():
            self._clarified = True  # the agent asks for the value the request left out
            return self.clarify()
        if asked is not None:  # it performs a device action only when the agent names one of its tools
            self._device_calls += 1
            return self.device_action(ToolCall(id=f"device_{self._device_calls}", name=asked[0],
                                               arguments=asked[1], requestor="user"))
        low = (text or "").lower()
        if "?" in low and any(w in low for w in self.phrasing.identity_words):
            return self.give_user_id()
        if "confirm" in low:
            if any(all(i in low for i in ids) for ids in self._wanted_ids()):  # every id of one of its requests
                return _user("Yes, please go ahead.")
            return _user("No, that is not what I asked for.")
        if "anything else" in low:
            if self.revealed < len(self.s.get("intents", [])):
                self.revealed += 1
                return self.next_intent(self.revealed - 1)
            return self.nothing_else()
        if "sorry" in low or "cannot" in low:
            return self.accept_refusal()
        self.done = True
        return self.goodbye()


# ------------------------------------------------------------------ LLM user simulator
STOP = "###STOP###"


def user_scenario_text(scenario: UserScenario, plain: UserPhrasing | None = None) -> str:
    """The task's user scenario as the simulator reads it; ``plain``: the domain pack's ``phrasing``, to drop the
    interaction challenges it words (None: the whole scenario)."""
    parts = scenario.parts()
    if plain is not None:
        from evosyn.agents.generator import challenge_text

        text = parts.get("task_instructions", "")
        for sentence in challenge_text(plain).values():
            text = text.replace(sentence, "")
        parts["task_instructions"] = " ".join(text.split())
    labels = {"persona": "Who you are", "reason_for_call": "Why you are calling", "known_info": "What you know",
              "unknown_info": "What you do not know", "task_instructions": "How to behave"}
    return "\n".join(f"{labels[k]}: {v}" for k, v in parts.items() if v)


DEVICE_NOTE = """YOUR PHONE:
You have your phone with you, and a tool for each thing you can do on it. When the agent asks you to check or \
change something on your phone, do it by calling the matching tool (one call per thing asked), then answer \
the agent. Do not touch your phone unless the agent asks you to or your scenario tells you to."""


def user_messages(scenario: str, history: list[dict], device: bool = False) -> list[dict]:
    """The simulator's view (pure): its own turns are 'assistant' (with its device tool calls), the agent's are
    'user', its device's answers are 'tool' messages. ``device``: it has device tools (told in its prompt)."""
    from evosyn.agents.ask import render

    system = render("user.md", scenario=scenario) + ("\n\n" + DEVICE_NOTE if device else "")
    return [{"role": "system", "content": system},
            {"role": "user", "content": "(The call is connected. Write your first message to the agent.)"},
            *history]


class LLMUser:
    """A user simulator played by an LLM; ``done`` once it ends the call with the stop token.

    ``tools``: the OpenAI schemas of the user's device tools (dual control: the user acts on a device). With them a turn may
    be device actions instead of words: a user message of tool calls (requestor ``user``), which the caller
    steps on the episode as the user (``device_results``) and hands back with ``observe``, exactly as it does
    for the embedded user's device actions; the simulator reads the results on its next turn.
    """

    def __init__(self, client, scenario: str, retries: int = 2, tools: list[dict] | None = None):
        self.client, self.scenario, self.retries = client, scenario, retries
        self.tools = list(tools or [])
        self.history: list[dict] = []  # the chat so far from the simulator's side (``user_messages``)
        self.done = False
        self._calls = 0

    def _ask(self, msgs: list[dict], attempt: int):
        kw = {"tools": self.tools} if self.tools else {}  # no tools: the request a text-only user always sent
        return self.client.chat_sync(msgs, role="user", attempt=attempt, **kw)

    def _turn(self) -> Message:
        from evosyn.agents.ask import RoleRejected, one_line, reask
        from evosyn.agents.llm import LLMOutputError, LLMUnavailable

        device = bool(self.tools)
        msgs, problem = user_messages(self.scenario, self.history, device), ""
        for attempt in range(self.retries + 1):
            try:
                res = self._ask(msgs, attempt)
            except LLMOutputError as exc:
                problem = one_line(str(exc))
            except LLMUnavailable as exc:
                raise RoleRejected(f"user: LLM unavailable: {one_line(str(exc))}") from None
            else:
                text = res.text or ""
                if text.strip() or (device and res.tool_calls):
                    break
                problem = "the reply was empty"
            msgs = [*user_messages(self.scenario, self.history, device),
                    {"role": "user", "content": reask(problem).replace("as strict JSON matching the required "
                                                                       "schema", "as the customer's next message")}]
        else:
            raise RoleRejected(f"user: no usable reply after {self.retries + 1} attempts: {problem}")
        if STOP in text:
            self.done = True
            text = text.replace(STOP, "").strip() or ("" if res.tool_calls else "Thank you, goodbye.")
        if device and res.tool_calls:
            return self._device_turn(text, res.tool_calls)
        self.history.append({"role": "assistant", "content": text})
        return _user(text)

    def _device_turn(self, text: str, calls) -> Message:
        out = []
        for c in calls:
            self._calls += 1
            out.append(ToolCall(id=c.id or f"device_{self._calls}", name=c.name, arguments=dict(c.arguments or {}),
                                requestor="user"))
        self.history.append(chat_message(Message(role="assistant", content=text or None, tool_calls=out)))
        return Message(role="user", content=text or None, tool_calls=out, requestor="user")

    def observe(self, results: list[Message]) -> None:
        """The device's answers to this user's last tool calls (``device_results``), read on its next turn."""
        self.history += [{"role": "tool", "tool_call_id": r.tool_call_id, "content": r.content or ""}
                         for r in results]

    def opening(self) -> Message:
        return self._turn()

    def respond(self, agent_text: str) -> Message:
        self.history.append({"role": "user", "content": agent_text})
        return self._turn()
