"""A scripted agent with a planted weakness, served on 127.0.0.1 like a user's own model (``learner: served``).

The policy it plays is the embedded teacher's solution of the task at hand, replayed turn by turn, except that it
never makes a second write in a conversation: once one write has been carried out, where the teacher would go on
to another write (its confirmation request or its call), the agent closes the conversation instead ("Everything you
asked for is taken care of."). The user then says goodbye and the state lacks every write after the first.

Why the weakness is what it is by construction:

- the replay alone solves every task (the teacher's trajectory is what the verifier's gold is; its assistant turns,
  answered by the reactive user of an evaluation, reach the same state and say the same things: the test measures
  it over real HTTP), so without the weakness the agent fails nothing;
- with it, a task fails exactly when its solution has two or more writes: the observed property ``num_write`` in
  buckets ``2``, ``3-4``, ``5+`` fails, ``0`` and ``1`` pass. No other property is the cause; others fail only as
  far as they go together with write counts. The rule reads the conversation alone (which calls so far wrote).

How it knows the task: it is an oracle, not an agent. It indexes every synthesized task in the benchmark's store
by the customer's opening message (the reactive user opens with the same words for the same scenario), rereading
the store's ``tasks`` table when a conversation opens with words it has not indexed (a run writes a round's tasks
before it evaluates them). Two tasks with one opening are told apart by the tool results seen so far. A
conversation it cannot place is answered "Goodbye." and counted (``misses`` in ``GET /stats``), so a benchmark can
say that none was. It is deterministic (no sampling; the seed of its config names nothing it draws): the same
conversation always gets the same reply.

Served by ``evosyn.benchmarks.fake_llm_server.FakeLLMServer`` (the project's scripted OpenAI-compatible server):
``ServedAgent(store, env)`` is its responder.
"""
from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

from evosyn.agents.teacher import EmbeddedTeacher
from evosyn.agents.user import ReactiveUser
from evosyn.benchmarks.fake_llm_server import FakeLLMServer, Request, openai_reply
from evosyn.storage.records import Message, SynthTask

if TYPE_CHECKING:
    from evosyn.envs.base import Domain
    from evosyn.storage.store import Store

CLOSING = "Everything you asked for is taken care of."
PROPERTY = "num_write"  # the observed property behind the weakness
WEAK_BUCKETS = ("2", "3-4", "5+")  # its buckets that fail: two or more writes


class GoldIndex:
    """Every task of the store by its opening (the reactive user's first message), read again on a miss."""

    def __init__(self, store: Store, env: Domain):
        self.store, self.env = store, env
        self.teacher = EmbeddedTeacher(env)
        self.by_opening: dict[str, dict[str, SynthTask]] = {}  # opening -> task id -> task
        self.solutions: dict[str, list[Message]] = {}  # task id -> the teacher's messages
        self.read: set[str] = set()  # the table files indexed so far
        self.lock = threading.Lock()

    def refresh(self) -> None:
        import pyarrow.parquet as pq
        from evosyn.storage.arrow import from_rows

        for path in self.store.files("tasks"):
            if str(path) in self.read:
                continue
            # a chunk file is written once, atomically (temp file, then rename): a file seen is complete
            for task in from_rows(pq.read_table(path).to_pylist(), SynthTask):
                opening = ReactiveUser(task.scenario, self.env.pack.phrasing).opening().content or ""
                self.by_opening.setdefault(opening, {}).setdefault(task.task_id, task)
            self.read.add(str(path))

    def candidates(self, opening: str) -> list[SynthTask]:
        with self.lock:
            if opening not in self.by_opening:
                self.refresh()
            return list(self.by_opening.get(opening, {}).values())

    def solution(self, task: SynthTask) -> list[Message]:
        with self.lock:
            if task.task_id not in self.solutions:
                self.solutions[task.task_id] = self.teacher.rollout(task).messages
            return self.solutions[task.task_id]


def _tool_results(messages: list[dict[str, Any]]) -> list[str]:
    return [m.get("content") or "" for m in messages if m.get("role") == "tool"]


class ServedAgent:
    """The responder: the teacher's next turn for the conversation, or the closing where it would write again.

    ``max_writes``: the writes it carries out in one conversation (None: no weakness, the plain replay)."""

    def __init__(self, store: Store, env: Domain, max_writes: int | None = 1):
        self.env, self.max_writes = env, max_writes
        self.index = GoldIndex(store, env)
        self.misses = self.closed = 0
        self.lock = threading.Lock()

    def _writes(self, calls: list[str]) -> int:
        return sum(self.env.tool_kind(name) == "write" for name in calls)

    def _solution(self, messages: list[dict[str, Any]]) -> list[Message] | None:
        opening = next((m.get("content") or "" for m in messages if m.get("role") == "user"), None)
        found = self.index.candidates(opening) if opening is not None else []
        seen = _tool_results(messages)
        for task in found:  # one opening, several tasks: the one whose tool results so far are these
            gold = self.index.solution(task)
            if [m.content or "" for m in gold if m.role == "tool"][:len(seen)] == seen:
                return gold
        return None

    def move(self, messages: list[dict[str, Any]]) -> Message:
        """The next assistant message for an OpenAI-format conversation."""
        gold = self._solution(messages)
        if gold is None:
            with self.lock:
                self.misses += 1
            return Message(role="assistant", content="Goodbye.")
        turns = [m for m in gold if m.role == "assistant"]
        k = sum(m.get("role") == "assistant" for m in messages)
        made = [c["function"]["name"] for m in messages if m.get("role") == "assistant"
                for c in m.get("tool_calls") or []]
        ahead = [c.name for m in turns[k:] for c in m.tool_calls or [] if c.requestor == "assistant"]
        if self.max_writes is not None and self._writes(made) >= self.max_writes and self._writes(ahead):
            with self.lock:
                self.closed += 1
            return Message(role="assistant", content=CLOSING)
        return turns[k] if k < len(turns) else Message(role="assistant", content="Goodbye.")

    def __call__(self, request: Request) -> dict[str, Any]:
        body = request.body
        reply = self.move(body.get("messages") or [])
        call = reply.tool_calls[0] if reply.tool_calls else None  # the teacher makes one call a turn
        return openai_reply(reply.content, {"id": call.id, "name": call.name, "arguments": json.dumps(call.arguments)}
                            if call else None, model=body.get("model", "served-agent"))

    def stats(self) -> dict[str, int]:
        with self.lock:
            return {"misses": self.misses, "closed_before_a_write": self.closed}


def serve(store: Store, env: Domain, max_writes: int | None = 1) -> tuple[FakeLLMServer, ServedAgent]:
    """The agent behind a started server on 127.0.0.1 (stop it with ``server.stop()``)."""
    agent = ServedAgent(store, env, max_writes)
    return FakeLLMServer(agent, keep_requests=False).start(), agent
