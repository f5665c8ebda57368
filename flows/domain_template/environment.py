"""The environment: a small gym's class bookings, written directly on ``evosyn.envs.base.Domain``.

Replace the state, the tools and the official tasks with your own; keep the shape:

- the state is a pydantic model (``State``), built fresh by ``initial_state()``;
- each tool is a function ``(state, args) -> result`` with a pydantic model of its arguments and a kind:
  ``write`` changes the state, ``read`` only looks, ``generic`` is neither;
- a tool refuses a call by raising ``ValueError``: the agent gets it back as an error observation;
- ``OFFICIAL`` are the domain's own benchmark tasks, in tau2's task model (``evosyn.envs.tau2.task.Tau2Task``, which
  meets ``evosyn.envs.base.EnvTask``); none at all is allowed (runs then test on the uniform test set only). A domain
  with tasks of its own form implements ``EnvTask`` for them instead (``envs/base.py``).
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from evosyn.envs.base import Domain, Episode, EnvSummary, Observation, Requestor, TaskDraft, ToolKind, ToolSpec
from evosyn.envs.tau2.task import Tau2Task, draft_json

NAME = __package__.rpartition(".")[2]  # the domain's name is its folder's name
MAX_BOOKINGS = 3  # the policy's one rule: classes a member may have booked at once (policy.py checks it)

POLICY = f"""# Gym front desk policy

You help members of the gym book and cancel places in classes.

