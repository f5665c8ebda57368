"""The environment interface every domain implements.

A ``Domain`` is loaded once per process (tools, policy, DB, official tasks);
``Domain.episode()`` gives a fresh, cheap copy of the initial state to act in.
``Episode.step`` never raises for a tool error: the error comes back as an
``Observation`` flagged ``error=True``.

A task is its environment family's own object (tau2's ``Task``, a CAR-bench task
row) behind ``EnvTask``: what the core reads of a task (its initial state, the
user's side, the gold actions, what the reward is based on, the final-state
assertions the verifier runs) is declared here and nothing else. A family turns
its stored JSON into an ``EnvTask`` (``Domain.task_from_json``) and a generator's
family-free ``TaskDraft`` into one of its own tasks (``Domain.make_task``); the
store keeps every family's task as the JSON ``EnvTask.to_json`` gives.
"""
from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Literal

from evosyn.envs.task_sets import TaskSet

if TYPE_CHECKING:
    from evosyn.envs.packs import DomainPack
    from evosyn.storage.records import Message

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

    @contextmanager
    def reading(self) -> Iterator[None]:
        """A block that only reads the state (policy checks): an episode may skip copying what it reads."""
        yield


TOOL_KINDS: tuple[ToolKind, ...] = ("read", "write", "generic")


# ------------------------------------------------------------------ tasks
@dataclass(frozen=True)
class GoldAction:
    """One tool call of a task's reference solution."""

    name: str
    arguments: dict[str, Any]
    requestor: Requestor = "assistant"  # "user": a device action the user performs (dual-control)
    compare_args: tuple[str, ...] | None = None  # the arguments a performed call must match; None: all it passes
    action_id: str = ""

    def matches(self, name: str, arguments: dict[str, Any]) -> bool:
        """Whether a performed call is this action: the same tool, equal compared arguments (tau2's rule,
        which CAR-bench's action check shares)."""
        if self.name != name:
            return False
        keys = arguments.keys() if self.compare_args is None else self.compare_args
        if len(keys) == 0:
            return True
        return ({k: v for k, v in arguments.items() if k in keys}
                == {k: v for k, v in self.arguments.items() if k in keys})


@dataclass(frozen=True)
class UserScenario:
    """What the simulated user is told, in named parts ('' when a family's task has no such part)."""

    reason_for_call: str = ""  # why the user calls: the request, or the whole instruction of a one-text task
    known_info: str = ""
    unknown_info: str = ""
    task_instructions: str = ""  # how to behave
    persona: str = ""
    domain: str = ""  # the domain the scenario was written for

    def parts(self) -> dict[str, str]:
        """The non-empty parts a user simulator reads, in a fixed order."""
        keys = ("persona", "reason_for_call", "known_info", "unknown_info", "task_instructions")
        return {k: getattr(self, k) for k in keys if getattr(self, k)}


# The reward components the verifier computes for every family (``envs/verify.py``); a task's
# ``reward_basis`` names those its reward depends on, and a family may name its own beside them.
REWARD_COMPONENTS = ("DB", "ENV_ASSERTION", "ACTION", "COMMUNICATE")


@dataclass
class TaskDraft:
    """A task as a generator describes it, before its family makes it its own (``Domain.make_task``).

    ``initial_state`` and ``assertions`` are in the family's own form (the pack that plans the task
    knows its family); ``extra``: further fields of the family's task (a CAR-bench task type, a persona)."""

    id: str
    scenario: UserScenario
    actions: list[GoldAction]
    communicate_info: list[str] = field(default_factory=list)
    reward_basis: list[str] = field(default_factory=lambda: ["DB", "COMMUNICATE"])
    purpose: str = ""
    relevant_policies: str = ""
    notes: str = ""
    ticket: str = ""
    initial_state: Any = None
    assertions: list[Any] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


class EnvTask(ABC):
    """A task of one environment family, as the core reads it: the family's own object, or a wrapper of it.

    ``id`` (an attribute or a property: not declared here, so a pydantic task model can be one) names the task.
    """

    @property
    @abstractmethod
    def initial_state(self) -> Any:
        """What ``Domain.episode`` takes to start this task (None: the environment's initial state)."""

    @property
    @abstractmethod
    def scenario(self) -> UserScenario: ...

    @property
    @abstractmethod
    def gold_actions(self) -> list[GoldAction]: ...

    @property
    @abstractmethod
    def communicate_info(self) -> list[str]:
        """What the agent must tell the user (each a substring its messages must contain)."""

    @property
    @abstractmethod
    def reward_basis(self) -> frozenset[str]:
        """The components the reward depends on (``REWARD_COMPONENTS`` and the family's own)."""

    @property
    @abstractmethod
    def evaluated(self) -> bool:
        """Whether the task has evaluation criteria at all (a task without them always gets reward 1)."""

    @property
    @abstractmethod
    def state_checked(self) -> bool:
        """Whether the final state is compared with the gold replay's (the task states gold actions or
        assertions, even empty ones)."""

    @property
    def purpose(self) -> str:
        return ""

    @property
    def setup(self) -> list[tuple[str, str, dict[str, Any]]]:
        """How the initial state is prepared beyond the environment's, one (side, function, arguments) a
        step, for display."""
        return []

    @abstractmethod
    def failed_assertions(self, episode: Episode) -> list[str]:
        """The name of each final-state assertion of the task that does not hold in ``episode``."""

    @abstractmethod
    def to_json(self) -> dict[str, Any]:
        """The task in its family's own JSON form: what the store keeps and ``Domain.task_from_json`` reads."""

    def key(self) -> str:
        """A content hash: equal iff the tasks are equal."""
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True).encode()).hexdigest()

    def reward(self, passed: Mapping[str, bool]) -> float:
        """The reward from the verifier's components: 1 when every one of the basis holds, else 0 (tau2's
        rule); a family whose reward counts failures (CAR-bench) overrides it."""
        return 0.0 if any(not passed[b] for b in self.reward_basis if b in passed) else 1.0


