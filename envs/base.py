"""The environment interface every domain implements.

A ``Domain`` is loaded once per process (tools, policy, DB, official tasks);
``Domain.episode()`` gives a fresh, cheap copy of the initial state to act in.
``Episode.step`` never raises for a tool error: the error comes back as an
``Observation`` flagged ``error=True``.
"""
from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Literal

from envs.task_sets import TaskSet

if TYPE_CHECKING:
    from envs.packs import DomainPack

ToolKind = Literal["read", "write", "generic"]
Requestor = Literal["assistant", "user"]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    kind: ToolKind
    requestor: Requestor
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments

    def openai_schema(self) -> dict[str, Any]:
        return {"type": "function", "function": {
            "name": self.name, "description": self.description, "parameters": self.parameters}}


@dataclass(frozen=True)
class Observation:
    content: str
    error: bool = False


@dataclass
class EnvSummary:
    """A compact description of a domain for prompts and `evosyn envs show`."""

    domain: str
    entity_counts: dict[str, int]
    example_ids: dict[str, list[str]]
    tools: dict[str, ToolKind] = field(default_factory=dict)


class Episode(ABC):
    """One interaction with a fresh copy of a domain's initial state."""

    @abstractmethod
    def step(self, name: str, arguments: dict[str, Any], requestor: Requestor = "assistant") -> Observation:
        ...

    @abstractmethod
    def state_digest(self) -> str:
        """A hash of the full state (agent and user DB); equal iff the states are equal."""

    @abstractmethod
    def check_assertion(self, assertion: Any) -> bool:
        """Evaluate one tau2 ``EnvAssertion`` on the current state."""

    @contextmanager
    def reading(self) -> Iterator[None]:
        """A block that only reads the state (policy checks): an episode may skip copying what it reads."""
        yield


TOOL_KINDS: tuple[ToolKind, ...] = ("read", "write", "generic")


class Domain(ABC):
    """What the core calls on an environment; a pack's ``environment()`` returns one (envs/packs.py).

    Subclass it directly for an environment of your own (``evosyn new-domain`` writes one), or use a family's
    adapter (``envs.tau2.domain.Tau2Domain``). Tool kinds matter: a ``write`` tool changes the state (the
    verifier counts it, the policy is checked before it), a ``read`` tool only looks, ``generic`` is neither
    (a calculator, a hand-off).
    """

    name: str  # the domain's name, as the pack registers it
    policy: str  # the policy text the agent is given (its system prompt)
    # Names the form of ``Episode.state_digest`` (and the base DB it is taken over), so a digest stored
    # with a task is only used by a domain that computes the same one; "" means digests are never stored.
    digest_scheme: str = ""

    @property
    def pack(self) -> DomainPack:
        """The pack this environment belongs to: its hooks travel with the environment, so nothing below the
        place that resolved the domain's name (``envs.packs.get_domain``, which sets it) looks the name up again."""
        found = self.__dict__.get("_pack")
        if found is None:  # an environment built outside the registry (a test, a copy): its pack, found once
            from envs.packs import get_pack

            found = self._pack = get_pack(self.name)
        return found

    @abstractmethod
    def tools(self, requestor: Requestor | None = None) -> list[ToolSpec]: ...

    def tool(self, name: str, requestor: Requestor = "assistant") -> ToolSpec | None:
        for spec in self.tools(requestor):
            if spec.name == name:
                return spec
        return None

    def tool_kind(self, name: str, requestor: Requestor = "assistant") -> ToolKind | None:
        """The kind of tool ``name`` of ``requestor`` (None: no such tool). Asked by the verifier, the generator,
        the policy checks and the teacher for every call: an environment with many tools may index them."""
        spec = self.tool(name, requestor)
        return spec.kind if spec is not None else None

    @abstractmethod
    def validate_arguments(self, name: str, arguments: dict[str, Any],
                           requestor: Requestor = "assistant") -> str | None:
        """None if the call is well-formed, else the reason it is not."""

    @abstractmethod
    def episode(self, initial_state: Any = None) -> Episode:
        """A fresh copy of the initial state to act in; ``initial_state``: a task's tau2 ``InitialState`` (None
        for most tasks) applied first."""

    @abstractmethod
    def tasks(self, split: str | None = None) -> list[Any]:
        """Official tau2 ``Task`` objects of a split (None: all); ``[]`` for a domain with none (its runs test
        on the uniform set only). Raises ``KeyError`` naming the known splits for an unknown one."""

    def official_task(self, task_id: str) -> Any | None:
        return next((t for t in self.tasks(None) if t.id == task_id), None)

    @abstractmethod
    def splits(self) -> dict[str, int]:
        """Split name -> number of official tasks (``{}``: none)."""

    def task_set(self) -> TaskSet:
        """Which official tasks ``tasks`` serves, named with every score (a family names its files and their
        digests; this default names the family's module and digests the tasks' canonical JSON)."""
        blob = json.dumps([t.model_dump(mode="json") if hasattr(t, "model_dump") else repr(t)
                           for t in self.tasks(None)], sort_keys=True, default=str)
        return TaskSet(domain=self.name, source=f"module {type(self).__module__}",
                       tasks_sha256=hashlib.sha256(blob.encode()).hexdigest())

    def with_tasks(self, path: Path) -> Domain:
        """This environment with its official tasks read from the folder ``path`` (a newer task release)."""
        raise ValueError(f"{self.name}: this environment family cannot read its official tasks from a folder")

    @abstractmethod
    def summary(self) -> EnvSummary:
        """Entity counts and example ids of the initial state, and the assistant's tools by kind."""