- Identify the member by their member id before anything else, and look up the class you act on.
- A member may have at most {MAX_BOOKINGS} classes booked at once: refuse a booking above that.
"""


# ------------------------------------------------------------------ the state
class Member(BaseModel):
    member_id: str
    name: str
    bookings: list[str] = Field(default_factory=list, description="Ids of the classes the member has booked")


class GymClass(BaseModel):
    class_id: str
    title: str
    capacity: int
    attendees: list[str] = Field(default_factory=list, description="Ids of the members booked")


class State(BaseModel):
    members: dict[str, Member]
    classes: dict[str, GymClass]


def initial_state() -> State:
    classes = {f"C{n}": GymClass(class_id=f"C{n}", title=t, capacity=c)
               for n, (t, c) in enumerate([("Yoga", 8), ("Spin", 2), ("Pilates", 6), ("Boxing", 4),
                                           ("Rowing", 5), ("Zumba", 10)], 1)}
    members = {}
    # bookings chosen so the rule has a member it applies to (M3 is at the limit)
    for n, (name, booked) in enumerate([("Ada", []), ("Ben", ["C1"]), ("Cleo", ["C1", "C2", "C4"]), ("Dev", []),
                                        ("Eli", ["C3"])], 1):
        members[f"M{n}"] = Member(member_id=f"M{n}", name=name, bookings=list(booked))
        for class_id in booked:
            classes[class_id].attendees.append(f"M{n}")
    return State(members=members, classes=classes)


# ------------------------------------------------------------------ the tools
class MemberArgs(BaseModel):
    model_config = {"extra": "forbid"}
    member_id: str = Field(description="The member's id, such as 'M1'.")


class ClassArgs(BaseModel):
    model_config = {"extra": "forbid"}
    class_id: str = Field(description="The class's id, such as 'C1'.")


class BookingArgs(BaseModel):
    model_config = {"extra": "forbid"}
    member_id: str = Field(description="The member's id.")
    class_id: str = Field(description="The class's id.")


class TransferArgs(BaseModel):
    model_config = {"extra": "forbid"}
    summary: str = Field(description="What the member needs.")


def _member(state: State, member_id: str) -> Member:
    if member_id not in state.members:
        raise ValueError(f"Member {member_id} not found")
    return state.members[member_id]


def _class(state: State, class_id: str) -> GymClass:
    if class_id not in state.classes:
        raise ValueError(f"Class {class_id} not found")
    return state.classes[class_id]


def get_member_details(state: State, a: MemberArgs) -> Member:
    return _member(state, a.member_id)


def get_class_details(state: State, a: ClassArgs) -> GymClass:
    return _class(state, a.class_id)


def book_class(state: State, a: BookingArgs) -> Member:
    member, gym_class = _member(state, a.member_id), _class(state, a.class_id)
    if a.class_id in member.bookings:
        raise ValueError(f"Member {a.member_id} has already booked class {a.class_id}")
    if len(gym_class.attendees) >= gym_class.capacity:
        raise ValueError(f"Class {a.class_id} is full")
    member.bookings.append(a.class_id)
    gym_class.attendees.append(a.member_id)
    return member


def cancel_booking(state: State, a: BookingArgs) -> Member:
    member, gym_class = _member(state, a.member_id), _class(state, a.class_id)
    if a.class_id not in member.bookings:
        raise ValueError(f"Member {a.member_id} has not booked class {a.class_id}")
    member.bookings.remove(a.class_id)
    gym_class.attendees.remove(a.member_id)
    return member


def transfer_to_human_agents(state: State, a: TransferArgs) -> str:
    return "Transfer successful"


@dataclass(frozen=True)
class Tool:
    run: Callable[[State, Any], Any]
    kind: ToolKind
    args: type[BaseModel]
    description: str


TOOLS: dict[str, Tool] = {t.run.__name__: t for t in [
    Tool(get_member_details, "read", MemberArgs, "Get a member's details, with the classes they booked."),
    Tool(get_class_details, "read", ClassArgs, "Get a class's details: its capacity and who is booked."),
    Tool(book_class, "write", BookingArgs, "Book a place in a class for a member."),
    Tool(cancel_booking, "write", BookingArgs, "Cancel a member's booking of a class."),
    Tool(transfer_to_human_agents, "generic", TransferArgs, "Transfer the member to a human agent."),
]}


# ------------------------------------------------------------------ checks on a final state (tau2 env assertions)
def holds_booking(state: State, member_id: str, class_id: str) -> bool:
    return class_id in state.members.get(member_id, Member(member_id="", name="")).bookings


ASSERTIONS: dict[str, Callable[..., bool]] = {"holds_booking": holds_booking}


# ------------------------------------------------------------------ the Domain and its Episode
class GymEpisode(Episode):
    def __init__(self, state: State):
        self.state = state

    def step(self, name: str, arguments: dict[str, Any], requestor: Requestor = "assistant") -> Observation:
        tool = TOOLS.get(name) if requestor == "assistant" else None
        if tool is None:
            return Observation(f"Error: no {requestor} tool named {name}", error=True)
        try:
            result = tool.run(self.state, tool.args.model_validate(arguments))
        except (ValueError, ValidationError) as exc:  # a refused call is data for the agent, never raised
            return Observation(f"Error: {str(exc).splitlines()[0]}", error=True)
        return Observation(result.model_dump_json() if isinstance(result, BaseModel) else json.dumps(result))

    def state_digest(self) -> str:
        return hashlib.sha256(self.state.model_dump_json().encode()).hexdigest()

    def check_assertion(self, assertion: Any) -> bool:
        check = ASSERTIONS.get(assertion.func_name)
        return check is not None and check(self.state, **assertion.arguments) == assertion.assert_value


class GymDomain(Domain):
    name = NAME
    evaluation_split = "base"  # `evaluate --official` scores this split: the only one here (the default is "test")
    policy = POLICY
    digest_scheme = f"{NAME}/state-json-v1"  # bump when the state's JSON form changes

    def __init__(self) -> None:
        self.initial = initial_state()

    def tools(self, requestor: Requestor | None = None) -> list[ToolSpec]:
        if requestor == "user":  # this domain's user has no tools of their own
            return []
        return [ToolSpec(name=n, kind=t.kind, requestor="assistant", description=t.description,
                         parameters=t.args.model_json_schema()) for n, t in TOOLS.items()]

    def validate_arguments(self, name: str, arguments: dict[str, Any],
                           requestor: Requestor = "assistant") -> str | None:
        tool = TOOLS.get(name) if requestor == "assistant" else None
        if tool is None:
            return f"no {requestor} tool named {name!r}"
        try:
            tool.args.model_validate(arguments)
        except ValidationError as exc:
            return f"{name}: arguments do not match the schema: {exc.errors()[0]['msg']}"
        return None

    def episode(self, initial_state: Any = None) -> GymEpisode:
        if initial_state is not None:  # a task's own starting state: this domain's tasks all share one
            raise ValueError(f"{self.name}: tasks start from the initial state (a task's initial_state is not used)")
        return GymEpisode(self.initial.model_copy(deep=True))

    def tasks(self, split: str | None = None) -> list[Tau2Task]:
        if split not in (None, "base"):
            raise KeyError(f"unknown split {split!r} for {self.name}; known: base")
        return official_tasks()

    def task_from_json(self, data: dict[str, Any]) -> Tau2Task:
        return Tau2Task.from_json(data)

    def make_task(self, draft: TaskDraft) -> Tau2Task:
        return Tau2Task.from_json(draft_json(draft))

    def splits(self) -> dict[str, int]:
        return {"base": len(OFFICIAL)}

    def summary(self) -> EnvSummary:
        return EnvSummary(domain=self.name,
                          entity_counts={"members": len(self.initial.members), "classes": len(self.initial.classes)},
                          example_ids={"members": list(self.initial.members)[:3],
                                       "classes": list(self.initial.classes)[:3]},
                          tools={n: t.kind for n, t in TOOLS.items()})


# ------------------------------------------------------------------ the official tasks
# (id, member, request, gold actions). The official-matched test set is drawn to match their cells (family,
# outcome, write and read counts); with none, `evosyn run` tests on the uniform set alone.
OFFICIAL = [
    ("0", "M1", "book a place in class C3", [("get_member_details", {"member_id": "M1"}),
                                             ("get_class_details", {"class_id": "C3"}),
                                             ("book_class", {"member_id": "M1", "class_id": "C3"})]),
    ("1", "M2", "cancel your booking of class C1", [("get_member_details", {"member_id": "M2"}),
                                                    ("cancel_booking", {"member_id": "M2", "class_id": "C1"})]),
]


def official_tasks() -> list[Tau2Task]:
    return [Tau2Task.from_json({
        "id": task_id,
        "user_scenario": {"instructions": {
            "domain": NAME, "reason_for_call": f"You want to {request}.",
            "known_info": f"Your member id is {member_id}.",
            "unknown_info": "You do not know the gym's internal rules.",
            "task_instructions": "Confirm each change with 'yes' when the agent describes it."}},
        "evaluation_criteria": {
            "actions": [{"action_id": f"{task_id}-{n}", "name": name, "arguments": args}
                        for n, (name, args) in enumerate(actions)],
            "communicate_info": [], "reward_basis": ["DB", "COMMUNICATE"]}})
        for task_id, member_id, request, actions in OFFICIAL]