class Domain(ABC):
    """What the core calls on an environment; a pack's ``environment()`` returns one (envs/packs.py).

    Subclass it directly for an environment of your own (``evosyn new-domain`` writes one), or use a family's
    adapter (``evosyn.envs.tau2.domain.Tau2Domain``). Tool kinds matter: a ``write`` tool changes the state (the
    verifier counts it, the policy is checked before it), a ``read`` tool only looks, ``generic`` is neither
    (a calculator, a hand-off).
    """

    name: str  # the domain's name, as the pack registers it
    policy: str  # the policy text the agent is given (its system prompt)
    # Names the form of ``Episode.state_digest`` (and the base DB it is taken over), so a digest stored
    # with a task is only used by a domain that computes the same one; "" means digests are never stored.
    digest_scheme: str = ""
    # Which data the environment reads when it is not its default (a folder: the run config's ``env_data``):
    # the fixed test sets built on it are named with it, so runs on two data folders never share one.
    data_source: str = ""
    # The official split a command takes when none is named: ``default_split`` is checked (``verify --official``,
    # ``bench verify``: tau2's ``base``, every task), ``evaluation_split`` is scored (``evaluate --official``: the
    # held-out one). A family whose splits are named otherwise sets its own (both must be keys of ``splits()``).
    default_split: str = "base"
    evaluation_split: str = "test"
    # The benchmark whose own reward rule ``reward`` computes (tau2's, CAR-bench's): named beside a verdict's reward
    # (`verify`, `show`). "" for a domain of one's own: its verdict is its checks, and no benchmark reward is printed.
    benchmark: str = ""

    @property
    def pack(self) -> DomainPack:
        """The pack this environment belongs to: its hooks travel with the environment, so nothing below the
        place that resolved the domain's name (``evosyn.envs.packs.get_domain``, which sets it) looks the name up again."""
        found = self.__dict__.get("_pack")
        if found is None:  # built outside the registry: looking its name up here would hide where it came from
            raise RuntimeError(f"environment {self.name!r} is bound to no pack: build it through the registry "
                               "(evosyn.envs.packs.get_domain) or bind it (env.bind_pack(pack))")
        return found

    def bind_pack(self, pack: DomainPack) -> None:
        """Bind this environment to the pack that built it, so ``pack`` is never looked up by name."""
        self._pack = pack

    def __reduce__(self) -> tuple:
        # another process (a `task_runner: dask` worker) gets the environment from its own registry, by name
        from evosyn.envs.packs import pickled

        return pickled(self)

    def __copy__(self) -> "Domain":  # a copy in this process is a plain shallow one (pickling goes by name)
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        return new

    @abstractmethod
    def tools(self, requestor: Requestor | None = None) -> list[ToolSpec]: ...

    def tools_for(self, task: EnvTask | None) -> list[ToolSpec]:
        """The assistant's tools an agent is given on ``task``: all of them here; a family whose tasks take
        tools away (CAR-bench's hallucination tasks) overrides it."""
        return self.tools("assistant")

    def task_policy(self, task: EnvTask | None) -> str:
        """The policy an agent is given on ``task`` (its system prompt): ``policy`` here; a family whose policy
        carries the task's context (CAR-bench: the car's location and clock) overrides it."""
        return self.policy

    @property
    def task_context(self) -> bool:
        """Whether an agent's tools or policy depend on the task (the family overrides ``tools_for`` or
        ``task_policy``): callers serving many tasks read the domain's once otherwise."""
        cls = type(self)
        return cls.tools_for is not Domain.tools_for or cls.task_policy is not Domain.task_policy

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
        """A fresh copy of the initial state to act in; ``initial_state``: a task's ``EnvTask.initial_state``
        (None for most tau2 tasks) applied first."""

    @abstractmethod
    def tasks(self, split: str | None = None) -> list[EnvTask]:
        """The benchmark's official tasks of a split (None: all); ``[]`` for a domain with none (its runs test
        on the uniform set only). Raises ``KeyError`` naming the known splits for an unknown one."""

    def official_task(self, task_id: str) -> EnvTask | None:
        return next((t for t in self.tasks(None) if t.id == task_id), None)

    @abstractmethod
    def task_from_json(self, data: dict[str, Any]) -> EnvTask:
        """A stored task (``EnvTask.to_json``) as this family's task; raises ``ValueError`` when it is not one."""

    @abstractmethod
    def make_task(self, draft: TaskDraft) -> EnvTask:
        """A generator's draft as this family's task; raises ``ValueError`` when the family cannot hold it."""

    def reward(self, task: EnvTask, messages: list[Message], passed: Mapping[str, bool]) -> float:
        """The reward of a trajectory whose recorded observations replay, given the verifier's components
        (``REWARD_COMPONENTS``): the task's own rule over them (``EnvTask.reward``); a family whose benchmark
        scores a trajectory by its own replay (CAR-bench) computes it here instead."""
        return task.reward(passed)

    def official_reward(self, task: EnvTask, messages: list[Message], termination: str = "agent_stop"
                        ) -> tuple[float, str] | None:
        """(reward, note) from the benchmark's own evaluator, where it is installed (agreement checks and
        the verifier benchmark); None where the family has none to run."""
        return None

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
